"""Acceptance verdicts: PASS, FAIL or UNDECIDED, decided by the interval, never the point estimate;
NOT COMPARABLE where the reference does not apply to the run (kit.report.accept decides that).

The rule (for a higher-is-better metric; mirrored for times):

    threshold = reference x (1 - tolerance)
    PASS       the interval's lower end is at or above the threshold
    FAIL       the interval's upper end is below it
    UNDECIDED  the interval straddles it, or there is no confidence interval (fewer than 3 runs:
               a range of 2 runs is not one); with the repeats that would settle it, projected
               from the spread seen so far

Every finished repeat counts: no best-of-N, no "passes on the first run that clears the bar".
The interval is the one the report prints for the same values (kit.stats.summarize), so a
verdict and the figure beside it never disagree.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy.special import stdtrit

from kit.shared.gpu_specs import gpu_model_key
from kit.shared.metrics import figure
from kit.stats import summarize
from kit.stats.intervals import CONFIDENCE

PASS, FAIL, UNDECIDED = "PASS", "FAIL", "UNDECIDED"
NOT_COMPARABLE = "NOT COMPARABLE"
"""Neither pass nor fail: the reference's own conditions exclude this run (8 GPUs with NVLS
there, 2 with NVLS off here); nothing was judged."""
RULE = (
    "PASS when the interval's lower end clears the threshold (reference less the tolerance; "
    "for times, more), FAIL when its upper end does not reach it, UNDECIDED when it straddles "
    "it or there is no confidence interval (fewer than 3 runs); every repeat counts"
)
MIN_RUNS = 3
"""Fewer finished runs give no confidence interval (kit.stats: 2 give only their range)."""
MAX_PROJECTED = 200
"""Projections past this many runs are reported as "more than 200": the spread, not the count,
is then the problem."""


@dataclass(frozen=True)
class Decision:
    """One metric of one benchmark and variant against one reference figure."""

    verdict: str
    metric: str
    unit: str
    higher_is_better: bool
    n: int
    median: float
    low: float | None
    high: float | None
    interval: str  # what (low, high) is, in the report's words
    threshold: float
    reference: float
    tolerance: float
    reason: str
    more_repeats: int | None = None  # UNDECIDED: how many more runs would settle it

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def sentence(self) -> str:
        """E.g. "PASS: 95% t-interval 325.9 to 327.0 GB/s (n=3) clears the threshold 313.5
        GB/s (330 less 5%)"."""
        return f"{self.verdict}: {self.reason}"


def threshold_of(reference: float, tolerance: float, higher_is_better: bool) -> float:
    return reference * (1 - tolerance) if higher_is_better else reference * (1 + tolerance)


def decide(
    values: Sequence[float],
    reference: float,
    tolerance: float,
    higher_is_better: bool,
    metric: str = "",
    unit: str = "",
) -> Decision:
    """The verdict of `values` (every finished repeat) against `reference` within `tolerance`."""
    if not 0 <= tolerance < 1:
        raise ValueError(f"tolerance must be in [0, 1), got {tolerance}")
    thr = threshold_of(reference, tolerance, higher_is_better)
    s = summarize(values)
    side = "less" if higher_is_better else "more"
    limit = (
        f"the threshold {figure(thr)} {unit} ({figure(reference)} {side} {tolerance:.0%})"
        if tolerance
        else f"the threshold {figure(thr)} {unit}"
    ).replace("  ", " ")
    base = dict(
        metric=metric,
        unit=unit,
        higher_is_better=higher_is_better,
        n=s.n,
        median=s.median,
        threshold=thr,
        reference=reference,
        tolerance=tolerance,
    )
    if not s.is_ci:
        projected = _more_repeats(values, thr)
        more = max(MIN_RUNS - s.n, projected or 0)
        settle = (
            f"about {more} more run{'s' if more > 1 else ''} would settle it at this spread"
            if projected is not None
            else f"{more} more run{'s' if more > 1 else ''} would give an interval"
        )
        return Decision(
            UNDECIDED,
            low=None,
            high=None,
            interval=s.label,
            reason=(
                f"{s.n} run{'s give' if s.n > 1 else ' gives'} no confidence interval ({s.label}); "
                f"median {figure(s.median)} {unit} against {limit}; {settle}"
            ),
            more_repeats=more,
            **base,
        )
    span = s.words(unit)
    clears = s.ci_low >= thr if higher_is_better else s.ci_high <= thr
    misses = s.ci_high < thr if higher_is_better else s.ci_low > thr
    if clears:
        verdict, reason, more = PASS, f"{span} clears {limit}", None
    elif misses:
        verdict, reason, more = FAIL, f"{span} does not reach {limit}", None
    else:
        more = _more_repeats(values, thr)
        settle = (
            f"about {more} more run{'s' if more > 1 else ''} would settle it at this spread"
            if more is not None
            else f"more runs would not settle it: the runs sit on the threshold (over "
            f"{MAX_PROJECTED} projected)"
        )
        verdict, reason = UNDECIDED, f"{span} straddles {limit}; {settle}"
    return Decision(
        verdict,
        low=s.ci_low,
        high=s.ci_high,
        interval=s.label,
        reason=reason,
        more_repeats=more,
        **base,
    )


def _more_repeats(values: Sequence[float], threshold: float) -> int | None:
    """Runs to add before a 95% t-interval on the logs, as wide as the present spread implies,
    lies wholly on one side of the threshold; None past MAX_PROJECTED or with no spread known.

    A projection, not a promise: the spread of the next runs may differ from these."""
    x = np.asarray(values, dtype=float)
    if len(x) < 2 or (x <= 0).any() or threshold <= 0:
        return None
    logs = np.log(x)
    sd, gap = float(np.std(logs, ddof=1)), abs(float(np.mean(logs)) - math.log(threshold))
    if sd == 0:
        return max(0, MIN_RUNS - len(x)) if gap > 0 else None
    if gap == 0:
        return None
    for m in range(max(len(x) + 1, MIN_RUNS), MAX_PROJECTED + 1):
        if float(stdtrit(m - 1, 0.5 + CONFIDENCE / 2)) * sd / math.sqrt(m) < gap:
            return m - len(x)
    return None


def overall(verdicts: Iterable[str]) -> str:
    """FAIL if any fails, else UNDECIDED if any is, else NOT COMPARABLE if any reference did
    not apply, else PASS (no verdict at all: UNDECIDED). PASS means every judged one passed."""
    verdicts = set(verdicts)
    if FAIL in verdicts:
        return FAIL
    if UNDECIDED in verdicts or not verdicts:
        return UNDECIDED
    if NOT_COMPARABLE in verdicts:
        return NOT_COMPARABLE
    return PASS


@dataclass(frozen=True)
class Basis:
    """What a reference was measured on, or what a run ran on: the one set of conditions every
    reference (recipe `expect`, shipped bundle, published figure) is matched on before anything
    is judged (`mismatches`). None: not recorded."""

    gpu_model: str | None  # on the CPU: the CPU's model (hardware.json host.cpu_model)
    gpus: int | None  # on the CPU: the processes (gloo ranks) the run had
    task: str | None  # the workload kind ("allreduce", "llama_lora_fsdp")
    device: str | None  # "GPU" or "CPU"
    metric: str | None
    task_differs: tuple[str, ...] = ()  # a reference's own words on how its task differs
    scale: str | None = None  # "smoke" or "full" for a bundle's runs; None: a figure, a number

    @property
    def words(self) -> str:
        """ "2x NVIDIA H200", "a GPU model not recorded", or on the CPU "2 processes on the CPU
        (AMD EPYC 7B13)"."""
        if self.device == "CPU":
            model = f" ({self.gpu_model})" if self.gpu_model else ", its model not recorded"
            count = f"{self.gpus} processes on " if self.gpus else ""
            return f"{count}the CPU{model}"
        model = self.gpu_model or "GPUs of a model not recorded"
        return f"{self.gpus}x {model}" if self.gpus else model


def same_model(reference: str | None, run: str | None) -> bool:
    """The run's GPU is the reference's model ("H100 / H200" names either)."""
    mine = gpu_model_key(run)
    return bool(mine) and any(gpu_model_key(p) == mine for p in (reference or "").split("/"))


WINDOW_WORDS = {"throughput": "the median step", "throughput_window": "the whole timed window"}


def device_mismatch(ref: str | None, run: str | None) -> str | None:
    """The words when a reference's kind of device is not the run's: a figure for GPUs never
    judges a run on the CPU (device cpu), which measured no GPU."""
    if not (ref and run) or ref == run:
        return None
    if run == "CPU":
        return f"measured on {ref}s there; this run ran on the CPU (device cpu) and measured no GPU"
    return f"measured on {ref}s there, run on the {run} here"


def scale_of(smoke: bool | None) -> str | None:
    """A bundle's scale as Basis.scale holds it: "smoke" (sizes shrunk to check the method),
    "full", or None (not a bundle: a figure, a number)."""
    return None if smoke is None else ("smoke" if smoke else "full")


def scale_mismatch(ref: str | None, run: str | None) -> str | None:
    """The one rule on scale, for acceptance and for `kit compare`'s ratios: a smoke run's
    numbers never judge, and are never judged by, a full run's."""
    if not (ref and run) or ref == run:
        return None
    return (
        f"{ref}-scale runs there, {run}-scale here (smoke shrinks the sizes to check the "
        "method: its numbers do not measure the hardware)"
    )


def _cpu_machine(ref: Basis, run: Basis) -> list[str]:
    """A CPU run judged by a CPU run: the same CPU model (recorded on both sides) and as many
    processes; no GPU field is asked (there are none)."""
    out = []
    if not (ref.gpu_model and run.gpu_model):
        out.append("the CPU model is not recorded on both sides")
    elif ref.gpu_model != run.gpu_model:
        out.append(f"CPU {ref.gpu_model} there, {run.gpu_model} here")
    if ref.gpus != run.gpus:
        out.append(
            f"{ref.gpus or 'an unrecorded count of'} processes there, "
            f"{run.gpus or 'an unrecorded count'} here"
        )
    return out


def _gpu_machine(ref: Basis, run: Basis) -> list[str]:
    """The GPU model and count: a reference that does not name them judges nothing."""
    out = []
    if not ref.gpu_model:
        out.append("the reference does not name the GPU model it was measured on")
    elif run.device != "CPU" and not same_model(ref.gpu_model, run.gpu_model):
        out.append(f"{ref.gpu_model} there, {run.gpu_model or 'a GPU model not recorded'} here")
    if not ref.gpus:
        out.append("the reference does not name the GPU count it was measured on")
    elif ref.gpus != run.gpus:
        out.append(f"{ref.gpus} GPUs there, {run.gpus or 'an unrecorded count'} here")
    return out


def mismatches(ref: Basis, run: Basis) -> list[str]:
    """Why `ref` cannot judge `run`, in words ([] when it can): the GPU model, the GPU count,
    the task, the kind of device, the scale (smoke or full, where both sides are bundles) and the
    metric must all match (CPU against CPU: the CPU model
    and the process count). A reference that does not name its model or count judges nothing;
    a median-step figure never judges a whole-window one."""
    out = []
    device = device_mismatch(ref.device, run.device)
    if device:
        out.append(device)
    cpus = ref.device == "CPU" and run.device == "CPU"  # the CPU's model and the processes
    out.extend(_cpu_machine(ref, run) if cpus else _gpu_machine(ref, run))
    if ref.task and run.task and ref.task != run.task:
        out.append(f"task {ref.task} there, {run.task} here")
    out.extend(ref.task_differs)
    scale = scale_mismatch(ref.scale, run.scale)
    if scale:
        out.append(scale)
    if ref.metric and run.metric and ref.metric != run.metric:
        there = WINDOW_WORDS.get(ref.metric, ref.metric)
        here = WINDOW_WORDS.get(run.metric, run.metric)
        out.append(f"{there} there, {here} here")
    return out
