"""The host's memory as Linux states it (/proc/meminfo) and the container's cgroup v2 limit:
read by a CPU rank (what it may still take) and by the driver (what a sweep may ask for)."""

from __future__ import annotations

from pathlib import Path

MEMINFO = Path("/proc/meminfo")
CGROUP = Path("/sys/fs/cgroup")


def meminfo_bytes(field: str, meminfo: Path | None = None) -> int | None:
    """One /proc/meminfo field ("MemTotal", "MemAvailable") in bytes; None when unreadable."""
    try:
        for line in (meminfo or MEMINFO).read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def cgroup_int(path: Path) -> int | None:
    """A cgroup file's number; None when absent or "max" (no limit)."""
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None
