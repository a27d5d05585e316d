"""One node's inventory, as seen from inside the worker container: `python -m kit.worker.nodeinfo`.

Multi-node runs record every node, not only the machine the driver runs on: its name, CPUs,
memory, GPUs (NVML, when there are any) and above all its network, since the inter-node link
often limits a multi-node run: every interface with its address, link speed
(/sys/class/net/*/speed, Mb/s), MTU and state, and the InfiniBand ports (/sys/class/infiniband).
Prints one JSON line. Standard library only (pynvml when installed): this runs in the image.
"""

from __future__ import annotations

import fcntl
import json
import os
import platform
import socket
import struct
import sys
from pathlib import Path
from typing import Any

SYS_NET = Path("/sys/class/net")
SYS_IB = Path("/sys/class/infiniband")
_SIOCGIFADDR = 0x8915


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:  # e.g. reading `speed` of a link that is down raises EINVAL
        return None


def _ipv4(name: str) -> str | None:
    """The interface's IPv4 address (the SIOCGIFADDR ioctl: no `ip` binary in the image)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            packed = fcntl.ioctl(s.fileno(), _SIOCGIFADDR, struct.pack("256s", name[:15].encode()))
        except OSError:
            return None
    return socket.inet_ntoa(packed[20:24])


def interfaces(root: Path = SYS_NET) -> list[dict[str, Any]]:
    """Every network interface but loopback: name, address, speed (Mb/s), MTU, state, kind."""
    out = []
    for path in sorted(root.iterdir()) if root.is_dir() else []:
        name = path.name
        if name == "lo":
            continue
        speed = _read(path / "speed")
        kind = "infiniband" if _read(path / "type") == "32" else "ethernet"
        if (path / "bridge").is_dir():
            kind = "bridge"
        elif not (path / "device").exists():
            kind = "virtual" if kind == "ethernet" else kind
        out.append(
            {
                "name": name,
                "address": _ipv4(name),
                # -1 (or unreadable): the driver does not know (virtual links, links that are down)
                "speed_mbps": int(speed) if speed and speed.isdigit() else None,
                "mtu": int(_read(path / "mtu") or 0) or None,
                "state": _read(path / "operstate"),
                "kind": kind,
                "mac": _read(path / "address"),
            }
        )
    return out


def infiniband(root: Path = SYS_IB) -> list[dict[str, Any]]:
    """InfiniBand/RoCE ports: device, port, rate ("400 Gb/sec (4X NDR)"), state, link layer."""
    out = []
    for dev in sorted(root.iterdir()) if root.is_dir() else []:
        for port in sorted((dev / "ports").iterdir()) if (dev / "ports").is_dir() else []:
            out.append(
                {
                    "device": dev.name,
                    "port": int(port.name) if port.name.isdigit() else port.name,
                    "rate": _read(port / "rate"),
                    "state": _read(port / "state"),
                    "link_layer": _read(port / "link_layer"),
                }
            )
    return out


def gpus() -> list[dict[str, Any]] | None:
    """GPU names and memory through NVML; None when there is no NVML (CPU nodes)."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:
        return None
    try:
        found = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            name = pynvml.nvmlDeviceGetName(h)
            found.append(
                {
                    "index": i,
                    "name": name.decode() if isinstance(name, bytes) else str(name),
                    "memory_total_gib": round(pynvml.nvmlDeviceGetMemoryInfo(h).total / 2**30, 1),
                }
            )
        return found
    finally:
        pynvml.nvmlShutdown()


def memory_bytes() -> int | None:
    for line in (_read(Path("/proc/meminfo")) or "").splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) * 1024
    return None


def collect() -> dict[str, Any]:
    return {
        "hostname": socket.gethostname(),
        "kernel": platform.release(),
        "arch": platform.machine(),
        "cpus": os.cpu_count(),
        "mem_total_bytes": memory_bytes(),
        "gpus": gpus(),
        "interfaces": interfaces(),
        "infiniband": infiniband(),
    }


if __name__ == "__main__":
    print(json.dumps(collect()))
    sys.exit(0)
