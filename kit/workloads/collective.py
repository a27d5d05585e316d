"""What the collective sweeps share on the driver's side: their parameters, metrics and method.

A collective's folder subclasses CollectiveParams and calls collective_spec with the words that
differ (operation, nccl-tests program, bus factor, size convention, what #wrong checks). The
worker side (timing, algbw/busbw, #wrong) is kit/workloads/collective_sweep.py. Standard library
only: the worker imports the params inside the container.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar, Literal

from kit.workloads.base import STRICT, Phrase, Sweep, WorkloadSpec, check, metrics

MAX_MESSAGE_BYTES = 1 << 40
"""The largest message a recipe may name: beyond any GPU's or host's memory per process (a sweep
to it would only grow until the kernel kills it); this host's own limit is checked at
`kit reproduce` (kit.run.memory)."""


@dataclass
class CollectiveParams:
    """A sweep over message sizes, as nccl-tests' *_perf -b MIN -e MAX -f FACTOR."""

    __pydantic_config__ = STRICT
    # The parameters that change how long or how often a figure is measured, never the figure:
    # a known machine that differs from a run only in these measured the same workload
    # (kit.refs matches on every other parameter, one this list lacks included, and names these).
    # Counts of untimed and timed calls, and what is recorded beside the timed column (NCCL's
    # choice, the in-place form, the one-call latency). The sizes, dtype and timing method
    # change the figure: `timing` is how a size is timed (graph mode is compared only with
    # nccl-tests -G), and graph_max_bytes says which sizes its "auto" mode times as a graph.
    SAME_FIGURE: ClassVar[frozenset[str]] = frozenset(
        {
            "warmup_iters",
            "iters",
            "trials",
            "size_budget_s",
            "log_nccl_choice",
            "time_in_place",
            "latency",
        }
    )

    min_bytes: int = 8
    max_bytes: int = 1 << 30
    factor: int = 2
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    warmup_iters: int = 5
    iters: int = 20
    trials: int = 3
    # How a size is timed on GPUs (kit/workloads/collective_timing.py): "spin", the default,
    # queues each trial's `iters` calls behind a GPU spin so that the GPU never waits for the
    # host (nccl-tests' loop, from Python); "graph" replays them from a CUDA graph, its own mode,
    # compared only with nccl-tests -G. "auto" (graphs up to graph_max_bytes, CUDA events above)
    # and "events" (CUDA events around a host-driven loop) are the methods of earlier bundles,
    # kept so that their reruns measure as they did. The CPU (gloo) has the host clock only.
    timing: Literal["spin", "graph", "auto", "events"] = "spin"
    graph_max_bytes: int = 1 << 20
    # NCCL's algorithm and protocol per size: one extra untimed call per size with
    # NCCL_DEBUG_SUBSYS=TUNING on (kit/worker/nccl_tuning.py); false skips it.
    log_nccl_choice: bool = True
    # all-gather and reduce-scatter: also time the in-place form (nccl-tests' second column)
    # after the out-of-place one at each size; all-reduce is in place already
    time_in_place: bool = True
    # one call with an event after it, per trial: the latency a caller sees, host launch
    # included; recorded per size beside (never instead of) the per-call time of a batch
    latency: bool = True
    # At most this many seconds of warm-up and timed calls per size (0: no bound): a size whose
    # calls are slow (8 GiB at 24 GB/s with P2P off: half a second each) runs fewer of them,
    # as nccl-tests users lower -n for the largest sizes; the calls each size ran are recorded
    # in its row. Every rank takes the same counts (from the slowest rank's first call).
    size_budget_s: float = 0.0

    def __post_init__(self) -> None:
        check(self.min_bytes >= 1, "min_bytes", "at least 1")
        check(self.max_bytes >= self.min_bytes, "max_bytes", "at least min_bytes")
        check(
            self.max_bytes <= MAX_MESSAGE_BYTES,
            "max_bytes",
            f"at most {MAX_MESSAGE_BYTES} (1 TiB: no machine holds a larger message)",
        )
        check(self.factor >= 2, "factor", "at least 2")
        check(self.warmup_iters >= 0, "warmup_iters", "0 or more")
        check(self.iters >= 1, "iters", "at least 1")
        check(self.trials >= 1, "trials", "at least 1")
        check(0 <= self.size_budget_s <= 3600, "size_budget_s", "from 0 (no bound) to 3600")

    def within_budget(self, call_s: float) -> CollectiveParams:
        """These parameters for one size whose calls take `call_s` each: fewer warm-up and timed
        calls where all of them would outlast size_budget_s (a tenth of the budget for the
        warm-up, at least one call; at least 5 timed calls a trial, as the trials' spread needs
        some calls to average over); unchanged within it."""
        calls = self.warmup_iters + self.trials * self.iters
        if self.size_budget_s <= 0 or call_s * calls <= self.size_budget_s:
            return self
        warmup = min(self.warmup_iters, max(1, int(0.1 * self.size_budget_s / call_s)))
        per_trial = int((self.size_budget_s - warmup * call_s) / (self.trials * call_s))
        return replace(self, warmup_iters=warmup, iters=min(self.iters, max(5, per_trial)))

    def sizes(self) -> list[int]:
        """Message sizes in bytes: min_bytes, min_bytes*factor, ... up to max_bytes."""
        out, size = [], self.min_bytes
        while size <= self.max_bytes:
            out.append(size)
            size *= self.factor
        return out


SWEEP_METRICS = metrics("busbw_largest", "busbw_peak", "time_small_us", "wrong_total")

SWEEP_METHOD = """\
<b>{{ a.label }}.</b> Measured as nccl-tests' {{ s.sweep.tool }} measures it: for each size,
algbw = bytes / time (decimal GB/s) and busbw = algbw &times; {{ s.sweep.bus_factor }}{% if a.world %} with
n = {{ a.world|join(", ") }} ranks{% endif %}{% if a.bus_factor %} (factor {{ a.bus_factor|num }}){% endif %}.{% if a.world == [1] %}
One rank: the bus factor is 0 and no data crosses a link, so no bus bandwidth is stated (nor
drawn), only the times and the check.{% endif %}
{{ s.sweep.size }}
Sizes from {{ a.params.min_bytes|bytes }} to {{ a.params.max_bytes|bytes }}, factor {{ a.params.factor }},
{{ a.params.dtype }}; per size {{ a.params.warmup_iters }} untimed warm-up operations, then
{{ a.params.trials }} trials of {{ a.params.iters }} back-to-back {{ s.sweep.op }} operations{% if a.params.size_budget_s %},
at most {{ a.params.size_budget_s|num }} s of them per size (a size whose first operation is slow
runs fewer: the operations each size ran are in its row of the per-size data){% endif %}; a
trial's time is the slowest rank's.
Timing: {% if a.timing %}{{ a.timing|join(", ") }}{% else %}not recorded{% endif %} (spin-held,
the default on GPUs: each trial's operations queued behind a GPU spin so that the GPU never waits
for the host, as nccl-tests' C loop; a trial whose queueing outlasted the spin is dropped on every
rank and retried with a longer spin, and the time is the mean over ranks, as nccl-tests averages
it; cuda-graph: every size replayed from a CUDA graph, its own mode, compared only with
nccl-tests -G; cuda-events: device time between CUDA events around a host-driven loop, the
method of earlier bundles; host-clock: the host's clock after a synchronize, the only clock on
the CPU, the slowest rank's time). Latency, where recorded, is a separate measurement: one
operation with an event after it, the host's launch included; it is never the time column.
Before timing, each size checks the result: {{ s.sweep.check }} (#wrong).
Backend: {{ a.backend|join(", ") or "not recorded" }}. The no-p2p variant sets NCCL_P2P_DISABLE=1;
where the run recorded NCCL's own log, the transport it used is checked against the variant.
The headline is the bus bandwidth at the largest size (where the links, not the launch latency,
set the pace; the same size on every variant and machine)."""


def collective_spec(
    kind: str, label: str, description: str, params: type, sweep: Sweep
) -> WorkloadSpec:
    """The spec of one collective sweep: everything but the words in `sweep` is shared."""
    return WorkloadSpec(
        kind=kind,
        label=label,
        description=description,
        params=params,
        headline="busbw_largest",
        secondary=("time_small_us",),
        figures="sweep",
        method=SWEEP_METHOD,
        metrics=SWEEP_METRICS,
        sweep=sweep,
        ran=(Phrase(("min_bytes", "max_bytes"), "{} to {}", sizes=True), Phrase(("dtype",))),
    )
