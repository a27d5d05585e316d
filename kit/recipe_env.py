"""What a recipe's `env` maps (a variant's env, nodes.env) may set: tuning knobs, never code.

A recipe travels inside every bundle, and `kit reproduce BUNDLE` runs it on someone else's
machine. An environment variable can load code (LD_PRELOAD, PYTHONPATH with a sitecustomize.py,
NCCL_NET_PLUGIN, CUDA_INJECTION64_PATH), point at files anywhere (NCCL_DEBUG_FILE writes one,
TORCH_EXTENSIONS_DIR and TORCHINDUCTOR_CACHE_DIR load compiled code from one) or change what a
run measures behind the kit's back (CUDA_VISIBLE_DEVICES: gpu_ids says which GPUs). So the
variables are an allowlist of the libraries a benchmark tunes, minus every name that names a
path, a plugin or a library, and values hold no paths. The README ("Recipe env") says the same.
"""

from __future__ import annotations

import re

# the libraries whose knobs a benchmark legitimately turns
ALLOWED_PREFIXES = (
    "NCCL_",  # NCCL: transports, algorithms, protocols, channels, IB/socket settings, debug
    "CUDA_",  # CUDA runtime: launch blocking, device order, max connections, module loading
    "TORCH_",  # PyTorch: TORCH_NCCL_*, TORCH_DISTRIBUTED_DEBUG, TORCH_LOGS, TORCH_CUDA_ARCH_LIST
    "PYTORCH_",  # PYTORCH_CUDA_ALLOC_CONF, PYTORCH_NO_CUDA_MEMORY_CACHING
    "OMP_",  # OpenMP threads and placement
    "KMP_",  # Intel OpenMP affinity
    "MKL_",  # MKL threads
    "GLOO_",  # gloo (the CPU backend): GLOO_SOCKET_IFNAME
    "NVSHMEM_",  # NVSHMEM, under NCCL and torch symmetric memory
)
ALLOWED_NAMES = frozenset({"CUBLAS_WORKSPACE_CONFIG", "NVIDIA_TF32_OVERRIDE"})

# a name with one of these words (between underscores) names a path, a plugin or a library
FORBIDDEN_WORDS = frozenset(
    {"PATH", "DIR", "FILE", "HOME", "ROOT", "OUT", "PLUGIN", "PLUGINS", "LIB", "LIBS",
     "LIBRARY", "LIBRARIES", "PRELOAD", "REMOTE", "REDIS"}
)  # fmt: skip
# and these by name: code injection, or what the kit itself sets from the recipe
FORBIDDEN_NAMES = {
    "CUDA_INJECTION64_PATH": "loads a library into every CUDA process",
    "CUDA_INJECTION32_PATH": "loads a library into every CUDA process",
    "CUDA_VISIBLE_DEVICES": "the kit sets it from the variant's gpu_ids; use gpu_ids",
    "OMP_TOOL": "enables OpenMP tool libraries",
}
NAME = re.compile(r"^[A-Z][A-Z0-9_]{0,127}$")
MAX_VALUE = 4096


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
    if name in FORBIDDEN_NAMES:
        return f"{name}: not allowed ({FORBIDDEN_NAMES[name]})"
    if not (name in ALLOWED_NAMES or name.startswith(ALLOWED_PREFIXES)):
        return (
            f"{name}: not allowed; a recipe sets only tuning variables ("
            + ", ".join(p + "*" for p in ALLOWED_PREFIXES)
            + ", "
            + ", ".join(sorted(ALLOWED_NAMES))
            + "), never loader, interpreter or path variables (LD_*, PYTHON*, PATH)"
        )
    words = set(name.split("_"))
    if words & FORBIDDEN_WORDS or "INJECTION" in name:
        return f"{name}: not allowed (it names a path, a plugin or a library, which can load code)"
    if "/" in value:
        return f"{name}: the value may not hold a path ('/')"
    return None


def check_env(env: dict[str, str]) -> dict[str, str]:
    """A recipe's env map, or ValueError with the first variable refused and why."""
    for name, value in env.items():
        reason = why_refused(name, value)
        if reason:
            raise ValueError(reason)
    return env
