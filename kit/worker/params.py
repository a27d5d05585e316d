"""Parameters of every benchmark kind, as plain dataclasses.

Both halves read this module: the worker builds its run from it, and the driver validates a
recipe's `params:` against the same classes (through pydantic's TypeAdapter), so a default or a
limit is written once. Standard library only: it is imported inside the container.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# Pydantic reads this attribute when it validates a plain dataclass: unknown keys are errors.
STRICT = {"extra": "forbid"}


def _check(ok: bool, field_name: str, allowed: str) -> None:
    if not ok:
        raise ValueError(f"{field_name}: must be {allowed}")


@dataclass
class AllreduceParams:
    """An all-reduce sweep with nccl-tests definitions (all_reduce_perf -b MIN -e MAX -f FACTOR)."""

    __pydantic_config__ = STRICT

    min_bytes: int = 8
    max_bytes: int = 1 << 30
    factor: int = 2
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    warmup_iters: int = 5
    iters: int = 20
    trials: int = 3
    # CUDA graphs remove launch gaps for small messages, as nccl-tests' -G does; "auto" uses them
    # up to graph_max_bytes and times plain launches with CUDA events above that. On 2x H200 the
    # graphs replayed 1 MiB messages 13% slower than nccl-tests while events matched it within 1%
    # from 2 MiB up (reports/measurements/2026-11-21-h200x2), so graphs stop at 512 KiB.
    timing: Literal["auto", "events", "graph"] = "auto"
    graph_max_bytes: int = 512 << 10

    def __post_init__(self) -> None:
        _check(self.min_bytes >= 1, "min_bytes", "at least 1")
        _check(self.max_bytes >= self.min_bytes, "max_bytes", "at least min_bytes")
        _check(self.factor >= 2, "factor", "at least 2")
        _check(self.warmup_iters >= 0, "warmup_iters", "0 or more")
        _check(self.iters >= 1, "iters", "at least 1")
        _check(self.trials >= 1, "trials", "at least 1")

    def sizes(self) -> list[int]:
        """Message sizes in bytes: min_bytes, min_bytes*factor, ... up to max_bytes."""
        out, size = [], self.min_bytes
        while size <= self.max_bytes:
            out.append(size)
            size *= self.factor
        return out


# kind -> (params class, one-line description). Training kinds are added by their modules here.
KINDS: dict[str, tuple[type, str]] = {
    "allreduce": (AllreduceParams, "NCCL/gloo all-reduce sweep, nccl-tests busbw"),
}
