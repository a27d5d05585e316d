"""What a recipe's `env` maps (a variant's env, nodes.env) may set: known tuning variables, each
with a check of its value. Nothing else.

A recipe travels inside every bundle, and `kit reproduce BUNDLE` runs it on someone else's
machine. An environment variable can load code (LD_PRELOAD, NCCL_NET_PLUGIN, a device backend
plug-in), dial a host (NCCL_COMM_ID: every rank's NCCL bootstrap connects where it says), write
files anywhere (NCCL_DEBUG_FILE, TORCH_TRACE, TORCH_COMPILE_DEBUG), turn off a safety
(TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD) or change what a run measures behind the kit's back
(CUDA_VISIBLE_DEVICES: gpu_ids says which GPUs). A prefix rule (NCCL_*, TORCH_*) let all of these
through; so the rule is a table: `TUNING` names every variable a recipe may set and what its
value may be. A variable that is not in it is refused with one line, and `REFUSED` says why for
the ones a sender is most likely to try. What a user exports in their own shell for their own
run is theirs; this governs only what a recipe (and so a bundle) sets. README "Recipe env" says
the same.
"""

from __future__ import annotations

import re
from collections.abc import Callable

Check = Callable[[str], str | None]
"""A value check: None when the value is allowed, else what was expected."""


def _words(*allowed: str, lists: bool = False, negate: bool = False) -> Check:
    """One of `allowed` (case-insensitive); with `lists`, a comma list; with `negate`, a
    leading ^ (NCCL's "all but")."""
    known = {w.upper() for w in allowed}

    def check(value: str) -> str | None:
        body = value[1:] if negate and value.startswith("^") else value
        parts = body.split(",") if lists else [body]
        if all(p.upper() in known for p in parts) and body:
            return None
        return ("a comma list of " if lists else "one of ") + ", ".join(allowed)

    return check


def _int(lo: int, hi: int) -> Check:
    def check(value: str) -> str | None:
        if re.fullmatch(r"-?[0-9]{1,12}", value) and lo <= int(value) <= hi:
            return None
        return f"an integer from {lo} to {hi}"

    return check


def _pattern(regex: str, words: str) -> Check:
    compiled = re.compile(regex)

    def check(value: str) -> str | None:
        return None if compiled.fullmatch(value) else words

    return check


BOOL = _int(0, 1)
_LEVEL = _pattern(r"[0-5]|LOC|NVL|PIX|PXB|PHB|SYS", "a level: LOC, NVL, PIX, PXB, PHB, SYS or 0-5")
_IFNAME = _pattern(
    r"\^?=?[A-Za-z0-9_.:-]{1,32}(,=?[A-Za-z0-9_.:-]{1,32}){0,15}",
    "interface names or prefixes, comma-separated (^ excludes, = matches exactly)",
)
_HCA = _pattern(
    r"\^?=?[A-Za-z0-9_]{1,32}(:[0-9]{1,3})?(,=?[A-Za-z0-9_]{1,32}(:[0-9]{1,3})?){0,31}",
    "HCA names with optional :port, comma-separated (^ excludes, = matches exactly)",
)
_BYTES = _int(1, 1 << 34)
_CHANNELS = _int(1, 128)
_ALLOC_CONF = _pattern(
    r"[a-z_]{1,40}:[A-Za-z0-9_.]{1,20}(,[a-z_]{1,40}:[A-Za-z0-9_.]{1,20}){0,15}",
    "key:value pairs, comma-separated (e.g. expandable_segments:True)",
)

TUNING: dict[str, Check] = {
    # NCCL: algorithms, protocols, transports, channels and threads, IB and socket settings
    "NCCL_ALGO": _words(
        "Ring",
        "Tree",
        "CollnetDirect",
        "CollnetChain",
        "NVLS",
        "NVLSTree",
        "PAT",
        lists=True,
        negate=True,
    ),
    "NCCL_PROTO": _words("LL", "LL128", "Simple", lists=True, negate=True),
    "NCCL_P2P_DISABLE": BOOL,
    "NCCL_P2P_LEVEL": _LEVEL,
    "NCCL_SHM_DISABLE": BOOL,
    "NCCL_IB_DISABLE": BOOL,
    "NCCL_NVLS_ENABLE": _int(0, 2),
    "NCCL_NVB_DISABLE": BOOL,
    "NCCL_PXN_DISABLE": BOOL,
    "NCCL_CUMEM_ENABLE": BOOL,
    "NCCL_COLLNET_ENABLE": BOOL,
    "NCCL_MNNVL_ENABLE": _int(0, 2),
    "NCCL_RUNTIME_CONNECT": BOOL,
    "NCCL_GRAPH_MIXING_SUPPORT": BOOL,
    "NCCL_BUFFSIZE": _BYTES,
    "NCCL_CHUNK_SIZE": _BYTES,
    "NCCL_P2P_NET_CHUNKSIZE": _BYTES,
    "NCCL_P2P_NVL_CHUNKSIZE": _BYTES,
    "NCCL_P2P_PCI_CHUNKSIZE": _BYTES,
    "NCCL_NVLS_CHUNKSIZE": _BYTES,
    "NCCL_NTHREADS": _words("64", "128", "256", "512"),
    "NCCL_MIN_NCHANNELS": _CHANNELS,
    "NCCL_MAX_NCHANNELS": _CHANNELS,
    "NCCL_MIN_CTAS": _CHANNELS,
    "NCCL_MAX_CTAS": _CHANNELS,
    "NCCL_WORK_FIFO_DEPTH": _int(1, 1 << 20),
    "NCCL_LAUNCH_MODE": _words("PARALLEL", "GROUP"),
    "NCCL_CHECKS_DISABLE": BOOL,
    "NCCL_CROSS_NIC": _int(0, 2),
    "NCCL_NET_GDR_LEVEL": _LEVEL,
    "NCCL_NET_GDR_READ": BOOL,
    "NCCL_NET_SHARED_BUFFERS": BOOL,
    "NCCL_SHM_USE_CUDA_MEMCPY": BOOL,
    "NCCL_IGNORE_CPU_AFFINITY": BOOL,
    "NCCL_SOCKET_IFNAME": _IFNAME,
    "NCCL_SOCKET_FAMILY": _words("AF_INET", "AF_INET6"),
    "NCCL_SOCKET_NTHREADS": _int(1, 16),
    "NCCL_NSOCKS_PERTHREAD": _int(1, 64),
    "NCCL_IB_HCA": _HCA,
    "NCCL_IB_GID_INDEX": _int(0, 255),
    "NCCL_IB_TC": _int(0, 255),
    "NCCL_IB_SL": _int(0, 15),
    "NCCL_IB_TIMEOUT": _int(1, 31),
    "NCCL_IB_RETRY_CNT": _int(0, 7),
    "NCCL_IB_QPS_PER_CONNECTION": _int(1, 128),
    "NCCL_IB_SPLIT_DATA_ON_QPS": BOOL,
    "NCCL_IB_PCI_RELAXED_ORDERING": _int(0, 2),
    "NCCL_IB_ADAPTIVE_ROUTING": BOOL,
    "NCCL_DEBUG": _words("VERSION", "WARN", "INFO", "TRACE"),
    "NCCL_DEBUG_SUBSYS": _words(
        "INIT",
        "COLL",
        "P2P",
        "SHM",
        "NET",
        "GRAPH",
        "TUNING",
        "ENV",
        "ALLOC",
        "CALL",
        "PROXY",
        "NVLS",
        "BOOTSTRAP",
        "REG",
        "PROFILE",
        "RAS",
        "ALL",
        lists=True,
        negate=True,
    ),
    # CUDA runtime
    "CUDA_DEVICE_MAX_CONNECTIONS": _int(1, 32),
    "CUDA_LAUNCH_BLOCKING": BOOL,
    "CUDA_DEVICE_ORDER": _words("FASTEST_FIRST", "PCI_BUS_ID"),
    "CUDA_MODULE_LOADING": _words("LAZY", "EAGER"),
    "CUDA_AUTO_BOOST": BOOL,
    "CUDA_CACHE_DISABLE": BOOL,
    "CUBLAS_WORKSPACE_CONFIG": _pattern(
        r"(:[0-9]{1,7}:[0-9]{1,4}){1,4}", ":SIZE:COUNT, e.g. :4096:8"
    ),
    "NVIDIA_TF32_OVERRIDE": BOOL,
    # PyTorch: distributed and the caching allocator
    "TORCH_NCCL_ASYNC_ERROR_HANDLING": _int(0, 3),
    "TORCH_NCCL_BLOCKING_WAIT": BOOL,
    "TORCH_NCCL_AVOID_RECORD_STREAMS": BOOL,
    "TORCH_NCCL_HIGH_PRIORITY": BOOL,
    "TORCH_NCCL_USE_COMM_NONBLOCKING": BOOL,
    "TORCH_NCCL_ENABLE_MONITORING": BOOL,
    "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC": _int(1, 86400),
    "TORCH_DISTRIBUTED_DEBUG": _words("OFF", "INFO", "DETAIL"),
    "TORCH_CPP_LOG_LEVEL": _words("INFO", "WARNING", "ERROR", "FATAL"),
    "TORCH_SHOW_CPP_STACKTRACES": BOOL,
    "TORCH_LOGS": _pattern(
        r"[+-]?[a-z_.]{1,40}(,[+-]?[a-z_.]{1,40}){0,31}",
        "log names, comma-separated (e.g. +dynamo,graph_breaks)",
    ),
    "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE": BOOL,
    "PYTORCH_CUDA_ALLOC_CONF": _ALLOC_CONF,
    "PYTORCH_NO_CUDA_MEMORY_CACHING": BOOL,
    "PYTORCH_NVML_BASED_CUDA_CHECK": BOOL,
    # OpenMP, Intel OpenMP, MKL: CPU threads and placement
    "OMP_NUM_THREADS": _int(1, 4096),
    "OMP_PROC_BIND": _words("true", "false", "close", "spread", "master", "primary"),
    "OMP_PLACES": _words("threads", "cores", "sockets", "ll_caches", "numa_domains"),
    "OMP_WAIT_POLICY": _words("ACTIVE", "PASSIVE"),
    "OMP_DYNAMIC": _words("true", "false"),
    "KMP_AFFINITY": _pattern(
        r"[A-Za-z0-9_,=]{1,100}", "KMP words, e.g. granularity=fine,compact,1,0"
    ),
    "KMP_BLOCKTIME": _pattern(r"[0-9]{1,7}|infinite", "milliseconds or infinite"),
    "MKL_NUM_THREADS": _int(1, 4096),
    "MKL_DYNAMIC": _words("TRUE", "FALSE"),
    # gloo (the CPU backend) and NVSHMEM
    "GLOO_SOCKET_IFNAME": _IFNAME,
    "GLOO_DEVICE_TRANSPORT": _words("TCP", "UV"),
    "NVSHMEM_DISABLE_NVLS": BOOL,
    "NVSHMEM_DISABLE_P2P": BOOL,
}
"""Every variable a recipe may set, and the check of its value."""

REFUSED: dict[str, str] = {
    "NCCL_COMM_ID": "every rank's NCCL bootstrap would dial the host:port it names",
    "NCCL_NET": "picks a network plugin by name",
    "NCCL_NET_PLUGIN": "loads a shared object",
    "NCCL_TUNER_PLUGIN": "loads a shared object",
    "NCCL_PROFILER_PLUGIN": "loads a shared object",
    "NCCL_DEBUG_FILE": "writes a file anywhere",
    "NCCL_TOPO_FILE": "reads a file the recipe names",
    "TORCH_COMPILE_DEBUG": "writes debug files outside the bundle",
    "TORCH_TRACE": "writes trace files to a folder it names",
    "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "turns off torch.load's weights-only safety (a pickle could run code)",
    "TORCH_FORCE_WEIGHTS_ONLY_LOAD": "changes what torch.load accepts",
    "TORCH_DEVICE_BACKEND_AUTOLOAD": "loads device backend plug-ins by entry point",
    "TORCH_EXTENSIONS_DIR": "loads compiled code from a folder",
    "CUDA_INJECTION64_PATH": "loads a library into every CUDA process",
    "CUDA_INJECTION32_PATH": "loads a library into every CUDA process",
    "CUDA_VISIBLE_DEVICES": "the kit sets it from the variant's gpu_ids; use gpu_ids",
    "OMP_TOOL": "enables OpenMP tool libraries",
    "OMP_TOOL_LIBRARIES": "loads OpenMP tool libraries",
    "LD_PRELOAD": "loads a library into every process",
    "LD_LIBRARY_PATH": "changes which libraries load",
    "PYTHONPATH": "changes which Python code loads",
    "PATH": "changes which programs run",
    "MASTER_ADDR": "the kit sets the rendezvous",
    "MASTER_PORT": "the kit sets the rendezvous",
}
"""Why some variables a sender may try are refused (the rest: not a known tuning variable)."""

NAME = re.compile(r"^[A-Z][A-Z0-9_]{0,127}$")
MAX_VALUE = 256


def why_refused(name: str, value: object) -> str | None:
    """Why `name=value` may not be set by a recipe, or None when it may."""
    if not isinstance(name, str) or not name:
        return f"{name!r}: a variable name must be a non-empty string"
    if "=" in name or "\0" in name or "\n" in name or "\r" in name:
        return f"{name!r}: a variable name may not hold '=', NUL or a line break"
    if not NAME.match(name):
        return f"{name!r}: a variable name is A-Z, 0-9 and _ (upper case, at most 128)"
    if not isinstance(value, str):
        return f"{name}: the value must be a string (quote it), got {type(value).__name__}"
    if any(c in value for c in "\0\n\r"):
        return f"{name}: the value may not hold NUL or a line break"
    if len(value) > MAX_VALUE:
        return f"{name}: the value is longer than {MAX_VALUE} characters"
    if name in REFUSED:
        return f"{name}: not allowed ({REFUSED[name]})"
    check = TUNING.get(name)
    if check is None:
        return (
            f"{name}: not allowed; a recipe sets only known tuning variables (NCCL_ALGO, "
            "NCCL_PROTO, NCCL_P2P_DISABLE, ...: the list is kit.recipe.env.TUNING, in README "
            "'Recipe env'), never loader, interpreter, path or plug-in variables"
        )
    if "/" in value:
        return f"{name}: the value may not hold a path ('/')"
    expected = check(value)
    if expected is not None:
        shown = value if len(value) <= 40 else value[:40] + "..."
        return f"{name}: {shown!r} is not a value it takes (expected {expected})"
    return None


def check_env(env: dict[str, str]) -> dict[str, str]:
    """A recipe's env map, or ValueError with the first variable refused and why."""
    for name, value in env.items():
        reason = why_refused(name, value)
        if reason:
            raise ValueError(reason)
    return env
