"""The operating system's raw answers (CPUs, NUMA, memory, OS, container) and CUDA peer access."""

from __future__ import annotations

import os
import platform
import re
import socket
import sys
from pathlib import Path
from typing import Any

from kit.io.child import ChildFailed, child_json


def read_file(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def is_int(text: str) -> bool:
    return bool(re.fullmatch(r"-?\d+", text.strip()))


def count_numa_nodes() -> int:
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
    hypervisor = False
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
        elif key == "flags" and "hypervisor" in value.split():
            hypervisor = True
    return {
        "hypervisor": hypervisor,
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
    cgroup = read_file(root / "proc/1/cgroup") or ""
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


def detect_virtualization(root: Path = Path("/"), hypervisor_flag: bool = False) -> dict[str, Any]:
    """Whether this is a virtual machine: the CPU's hypervisor flag (/proc/cpuinfo) and the
    DMI vendor and product the firmware reports (absent in micro-VMs such as Firecracker)."""
    dmi = root / "sys/class/dmi/id"
    vendor, product = read_file(dmi / "sys_vendor"), read_file(dmi / "product_name")
    evidence = ["hypervisor flag in /proc/cpuinfo"] if hypervisor_flag else []
    words = f"{vendor or ''} {product or ''}".lower()
    if any(
        w in words
        for w in (
            "qemu",
            "kvm",
            "vmware",
            "virtualbox",
            "xen",
            "hvm domu",
            "virtual machine",
            "amazon ec2",
            "google compute",
            "bhyve",
        )
    ):
        evidence.append(f"DMI: {vendor} {product}".strip())
    return {"detected": bool(evidence), "evidence": evidence, "vendor": vendor, "product": product}


def collect_host_snapshot() -> dict[str, Any]:
    """The host as procfs/sysfs/platform describe it (no lscpu, no subprocess)."""
    cpuinfo = parse_cpuinfo(read_file(Path("/proc/cpuinfo")) or "")
    if not cpuinfo["model"]:
        cpuinfo["model"] = platform.processor() or platform.machine()
    online = read_file(Path("/sys/devices/system/cpu/online"))
    logical = parse_cpulist(online) if online else list(range(os.cpu_count() or 1))
    # Sockets and cores from sysfs topology when /proc/cpuinfo lacks them (ARM).
    packages, core_sets = set(), set()
    for cpu in logical:
        topo = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology")
        pkg = read_file(topo / "physical_package_id")
        sib = read_file(topo / "thread_siblings_list") or read_file(topo / "core_cpus_list")
        if pkg is not None:
            packages.add(pkg)
        if sib is not None:
            core_sets.add(sib)
    numa = []
    for node_dir in sorted(
        Path("/sys/devices/system/node").glob("node[0-9]*"), key=lambda p: int(p.name[4:])
    ):
        mem = parse_meminfo(read_file(node_dir / "meminfo") or "")
        numa.append(
            {
                "id": int(node_dir.name[4:]),
                "cpus": read_file(node_dir / "cpulist") or "",
                "mem_total_bytes": mem.get("MemTotal"),
            }
        )
    meminfo = parse_meminfo(read_file(Path("/proc/meminfo")) or "")
    osr = parse_os_release(read_file(Path("/etc/os-release")) or "")
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
        "virtualization": detect_virtualization(hypervisor_flag=cpuinfo["hypervisor"]),
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
        data = child_json([sys.executable, "-c", _CUDA_PEER_SCRIPT], timeout_s, env)
    except ChildFailed as why:
        return {"available": False, "reason": f"CUDA probe {why}"}
    return {"available": True, "reason": None, **data}
