"""Hardware inventory: what the machine is, from NVML and the operating system.

Two steps, so the logic can be tested on recorded answers:

1. `collect_snapshot()` asks NVML, sysfs/procfs and (optionally) CUDA, and stores their raw
   answers in a plain JSON-able dict (the "snapshot"). Nothing is interpreted there.
2. `build_inventory(snapshot)` turns a snapshot into the inventory (hardware.json) by pure
   functions: topology in `nvidia-smi topo -m` words, NVLink counts, affinities, a summary line.

nvidia-smi's text is never parsed: its layout changes between drivers, NVML's answers do not.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import platform
import re
import socket
import subprocess
import sys
import time
from datetime import datetime, timezone
from itertools import combinations
from pathlib import Path
from typing import Any

from kit.worker.telemetry import decode_reasons  # NVML's throttle reason bits: one table

SCHEMA = 1
SNAPSHOT_SCHEMA = 1

# NVML's nvmlGpuTopologyLevel_t -> the word nvidia-smi topo -m prints for it.
TOPOLOGY_LEVELS = {0: "PIX", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}

# Best to worst; NV# sorts before all of them.
LINK_ORDER = ["NV", "PIX", "PXB", "PHB", "NODE", "SYS"]

LEGEND = {
    "X": "the GPU itself",
    "NV#": "a bonded set of # NVLink links (direct or through NVSwitch)",
    "PIX": "PCIe through at most one PCIe switch",
    "PXB": "PCIe through several PCIe switches, not through the CPU's host bridge",
    "PHB": "PCIe through a CPU's PCIe host bridge",
    "NODE": "PCIe and the links between host bridges inside one NUMA node",
    "SYS": "PCIe and the CPU-to-CPU link between NUMA nodes (QPI/UPI/Infinity Fabric)",
}

NVLINK_VERSIONS = {1: "1.0", 2: "2.0", 3: "2.2", 4: "3.0", 5: "3.1", 6: "4.0", 7: "5.0", 8: "6.0"}
NVLINK_DEVICE_TYPES = {0: "GPU", 1: "IBMNPU", 2: "NVSwitch", 0xFF: "unknown"}


# NVML constants used below (numeric, so older nvidia-ml-py builds work too).
_FI_NVLINK_SPEED_MBPS_COMMON = 90
_FI_NVLINK_LINK_COUNT = 91
_NVLINK_MAX_LINKS = 36
_P2P_CAPS = {"read": 0, "write": 1, "nvlink": 2, "atomics": 3}
_P2P_STATUS = {0: "OK", 1: "CNS", 2: "GNS", 3: "TNS", 4: "RD", 5: "NS", 6: "U"}


# --------------------------------------------------------------------------------------------
# Collection: raw answers into a snapshot
# --------------------------------------------------------------------------------------------


def _text(value: Any) -> Any:
    return value.decode(errors="replace") if isinstance(value, bytes) else value


def _bus_id(nvml_bus_id: Any) -> str:
    """NVML's "00000000:18:00.0" -> sysfs's "0000:18:00.0" (lower case, 4-digit domain)."""
    text = str(_text(nvml_bus_id)).strip().lower()
    domain, _, rest = text.partition(":")
    return f"{domain[-4:].rjust(4, '0')}:{rest}" if rest else text


class _Recorder:
    """Calls NVML functions, keeping answers and the error of each failed query by name."""

    def __init__(self, nvml: Any, errors: dict[str, str]) -> None:
        self.nvml = nvml
        self.errors = errors

    def __call__(self, key: str, fn_name: str, *args: Any) -> Any:
        fn = getattr(self.nvml, fn_name, None)
        if fn is None:
            self.errors[key] = f"{fn_name} not in this nvidia-ml-py"
            return None
        try:
            return fn(*args)
        except Exception as exc:  # NVMLError_NotSupported and friends: keep going
            self.errors[key] = f"{type(exc).__name__}: {exc}"
            return None


# nvmlValueType_t -> the member of the nvmlValue_t union that holds it
_VALUE_MEMBERS = {
    0: "dVal",
    1: "uiVal",
    2: "ulVal",
    3: "ullVal",
    4: "sllVal",
    5: "siVal",
    6: "usVal",
}


def _field_values(nvml: Any, handle: Any, fields: list[int]) -> dict[int, Any]:
    """Read NVML field values; returns {field_id: value} for those that answered."""
    out: dict[int, Any] = {}
    try:
        values = nvml.nvmlDeviceGetFieldValues(handle, fields)
    except Exception:
        return out
    for v in values:
        if v.nvmlReturn != 0:
            continue
        member = _VALUE_MEMBERS.get(int(v.valueType))
        if member is not None:
            out[int(v.fieldId)] = getattr(v.value, member)
    return out


def _gpu_snapshot(nvml: Any, index: int, handle: Any, cpu_words: int) -> dict[str, Any]:
    errors: dict[str, str] = {}
    q = _Recorder(nvml, errors)
    g: dict[str, Any] = {"index": index, "errors": errors}
    g["name"] = _text(q("name", "nvmlDeviceGetName", handle))
    g["uuid"] = _text(q("uuid", "nvmlDeviceGetUUID", handle))
    pci = q("pci", "nvmlDeviceGetPciInfo", handle)
    g["pci_bus_id"] = _bus_id(pci.busId) if pci is not None else None
    g["pci_device_id"] = int(pci.pciDeviceId) if pci is not None else None
    mem = q("memory", "nvmlDeviceGetMemoryInfo", handle)
    g["memory_total_bytes"] = int(mem.total) if mem is not None else None
    g["memory_used_bytes"] = int(mem.used) if mem is not None else None
    cc = q("compute_capability", "nvmlDeviceGetCudaComputeCapability", handle)
    g["compute_capability"] = list(cc) if cc is not None else None
    g["architecture"] = q("architecture", "nvmlDeviceGetArchitecture", handle)
    g["vbios_version"] = _text(q("vbios", "nvmlDeviceGetVbiosVersion", handle))
    g["persistence_mode"] = q("persistence_mode", "nvmlDeviceGetPersistenceMode", handle)
    clocks = {"graphics": 0, "sm": 1, "mem": 2}
    g["clocks_max_mhz"] = {
        k: q(f"max_clock_{k}", "nvmlDeviceGetMaxClockInfo", handle, v) for k, v in clocks.items()
    }
    g["clocks_mhz"] = {
        k: q(f"clock_{k}", "nvmlDeviceGetClockInfo", handle, v) for k, v in clocks.items()
    }
    g["power_mw"] = {
        "limit": q("power_limit", "nvmlDeviceGetPowerManagementLimit", handle),
        "default_limit": q("power_default", "nvmlDeviceGetPowerManagementDefaultLimit", handle),
        "enforced_limit": q("power_enforced", "nvmlDeviceGetEnforcedPowerLimit", handle),
        "usage": q("power_usage", "nvmlDeviceGetPowerUsage", handle),
    }
    g["pcie"] = {
        "gen_current": q("pcie_gen", "nvmlDeviceGetCurrPcieLinkGeneration", handle),
        "gen_max": q("pcie_gen_max", "nvmlDeviceGetMaxPcieLinkGeneration", handle),
        "gen_gpu_max": q("pcie_gen_gpu_max", "nvmlDeviceGetGpuMaxPcieLinkGeneration", handle),
        "width_current": q("pcie_width", "nvmlDeviceGetCurrPcieLinkWidth", handle),
        "width_max": q("pcie_width_max", "nvmlDeviceGetMaxPcieLinkWidth", handle),
    }
    aff = q("cpu_affinity", "nvmlDeviceGetCpuAffinity", handle, cpu_words)
    g["cpu_affinity_words"] = [int(w) for w in aff] if aff is not None else None
    node_words = max(1, math.ceil(_count_numa_nodes() / 64))
    maff = q("memory_affinity", "nvmlDeviceGetMemoryAffinity", handle, node_words, 0)
    g["memory_affinity_words"] = [int(w) for w in maff] if maff is not None else None
    g["gpu_numa_node_id"] = q("gpu_numa_node_id", "nvmlDeviceGetNumaNodeId", handle)
    g["sysfs"] = _pci_sysfs(g["pci_bus_id"])
    g["temperature_c"] = q("temperature", "nvmlDeviceGetTemperature", handle, 0)
    g["temperature_slowdown_c"] = q(
        "temperature_slowdown", "nvmlDeviceGetTemperatureThreshold", handle, 1
    )
    reasons = q("throttle", "nvmlDeviceGetCurrentClocksEventReasons", handle)
    if reasons is None:
        reasons = q("throttle", "nvmlDeviceGetCurrentClocksThrottleReasons", handle)
    g["throttle_reasons_mask"] = reasons
    util = q("utilization", "nvmlDeviceGetUtilizationRates", handle)
    g["utilization"] = {"gpu": util.gpu, "memory": util.memory} if util is not None else None
    g["ecc"] = {
        "mode_current": (q("ecc_mode", "nvmlDeviceGetEccMode", handle) or [None])[0],
        "volatile_uncorrected": q("ecc_vol_unc", "nvmlDeviceGetTotalEccErrors", handle, 1, 0),
        "aggregate_uncorrected": q("ecc_agg_unc", "nvmlDeviceGetTotalEccErrors", handle, 1, 1),
        "volatile_corrected": q("ecc_vol_cor", "nvmlDeviceGetTotalEccErrors", handle, 0, 0),
    }
    sbe = q("retired_sbe", "nvmlDeviceGetRetiredPages", handle, 0)
    dbe = q("retired_dbe", "nvmlDeviceGetRetiredPages", handle, 1)
    pending = q("retired_pending", "nvmlDeviceGetRetiredPagesPendingStatus", handle)
    g["retired_pages"] = (
        None
        if sbe is None and dbe is None
        else {"sbe": len(sbe or []), "dbe": len(dbe or []), "pending": pending}
    )
    rows = q("remapped_rows", "nvmlDeviceGetRemappedRows", handle)
    g["remapped_rows"] = (
        None
        if rows is None
        else dict(zip(["correctable", "uncorrectable", "pending", "failure"], rows, strict=True))
    )
    procs = q("processes", "nvmlDeviceGetComputeRunningProcesses", handle)
    g["processes"] = (
        None
        if procs is None
        else [{"pid": int(p.pid), "used_memory_bytes": p.usedGpuMemory} for p in procs]
    )
    g["nvlinks"] = _nvlinks_snapshot(nvml, handle)
    fields = _field_values(nvml, handle, [_FI_NVLINK_SPEED_MBPS_COMMON, _FI_NVLINK_LINK_COUNT])
    g["nvlink_speed_mbps_common"] = fields.get(_FI_NVLINK_SPEED_MBPS_COMMON)
    g["nvlink_link_count"] = fields.get(_FI_NVLINK_LINK_COUNT)
    return g


def _nvlinks_snapshot(nvml: Any, handle: Any) -> list[dict[str, Any]]:
    links = []
    max_links = getattr(nvml, "NVML_NVLINK_MAX_LINKS", _NVLINK_MAX_LINKS)
    for link in range(max_links):
        try:
            state = nvml.nvmlDeviceGetNvLinkState(handle, link)
        except Exception:
            continue  # this link does not exist (or the GPU has no NVLink at all)
        entry: dict[str, Any] = {"link": link, "state": int(state)}
        for key, fn in (
            ("version", "nvmlDeviceGetNvLinkVersion"),
            ("remote_device_type", "nvmlDeviceGetNvLinkRemoteDeviceType"),
        ):
            try:
                entry[key] = int(getattr(nvml, fn)(handle, link))
            except Exception:
                entry[key] = None
        try:
            entry["remote_pci_bus_id"] = _bus_id(
                nvml.nvmlDeviceGetNvLinkRemotePciInfo(handle, link).busId
            )
        except Exception:
            entry["remote_pci_bus_id"] = None
        links.append(entry)
    return links


def _pci_sysfs(bus_id: str | None) -> dict[str, Any]:
    if not bus_id:
        return {}
    base = Path("/sys/bus/pci/devices") / bus_id
    out: dict[str, Any] = {}
    for name in ("numa_node", "local_cpulist", "current_link_speed", "max_link_speed"):
        text = _read(base / name)
        if text is not None:
            out[name] = int(text) if name == "numa_node" and _is_int(text) else text
    return out


def collect_nvml_snapshot(nvml: Any = None) -> dict[str, Any]:
    """Ask NVML everything the inventory needs; never raises (errors go into the snapshot)."""
    if nvml is None:
        try:
            import pynvml as nvml  # nvidia-ml-py
        except ImportError as exc:
            return {"error": f"nvidia-ml-py is not installed ({exc})", "gpus": []}
    try:
        nvml.nvmlInit()
    except Exception as exc:
        return {"error": f"NVML did not start: {exc}", "gpus": []}
    try:
        errors: dict[str, str] = {}
        q = _Recorder(nvml, errors)
        snap: dict[str, Any] = {"error": None, "errors": errors}
        snap["driver_version"] = _text(q("driver", "nvmlSystemGetDriverVersion"))
        snap["cuda_driver_version"] = q("cuda_driver", "nvmlSystemGetCudaDriverVersion")
        snap["nvml_version"] = _text(q("nvml_version", "nvmlSystemGetNVMLVersion"))
        count = q("count", "nvmlDeviceGetCount") or 0
        handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        cpu_words = max(1, math.ceil((os.cpu_count() or 1) / 64))
        snap["gpus"] = [_gpu_snapshot(nvml, i, h, cpu_words) for i, h in enumerate(handles)]
        ancestor: list[list[int | None]] = [[None] * count for _ in range(count)]
        p2p: dict[str, list[list[int | None]]] = {
            k: [[None] * count for _ in range(count)] for k in _P2P_CAPS
        }
        for i, j in combinations(range(count), 2):
            ancestor[i][j] = ancestor[j][i] = q(
                f"topology_{i}_{j}", "nvmlDeviceGetTopologyCommonAncestor", handles[i], handles[j]
            )
            for k, cap in _P2P_CAPS.items():
                for a, b in ((i, j), (j, i)):
                    p2p[k][a][b] = q(
                        f"p2p_{k}_{a}_{b}", "nvmlDeviceGetP2PStatus", handles[a], handles[b], cap
                    )
        snap["common_ancestor"] = ancestor
        snap["p2p_status"] = p2p
        return snap
    except Exception as exc:
        return {"error": f"NVML query failed: {type(exc).__name__}: {exc}", "gpus": []}
    finally:
        with contextlib.suppress(Exception):
            nvml.nvmlShutdown()


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _is_int(text: str) -> bool:
    return bool(re.fullmatch(r"-?\d+", text.strip()))


def _count_numa_nodes() -> int:
    nodes = list(Path("/sys/devices/system/node").glob("node[0-9]*"))
    return max(1, len(nodes))


def parse_cpulist(text: str) -> list[int]:
    """ "0-3,8,10-11" -> [0, 1, 2, 3, 8, 10, 11] (the kernel's cpulist format)."""
    cpus: list[int] = []
    for part in text.strip().split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        cpus.extend(range(int(lo), int(hi or lo) + 1))
    return cpus


def format_cpulist(cpus: list[int]) -> str:
    """[0, 1, 2, 3, 8] -> "0-3,8"."""
    ranges: list[str] = []
    items = sorted(set(cpus))
    start = prev = None
    for c in [*items, None]:
        if c is not None and prev is not None and c == prev + 1:
            prev = c
            continue
        if start is not None:
            ranges.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = c
    return ",".join(ranges)


def mask_words_to_list(words: list[int]) -> list[int]:
    """NVML affinity masks (64-bit words, lowest first) -> the set bit positions."""
    return [w * 64 + b for w, word in enumerate(words) for b in range(64) if word >> b & 1]


def parse_cpuinfo(text: str) -> dict[str, Any]:
    """Model name and socket/core counts from /proc/cpuinfo (x86; ARM lacks most fields)."""
    model = None
    packages: set[str] = set()
    cores: set[tuple[str, str]] = set()
    physical = core = None
    for line in [*text.splitlines(), ""]:
        if not line.strip():
            if physical is not None and core is not None:
                cores.add((physical, core))
            physical = core = None
            continue
        key, _, value = line.partition(":")
        key, value = key.strip(), value.strip()
        if key in ("model name", "Model", "cpu model") and model is None:
            model = value
        elif key == "physical id":
            physical = value
            packages.add(value)
        elif key == "core id":
            core = value
    return {
        "model": model,
        "sockets": len(packages) or None,
        "physical_cores": len(cores) or None,
    }


def parse_meminfo(text: str) -> dict[str, int]:
    """/proc/meminfo (or a node's meminfo) -> {"MemTotal": bytes, ...}."""
    out = {}
    for line in text.splitlines():
        m = re.match(r"(?:Node \d+ )?(\w+):\s+(\d+)(?: kB)?", line)
        if m:
            out[m.group(1)] = int(m.group(2)) * (1024 if line.rstrip().endswith("kB") else 1)
    return out


def parse_os_release(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            out[key.strip()] = value.strip().strip('"')
    return out


def detect_container(
    root: Path = Path("/"), environ: dict[str, str] | None = None
) -> dict[str, Any]:
    """Whether we run in a container, and which kind, from the marks runtimes leave."""
    env = os.environ if environ is None else environ
    evidence = []
    runtime = None
    if (root / ".dockerenv").exists():
        runtime, evidence = "docker", [*evidence, "/.dockerenv"]
    if (root / "run/.containerenv").exists():
        runtime, evidence = "podman", [*evidence, "/run/.containerenv"]
    cgroup = _read(root / "proc/1/cgroup") or ""
    for word, name in (
        ("kubepods", "kubernetes"),
        ("docker", "docker"),
        ("containerd", "containerd"),
        ("lxc", "lxc"),
        ("libpod", "podman"),
    ):
        if word in cgroup:
            runtime = runtime or name
            evidence.append(f"/proc/1/cgroup mentions {word}")
    if "KUBERNETES_SERVICE_HOST" in env:
        runtime = "kubernetes" if runtime in (None, "containerd", "docker") else runtime
        evidence.append("KUBERNETES_SERVICE_HOST")
    if env.get("container"):
        runtime = runtime or env["container"]
        evidence.append(f"container={env['container']}")
    return {"detected": runtime is not None, "runtime": runtime, "evidence": evidence}


def collect_host_snapshot() -> dict[str, Any]:
    """The host as procfs/sysfs/platform describe it (no lscpu, no subprocess)."""
    cpuinfo = parse_cpuinfo(_read(Path("/proc/cpuinfo")) or "")
    if not cpuinfo["model"]:
        cpuinfo["model"] = platform.processor() or platform.machine()
    online = _read(Path("/sys/devices/system/cpu/online"))
    logical = parse_cpulist(online) if online else list(range(os.cpu_count() or 1))
    # Sockets and cores from sysfs topology when /proc/cpuinfo lacks them (ARM).
    packages, core_sets = set(), set()
    for cpu in logical:
        topo = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology")
        pkg = _read(topo / "physical_package_id")
        sib = _read(topo / "thread_siblings_list") or _read(topo / "core_cpus_list")
        if pkg is not None:
            packages.add(pkg)
        if sib is not None:
            core_sets.add(sib)
    numa = []
    for node_dir in sorted(
        Path("/sys/devices/system/node").glob("node[0-9]*"), key=lambda p: int(p.name[4:])
    ):
        mem = parse_meminfo(_read(node_dir / "meminfo") or "")
        numa.append(
            {
                "id": int(node_dir.name[4:]),
                "cpus": _read(node_dir / "cpulist") or "",
                "mem_total_bytes": mem.get("MemTotal"),
            }
        )
    meminfo = parse_meminfo(_read(Path("/proc/meminfo")) or "")
    osr = parse_os_release(_read(Path("/etc/os-release")) or "")
    try:
        shm = os.statvfs("/dev/shm")
        shm_bytes = shm.f_blocks * shm.f_frsize
    except OSError:
        shm_bytes = None
    try:
        allowed = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        allowed = logical
    return {
        "hostname": socket.gethostname(),
        "cpu_model": cpuinfo["model"],
        "sockets": cpuinfo["sockets"] or len(packages) or None,
        "physical_cores": cpuinfo["physical_cores"] or len(core_sets) or None,
        "logical_cpus": len(logical),
        "allowed_cpus": format_cpulist(allowed),
        "numa_nodes": numa,
        "mem_total_bytes": meminfo.get("MemTotal"),
        "shm_bytes": shm_bytes,
        "os": osr.get("PRETTY_NAME") or platform.system(),
        "kernel": platform.release(),
        "arch": platform.machine(),
        "python": platform.python_version(),
        "container": detect_container(),
    }


_CUDA_PEER_SCRIPT = r"""
import json, torch
n = torch.cuda.device_count()
props = [torch.cuda.get_device_properties(i) for i in range(n)]
def bus(p):
    if not hasattr(p, "pci_bus_id"):
        return None
    return "%04x:%02x:%02x.0" % (p.pci_domain_id, p.pci_bus_id, p.pci_device_id)
print(json.dumps({"torch": torch.__version__, "cuda": torch.version.cuda,
    "devices": [{"name": p.name, "pci_bus_id": bus(p)} for p in props],
    "matrix": [[None if i == j else bool(torch.cuda.can_device_access_peer(i, j))
                for j in range(n)] for i in range(n)]}))
"""


def collect_cuda_peer_access(timeout_s: float = 120.0) -> dict[str, Any]:
    """Peer access as CUDA reports it, in a child process.

    A child, so the driver never holds a CUDA context on the GPUs it is about to benchmark
    (that context would show up as "another process" and take memory). Needs torch with CUDA.
    """
    env = {**os.environ, "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    try:
        proc = subprocess.run(
            [sys.executable, "-c", _CUDA_PEER_SCRIPT],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env=env,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"available": False, "reason": f"CUDA probe did not finish: {exc}"}
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return {"available": False, "reason": f"CUDA probe failed: {last}"}
    try:
        data = json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"available": False, "reason": "CUDA probe printed no JSON"}
    return {"available": True, "reason": None, **data}


def collect_snapshot(
    *, cuda_peer: bool = True, nvml: Any = None, host: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Everything raw, in one JSON-able dict: what a fixture records and what tests replay."""
    started = time.time()
    nvml_snap = collect_nvml_snapshot(nvml)
    if not cuda_peer:
        cuda = {"available": False, "reason": "not asked"}
    elif len(nvml_snap.get("gpus", [])) < 2:
        cuda = {"available": False, "reason": "fewer than 2 GPUs: no peers to ask about"}
    else:
        cuda = collect_cuda_peer_access()
    return {
        "snapshot_schema": SNAPSHOT_SCHEMA,
        "collected_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "collect_s": round(time.time() - started, 3),
        "nvml": nvml_snap,
        "host": host if host is not None else collect_host_snapshot(),
        "cuda": cuda,
    }


def collect(*, cuda_peer: bool = True) -> dict[str, Any]:
    """The inventory of this machine, now (what hardware.json holds)."""
    return build_inventory(collect_snapshot(cuda_peer=cuda_peer))


# --------------------------------------------------------------------------------------------
# Building: a snapshot -> the inventory (pure)
# --------------------------------------------------------------------------------------------


def _nvlink_peer_counts(gpus: list[dict[str, Any]]) -> list[list[int]]:
    """Active NVLink links between each pair of GPUs.

    A link whose far end is a GPU in this snapshot counts for that pair. Links into NVSwitches
    join the GPU to the switch fabric; two GPUs on the fabric get min(their switch links), which
    is what nvidia-smi prints (NV18 between any two H100/H200 on an HGX board).
    """
    n = len(gpus)
    by_bus = {g.get("pci_bus_id"): i for i, g in enumerate(gpus)}
    direct = [[0] * n for _ in range(n)]
    switch = [0] * n
    for i, g in enumerate(gpus):
        for link in g.get("nvlinks") or []:
            if link.get("state") != 1:
                continue
            peer = by_bus.get(link.get("remote_pci_bus_id"))
            kind = link.get("remote_device_type")
            if peer is not None and peer != i and kind in (0, None):
                direct[i][peer] += 1
            elif kind == 2 or (kind is None and peer is None):
                switch[i] += 1
    counts = [[0] * n for _ in range(n)]
    for i, j in combinations(range(n), 2):
        # both ends report the same bonded links; max() copes with one end missing its answers
        d = max(direct[i][j], direct[j][i])
        s = min(switch[i], switch[j])
        counts[i][j] = counts[j][i] = d + s
    return counts


def topology_matrix(nvml_snap: dict[str, Any]) -> list[list[str]]:
    """The GPU-to-GPU matrix in nvidia-smi topo -m words: X, NV#, PIX, PXB, PHB, NODE, SYS."""
    gpus = nvml_snap.get("gpus") or []
    n = len(gpus)
    nv = _nvlink_peer_counts(gpus)
    ancestor = nvml_snap.get("common_ancestor") or [[None] * n for _ in range(n)]
    matrix = [["X"] * n for _ in range(n)]
    for i, j in combinations(range(n), 2):
        word = f"NV{nv[i][j]}" if nv[i][j] else TOPOLOGY_LEVELS.get(ancestor[i][j], "?")
        matrix[i][j] = matrix[j][i] = word
    return matrix


def link_rank(word: str) -> tuple[int, int]:
    """Sort key, best first: more NVLinks first, then PIX < PXB < PHB < NODE < SYS."""
    if word.startswith("NV"):
        return (0, -int(word[2:] or 0))
    return (LINK_ORDER.index(word), 0) if word in LINK_ORDER else (len(LINK_ORDER), 0)


def _numa_of(g: dict[str, Any]) -> list[int]:
    words = g.get("memory_affinity_words")
    if words:
        nodes = mask_words_to_list(words)
        if nodes:
            return nodes
    node = (g.get("sysfs") or {}).get("numa_node")
    return [node] if isinstance(node, int) and node >= 0 else []


def _cpus_of(g: dict[str, Any]) -> str | None:
    words = g.get("cpu_affinity_words")
    if words and any(words):
        return format_cpulist(mask_words_to_list(words))
    return (g.get("sysfs") or {}).get("local_cpulist")


def _cuda_version(v: int | None) -> str | None:
    return None if not v else f"{v // 1000}.{v % 1000 // 10}"


def _gpu_inventory(g: dict[str, Any], links_to: dict[str, str]) -> dict[str, Any]:
    mem = g.get("memory_total_bytes")
    mask = g.get("throttle_reasons_mask")
    power = g.get("power_mw") or {}
    nvlinks = []
    speed = g.get("nvlink_speed_mbps_common")
    for link in g.get("nvlinks") or []:
        bus = link.get("remote_pci_bus_id")
        kind = NVLINK_DEVICE_TYPES.get(link.get("remote_device_type"), "unknown")
        nvlinks.append(
            {
                "link": link["link"],
                "active": link.get("state") == 1,
                "version": NVLINK_VERSIONS.get(link.get("version") or 0),
                "remote": links_to.get(bus, kind if kind != "GPU" else bus),
                "remote_pci_bus_id": bus,
                "speed_gbs": round(speed / 1000, 3) if speed else None,
            }
        )
    pcie = dict(g.get("pcie") or {})
    numa = _numa_of(g)
    return {
        "index": g["index"],
        "name": g.get("name"),
        "uuid": g.get("uuid"),
        "pci_bus_id": g.get("pci_bus_id"),
        "memory_total_bytes": mem,
        "memory_total_gib": round(mem / 2**30, 1) if mem else None,
        "compute_capability": ".".join(map(str, g["compute_capability"]))
        if g.get("compute_capability")
        else None,
        "vbios_version": g.get("vbios_version"),
        "persistence_mode": bool(g["persistence_mode"])
        if g.get("persistence_mode") is not None
        else None,
        "clocks_max_mhz": g.get("clocks_max_mhz"),
        "clocks_mhz": g.get("clocks_mhz"),
        "power_limit_w": _watts(power.get("enforced_limit") or power.get("limit")),
        "power_default_limit_w": _watts(power.get("default_limit")),
        "power_draw_w": _watts(power.get("usage")),
        "pcie": pcie,
        "cpu_affinity": _cpus_of(g),
        "numa_node": numa[0] if len(numa) == 1 else (numa or None),
        "gpu_numa_node_id": g.get("gpu_numa_node_id")
        if (g.get("gpu_numa_node_id") or -1) >= 0
        else None,
        "nvlinks": nvlinks,
        "nvlink_active": sum(1 for n in nvlinks if n["active"]),
        "temperature_c": g.get("temperature_c"),
        "temperature_slowdown_c": g.get("temperature_slowdown_c"),
        "throttle_reasons": decode_reasons(mask) if mask is not None else None,
        "throttle_reasons_mask": mask,
        "utilization": g.get("utilization"),
        "memory_used_bytes": g.get("memory_used_bytes"),
        "ecc": g.get("ecc"),
        "retired_pages": g.get("retired_pages"),
        "remapped_rows": g.get("remapped_rows"),
        "processes": g.get("processes"),
        "nvml_errors": g.get("errors") or {},
    }


def _watts(mw: int | None) -> float | None:
    return round(mw / 1000, 1) if mw else None


def _p2p_words(p2p: dict[str, Any] | None, n: int) -> dict[str, list[list[str]]] | None:
    if not p2p:
        return None
    return {
        k: [["X" if i == j else _P2P_STATUS.get(m[i][j], "?") for j in range(n)] for i in range(n)]
        for k, m in p2p.items()
    }


def _peer_access(cuda: dict[str, Any], gpus: list[dict[str, Any]]) -> dict[str, Any] | None:
    """CUDA's answers, reordered to NVML's GPU order where CUDA told us the PCI bus ids."""
    if not cuda or not cuda.get("available"):
        return None
    matrix = cuda["matrix"]
    order = list(range(len(matrix)))
    buses = [d.get("pci_bus_id") for d in cuda.get("devices", [])]
    nvml_buses = [g.get("pci_bus_id") for g in gpus]
    if all(buses) and sorted(buses) == sorted(nvml_buses):
        order = [buses.index(b) for b in nvml_buses]  # NVML index -> CUDA index
    return {
        "source": f"torch {cuda.get('torch')} (CUDA {cuda.get('cuda')}): can_device_access_peer",
        "matrix": [[matrix[a][b] for b in order] for a in order],
        "cuda_index_of_gpu": order,
    }


def build_inventory(snapshot: dict[str, Any]) -> dict[str, Any]:
    """A snapshot -> hardware.json (JSON-able, `schema: 1`)."""
    nvml_snap = snapshot.get("nvml") or {}
    gpus_raw = nvml_snap.get("gpus") or []
    host = dict(snapshot.get("host") or {})
    labels = [f"GPU{g['index']}" for g in gpus_raw]
    links_to = {g.get("pci_bus_id"): f"GPU{g['index']}" for g in gpus_raw}
    gpus = [_gpu_inventory(g, links_to) for g in gpus_raw]
    matrix = topology_matrix(nvml_snap)
    words = {w for row in matrix for w in row} - {"X"}
    legend = {k: v for k, v in LEGEND.items() if k == "X" or k in words}
    if any(w.startswith("NV") for w in words):
        legend["NV#"] = LEGEND["NV#"]
    inv: dict[str, Any] = {
        "schema": SCHEMA,
        "collected_at": snapshot.get("collected_at"),
        "host": host,
        "nvml_error": nvml_snap.get("error"),
        "driver": None
        if nvml_snap.get("error")
        else {
            "version": nvml_snap.get("driver_version"),
            "cuda_driver_version": _cuda_version(nvml_snap.get("cuda_driver_version")),
            "nvml_version": nvml_snap.get("nvml_version"),
        },
        "gpus": gpus,
        "topology": {
            "labels": labels,
            "matrix": matrix,
            "legend": {k: legend[k] for k in LEGEND if k in legend},
        },
        "nvml_p2p_status": _p2p_words(nvml_snap.get("p2p_status"), len(gpus)),
        "peer_access": _peer_access(snapshot.get("cuda") or {}, gpus_raw),
        "peer_access_note": None
        if (snapshot.get("cuda") or {}).get("available")
        else (snapshot.get("cuda") or {}).get("reason"),
    }
    inv["summary"] = summary_line(inv)
    return inv


def interconnect_words(inv: dict[str, Any]) -> list[str]:
    """The distinct links between GPUs, best first, e.g. ["NV18"] or ["PIX", "NODE", "SYS"]."""
    matrix = inv.get("topology", {}).get("matrix") or []
    words = {w for row in matrix for w in row} - {"X"}
    return sorted(words, key=link_rank)


def summary_line(inv: dict[str, Any]) -> str:
    """One line for a report's first page: "2x NVIDIA H200, NV18, driver 580.95.05"."""
    gpus = inv.get("gpus") or []
    if not gpus:
        host = inv.get("host") or {}
        cpu = host.get("cpu_model") or "unknown CPU"
        cores = host.get("logical_cpus")
        return f"CPU only, no NVIDIA GPU: {cpu}" + (f", {cores} CPUs" if cores else "")
    names: dict[str, int] = {}
    for g in gpus:
        names[g.get("name") or "unknown GPU"] = names.get(g.get("name") or "unknown GPU", 0) + 1
    parts = [", ".join(f"{n}x {name}" for name, n in names.items())]
    words = interconnect_words(inv)
    if words:
        parts.append("/".join(words))
    driver = (inv.get("driver") or {}).get("version")
    if driver:
        parts.append(f"driver {driver}")
    return ", ".join(parts)


# --------------------------------------------------------------------------------------------
# Placement: GPU sets that differ in topology
# --------------------------------------------------------------------------------------------


def suggest_gpu_sets(inv: dict[str, Any], size: int = 2, max_combos: int = 20000) -> list[dict]:
    """One GPU set of `size` per distinct worst link inside the set, best link first.

    On 8 PCIe GPUs over two sockets this gives e.g. [0,1] over PIX, [0,2] over NODE and [0,4]
    over SYS: the placement experiment (same socket vs across sockets) as recipe variants. The
    lowest GPU indices win ties, so the suggestion is stable.
    """
    matrix = inv.get("topology", {}).get("matrix") or []
    n = len(matrix)
    if size < 2 or size > n:
        return []
    found: dict[str, list[int]] = {}
    for k, combo in enumerate(combinations(range(n), size)):
        if k >= max_combos:
            break
        worst = max((matrix[a][b] for a, b in combinations(combo, 2)), key=link_rank)
        found.setdefault(worst, list(combo))
    out = []
    for word in sorted(found, key=link_rank):
        ids = found[word]
        numa = sorted({str(inv["gpus"][i].get("numa_node")) for i in ids})
        out.append(
            {
                "gpu_ids": ids,
                "link": word,
                "numa_nodes": numa,
                "why": _placement_why(word, len(numa) > 1),
                "variant": {
                    "name": f"gpus-{'-'.join(map(str, ids))}-{word.lower()}",
                    "gpu_ids": ids,
                },
            }
        )
    return out


def _placement_why(word: str, cross_numa: bool) -> str:
    if word.startswith("NV"):
        return f"every pair joined by {word[2:]} NVLink links"
    where = "across NUMA nodes" if cross_numa else "within one NUMA node"
    return f"PCIe ({word}), {where}"
