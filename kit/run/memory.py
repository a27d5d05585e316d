"""Before a run: a collective sweep whose largest message cannot fit this host's memory (CPU) or
a GPU's memory is refused (exit 2), before any run.

The worker stops a sweep at the largest size that fits the memory available while it runs
(kit.workloads.collective_sweep); that covers sizes a busy host cannot hold now. A size that
would not fit the whole machine (every rank holds its message: max_bytes x ranks, against the
host's total memory or its cgroup's limit, whichever is lower) can never run here: the recipe is
wrong for this host, and a run would only grow until the kernel kills it. On GPUs each rank
holds its message in its own GPU: max_bytes against the smallest GPU's total memory, where the
inventory knows it.
"""

from __future__ import annotations

from pathlib import Path

from kit.io.errors import InputError
from kit.model import RunSpec
from kit.shared import hostmem

CGROUP_MAX = hostmem.CGROUP / "memory.max"


def host_memory(meminfo: Path = hostmem.MEMINFO, cgroup_max: Path = CGROUP_MAX) -> int | None:
    """Bytes this host (or the cgroup the kit runs in) may hold at most; None when unknown."""
    total = hostmem.meminfo_bytes("MemTotal", meminfo)
    limit = hostmem.cgroup_int(cgroup_max)
    known = [v for v in (total, limit) if v]
    return min(known) if known else None


def check_cpu_sweeps(runs: list[RunSpec], device: str, memory: int | None = None) -> None:
    """Refuse a CPU sweep whose largest message, held by every rank, exceeds this host's memory."""
    if device != "cpu":
        return
    memory = host_memory() if memory is None else memory
    if not memory:
        return
    for spec in runs:
        size = spec.params.get("max_bytes")
        if not isinstance(size, int) or isinstance(size, bool):
            continue
        need = size * spec.nproc
        if need > memory:
            raise InputError(
                f"benchmark {spec.benchmark}: max_bytes {size} on {spec.nproc} CPU processes "
                f"needs at least {need / 2**30:.1f} GiB, more than this host's "
                f"{memory / 2**30:.1f} GiB of memory: lower max_bytes (or run it with --smoke)"
            )


def check_gpu_sweeps(runs: list[RunSpec], device: str, gpu_memory: list[int | None]) -> None:
    """Refuse a GPU sweep whose largest message exceeds the smallest GPU's total memory."""
    known = [m for m in gpu_memory if m]
    if device != "cuda" or not known:
        return
    smallest = min(known)
    for spec in runs:
        size = spec.params.get("max_bytes")
        if isinstance(size, int) and not isinstance(size, bool) and size > smallest:
            raise InputError(
                f"benchmark {spec.benchmark}: max_bytes {size} ({size / 2**30:.1f} GiB) is more "
                f"than a GPU here holds ({smallest / 2**30:.1f} GiB): lower max_bytes"
            )
