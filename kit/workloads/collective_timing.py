"""How a collective sweep reads the time of one call (worker side).

nccl-tests queues its iterations back to back from C and synchronises once, so its GPU never
waits for the host. torch.distributed costs the host some 20-30 us a call, which at small sizes
is longer than the call itself: a loop timed between CUDA events then measures the host. The
default method here ("spin-held") holds the stream behind a GPU spin while the batch is queued:

    line the ranks up (barrier, then a small all-reduce, synchronised)
    [event] spin S  [start] call x iters  [end]       <- all queued before the spin ends
    per call = (end - start) / iters, averaged over ranks as nccl-tests averages its time

The host reads its own clock from before the spin is queued to after `end` is queued. The GPU
starts the spin no earlier than the host queued it, so if queueing took less than the spin the
GPU measured (the event before it to `start`), no call waited for the host. A trial that fails
this on any rank is dropped on every rank (one all-reduce of a flag), counted, and retried with
a spin twice as long. `held` is that rule; `held_trials` the loop, with every clock and
collective passed in so that its decisions are tested without a GPU.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist

from kit.worker.common import Context
from kit.workloads.collective import CollectiveParams
from kit.workloads.timing import elapsed

Op = Callable[[], None]

HELD_SHARE = 0.9
"""Queueing must end within this share of the spin the GPU measured: a margin for the few
microseconds between reading the host clock and queueing the spin."""
MIN_SPIN_S = 1e-3
"""The shortest spin: longer than the lineup's jitter between ranks."""
MAX_FIRST_SPIN_S = 0.05
"""The longest first spin: a warm-up whose calls blocked the host (a full launch queue) would
otherwise ask for seconds of idle GPU a trial; a longer spin comes only from dropped trials."""
SPIN_PER_CALL = 3.0
"""The spin covers this many times the host's queueing of the warm-up batch, per call."""
MAX_DROPS_PER_TRIAL = 3
"""Retries of one trial (each with twice the spin) before it is kept unheld, and said so."""
CALIBRATION_CYCLES = 2_000_000


def held(queue_s: float, spin_s: float, share: float = HELD_SHARE) -> bool:
    """Whether the host finished queueing a batch while the GPU still spun in front of it."""
    return queue_s <= share * spin_s


def spin_for(queue_per_call_s: float, iters: int, floor: float = MIN_SPIN_S) -> float:
    """The spin that covers queueing `iters` calls at the host's measured cost per call, between
    `floor` and MAX_FIRST_SPIN_S."""
    return min(MAX_FIRST_SPIN_S, max(floor, SPIN_PER_CALL * queue_per_call_s * iters))


@dataclass(frozen=True)
class Trial:
    """One rank's batch: time per call (s), the host's queueing (s), the spin the GPU ran (s)."""

    per_call_s: float
    queue_s: float
    spin_s: float

    @property
    def held(self) -> bool:
        return held(self.queue_s, self.spin_s)


@dataclass
class HeldTrials:
    """A size's trials: time per call (mean over ranks), trials dropped and retried, trials
    kept although queueing outlasted the spin after every retry, and the spins asked for."""

    times: list[float] = field(default_factory=list)
    dropped: int = 0
    unheld: int = 0
    spins_s: list[float] = field(default_factory=list)


def held_trials(
    trials: int,
    spin_s: float,
    run: Callable[[float], Trial],
    agree: Callable[[float, bool], tuple[float, bool]],
    max_drops: int = MAX_DROPS_PER_TRIAL,
) -> HeldTrials:
    """`trials` batches each held by a spin; a batch any rank saw unheld is dropped everywhere.

    run(spin_s) -> this rank's Trial; agree(per_call_s, held_here) -> (mean per-call time over
    ranks, held on every rank): one collective, so every rank takes the same decision and the
    ranks stay in step. After `max_drops` retries of one trial the last batch is kept and
    counted in `unheld` (the report says so) rather than lose the size.
    """
    out = HeldTrials()
    for _ in range(trials):
        for attempt in range(max_drops + 1):
            out.spins_s.append(spin_s)
            t = run(spin_s)
            mean_s, all_held = agree(t.per_call_s, t.held)
            if all_held or attempt == max_drops:
                out.times.append(mean_s)
                out.unheld += 0 if all_held else 1
                break
            out.dropped += 1
            spin_s *= 2
    return out


@dataclass(frozen=True)
class SpinClock:
    """The GPU's spin rate, calibrated once per GPU: torch.cuda._sleep counts clock cycles."""

    cycles_per_s: float

    def cycles(self, seconds: float) -> int:
        return max(1, int(seconds * self.cycles_per_s))


def calibrate() -> SpinClock:
    """Cycles per second of torch.cuda._sleep on this GPU, timed with CUDA events (median of 3
    after one to raise the clocks). Each trial measures its own spin, so this sets only its
    length, never the check."""
    rates = []
    for i in range(4):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        torch.cuda._sleep(CALIBRATION_CYCLES)
        end.record()
        end.synchronize()
        if i:
            rates.append(CALIBRATION_CYCLES / (start.elapsed_time(end) / 1e3))
    return SpinClock(statistics.median(rates))


def spin_batch(
    op: Callable[[], None],
    iters: int,
    clock: SpinClock,
    spin_s: float,
    now: Callable[[], float] = time.perf_counter,
) -> Trial:
    """One batch of `iters` calls queued behind a GPU spin; the caller lined the ranks up."""
    before = torch.cuda.Event(enable_timing=True)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t0 = now()
    before.record()
    torch.cuda._sleep(clock.cycles(spin_s))
    start.record()
    for _ in range(iters):
        op()
    end.record()
    queue_s = now() - t0
    end.synchronize()
    return Trial(start.elapsed_time(end) / 1e3 / iters, queue_s, before.elapsed_time(start) / 1e3)


def queue_cost(
    op: Callable[[], None], n: int, now: Callable[[], float] = time.perf_counter
) -> float:
    """The host's time to queue one call, from `n` calls (the warm-up); 0 when n is 0."""
    if n <= 0:
        return 0.0
    t0 = now()
    for _ in range(n):
        op()
    return (now() - t0) / n


def _mean(ctx: Context, seconds: float) -> float:
    """The mean over ranks, as nccl-tests averages each rank's time (its -a 1)."""
    t = torch.tensor([seconds], dtype=torch.float64, device=ctx.device)
    dist.all_reduce(t)
    return float(t.item()) / ctx.world_size


def _slowest(ctx: Context, seconds: float) -> float:
    t = torch.tensor([seconds], dtype=torch.float64, device=ctx.device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t.item())


def _time_eager(ctx: Context, op: Op, p: CollectiveParams) -> float:
    """Seconds per call of `iters` back-to-back calls after the warm-up, ranks lined up:
    CUDA events on a GPU, the host clock on the CPU (kit.workloads.timing)."""
    for _ in range(p.warmup_iters):
        op()
    ctx.synchronize()
    dist.barrier()
    return elapsed(ctx, op, p.iters) / p.iters


def capture(op: Op, p: CollectiveParams) -> torch.cuda.CUDAGraph:
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):  # NCCL needs a few eager calls on the capture stream before capture
            op()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(p.iters):
            op()
    torch.cuda.synchronize()
    return graph


def _time_graph(ctx: Context, graph: torch.cuda.CUDAGraph, p: CollectiveParams) -> float:
    for _ in range(max(1, p.warmup_iters // p.iters)):
        graph.replay()
    torch.cuda.synchronize()
    dist.barrier()
    return elapsed(ctx, graph.replay) / p.iters


EAGER_METHOD = {
    "spin": "spin-held",
    "graph": "spin-held",
    "auto": "cuda-events",
    "events": "cuda-events",
}
"""The method a size is timed by without a graph: a failed capture in graph mode falls back to
spin-held timing, and says so in the run's notes."""
RANK_TIME = {
    "spin-held": "mean",
    "cuda-graph": "mean",
    "cuda-events": "slowest",
    "host-clock": "slowest",
}
"""How a trial's time is taken over the ranks: spin-held and graph trials average it, as
nccl-tests does (its default -a 1); the earlier methods and the CPU take the slowest rank."""


def _lineup(ctx: Context, spin_s: float) -> float:
    """Barrier, then a small all-reduce synchronised: the ranks start their spins together, and
    every rank spins as long as the longest asked for."""
    dist.barrier()
    t = torch.tensor([spin_s], dtype=torch.float64, device=ctx.device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    torch.cuda.synchronize()
    return float(t.item())


def _agree(ctx: Context, per_call_s: float, held_here: bool) -> tuple[float, bool]:
    """(mean time per call over ranks, held on every rank): one all-reduce of both."""
    t = torch.tensor(
        [per_call_s, 0.0 if held_here else 1.0], dtype=torch.float64, device=ctx.device
    )
    dist.all_reduce(t)
    return float(t[0].item()) / ctx.world_size, float(t[1].item()) == 0.0


def _held(ctx: Context, p: CollectiveParams, op: Op, refill: Op, clock: SpinClock) -> HeldTrials:
    """Spin-held trials (kit.workloads.collective_timing): the warm-up also measures the host's
    queueing cost per call, which sets the spin."""
    cost = queue_cost(op, p.warmup_iters)
    torch.cuda.synchronize()

    def run(spin_s: float) -> Trial:
        refill()
        return spin_batch(op, p.iters, clock, _lineup(ctx, spin_s))

    return held_trials(p.trials, spin_for(cost, p.iters), run, lambda s, h: _agree(ctx, s, h))


def _trials(
    ctx: Context, p: CollectiveParams, op: Op, refill: Op, graph: Any, method: str
) -> tuple[list[float], dict[str, Any]]:
    """Each trial's time per operation over the ranks (RANK_TIME), and what the method
    records beside it (spin-held: the spins asked for, trials dropped and kept unheld)."""
    if method == "spin-held":
        h = _held(ctx, p, op, refill, _clock(ctx))
        extra = {"spin_us": [s * 1e6 for s in h.spins_s], "dropped": h.dropped, "unheld": h.unheld}
        return h.times, extra
    times = []
    for _ in range(p.trials):
        refill()
        if graph is not None:
            times.append(_mean(ctx, _time_graph(ctx, graph, p)))
        else:
            times.append(_slowest(ctx, _time_eager(ctx, op, p)))
    return times, {}


def _latency(ctx: Context, p: CollectiveParams, op: Op, refill: Op) -> list[float]:
    """One call with an event after it, `trials` times, ranks lined up first: what a single
    call costs the caller, host launch included (us, mean over ranks); the host clock on CPU."""
    out = []
    for _ in range(p.trials):
        refill()
        if ctx.is_cuda:
            _lineup(ctx, 0.0)
            out.append(_mean(ctx, elapsed(ctx, op)) * 1e6)
        else:
            dist.barrier()
            out.append(_slowest(ctx, elapsed(ctx, op)) * 1e6)
    return out


_CLOCKS: dict[int, SpinClock] = {}


def _clock(ctx: Context) -> SpinClock:
    """This GPU's spin rate, calibrated on first use (once per GPU and process)."""
    index = ctx.device.index or 0
    if index not in _CLOCKS:
        _CLOCKS[index] = calibrate()
    return _CLOCKS[index]


def timed(
    ctx: Context,
    p: CollectiveParams,
    factor: float,
    sized: tuple[Op, Op, int],
    graph: Any,
    method: str,
) -> dict[str, Any]:
    """A placement's timed fields at one size: time, algbw, busbw per trial, the method and
    what it recorded, and the separately named one-call latency."""
    op, refill, size = sized
    times, extra = _trials(ctx, p, op, refill, graph, method)
    algbw = [size / t / 1e9 for t in times]
    return {
        "time_us": [t * 1e6 for t in times],
        "algbw_gbps": algbw,
        "busbw_gbps": [a * factor for a in algbw],
        "timing": method,
        "ranks": RANK_TIME[method],
        **extra,
        "latency_us": _latency(ctx, p, op, refill) if p.latency else None,
    }
