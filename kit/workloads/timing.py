"""GPU-or-CPU timing, written once for every workload (and the training loop's step timer).

On a GPU a CUDA event is recorded on the current stream at each edge and read after the last
one: no host synchronize inside the timed span, which would drain the launch queue (it cost the
ResNet-50 DDP step 3% on an H200 against a plain loop: reports/measurements/
2026-11-23-h200x1-step-timing). Event deltas include any time the GPU waited for the host, so
launch-bound work is timed as long as it really takes. On the CPU, where work is synchronous,
the host's clock (time.perf_counter).

Timers built for one method stay with it: the spin-held batches and their calibration
(collective_timing.py) and copy_bandwidth's simultaneous lanes on several streams.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from itertools import pairwise
from typing import Any

import torch

from kit.worker.common import Context


def mark(ctx: Context) -> Any:
    """An edge of a timed span: a CUDA event recorded on the current stream on a GPU, the host
    clock on the CPU. Read two with `seconds` once the device is done."""
    if ctx.is_cuda:
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event
    return time.perf_counter()


def seconds(start: Any, end: Any) -> float:
    """Seconds between two marks (a GPU's: once `end` has completed)."""
    if isinstance(start, float):
        return end - start
    return start.elapsed_time(end) / 1e3


def elapsed(ctx: Context, op: Callable[[], Any], count: int = 1) -> float:
    """Seconds for `count` back-to-back calls of `op` (waits for the device once, after)."""
    start = mark(ctx)
    for _ in range(count):
        op()
    end = mark(ctx)
    if ctx.is_cuda:
        end.synchronize()
    return seconds(start, end)


class StepTimer:
    """Per-step times with no host synchronize inside the window: a mark at every step boundary,
    the times read once, after the window."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self._marks: list[Any] = []

    def mark(self) -> None:
        """A step boundary: call once before the first step and once after every step."""
        self._marks.append(mark(self.ctx))

    def times(self) -> list[float]:
        """Seconds between consecutive marks (waits for the device once)."""
        self.ctx.synchronize()
        return [seconds(a, b) for a, b in pairwise(self._marks)]
