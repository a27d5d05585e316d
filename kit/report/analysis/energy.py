"""Page 1's energy and power of a variant: its energy per unit of work with the runs' interval,
and how the timed window stood against the power cap.

Every figure comes from kit.report.facts (the one place that computes them) over the finished
runs: a training run's from its timed window, decode's as its result recorded it.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from kit.model import Hardware, RunResult
from kit.report.analysis.model import Benchmark
from kit.report.facts.efficiency import COUNTER, KWH_J, SAMPLED, energy_per_unit
from kit.report.facts.window import POWER_CAP_REASON, WindowFacts, window_facts
from kit.stats import Summary, summarize

MIN_SAMPLES_PER_GPU = 4
"""Energy and power are printed only when the window holds this many samples per GPU
(telemetry samples every ~0.25 s: a 0.2 s window holds one or two, too few to integrate)."""


@dataclass
class Power:
    """Power inside the window the runs record (`window` says what it holds), over a variant's
    finished runs (means of the runs)."""

    runs: int
    limited: bool
    at_cap_share: float | None
    power_limit_w: float | None
    power_w_per_gpu: float
    sm_clock_mhz: float | None
    sm_clock_max_mhz: float | None
    throttle_share: dict[str, float]
    window_s: float
    window: str  # what the window holds, in words (WorkloadSpec.window)

    @property
    def sentence(self) -> str:
        """E.g. "power-limited: 100% of the window's power readings within 5% of the 700 W cap,
        698 W per GPU, SM clock 1,750 MHz against 1,980 max"."""
        capped = self.throttle_share.get(POWER_CAP_REASON, 0.0)
        near = self.at_cap_share if self.power_limit_w else None
        reading = (
            f"{near:.0%} of the window's power readings within 5% of the "
            f"{self.power_limit_w:,.0f} W cap"
            if near is not None
            else ""
        )
        reason = f"NVML's {POWER_CAP_REASON} clock reason in {capped:.0%} of its samples"
        if self.limited:
            head, joint = "power-limited", " and "
        elif capped >= 0.05 and (near is None or near >= 0.05):
            head, joint = "power-capped in part of the window", " and "
        elif capped >= 0.05:  # the clock reason without the power: never "capped" at 0%
            head, joint = "below the power cap", ", though "
        else:
            head, joint = "not power-limited", " and "
        facts = joint.join(x for x in (reading, reason if capped else "") if x)
        if facts:
            head += ": " + facts
        parts = [head, f"{self.power_w_per_gpu:,.0f} W per GPU"]
        if self.sm_clock_mhz is not None:
            top = f" against {self.sm_clock_max_mhz:,.0f} max" if self.sm_clock_max_mhz else ""
            parts.append(f"SM clock {self.sm_clock_mhz:,.0f} MHz{top}")
        return ", ".join(parts)


@dataclass
class Energy:
    """A variant's energy per unit of work, GPU boards only: the median of its finished runs,
    and the runs' interval in words (empty with one run: a buyer comparing two machines' J per
    token needs the runs' spread as much as the throughput's)."""

    j_per_unit: float
    units_per_kwh: float
    unit: str  # the unit of work, singular: "token", "output token"
    basis: str  # which reading it comes from (the energy counter or sampled power)
    interval: str = ""  # "95% t-interval of the geometric mean 0.103, n=3: 0.0998 to 0.106 J/token"
    words: str = ""  # what the figure was taken at ("at the largest batch timed")
    under: tuple[str, float] | None = None  # a second figure: (its words, J per unit)


def _interval(s: Summary, unit: str) -> str:
    return s.words(f"J/{unit}") if s.ci_available else ""


def _power(facts: list[WindowFacts], window: str) -> Power | None:
    facts = [f for f in facts if f.samples / max(1, f.gpus) >= MIN_SAMPLES_PER_GPU]
    if not facts:
        return None
    clocks = [f.sm_clock_mhz_mean for f in facts if f.sm_clock_mhz_mean is not None]
    caps = [f.at_cap_share for f in facts if f.at_cap_share is not None]
    reasons: dict[str, float] = {}
    for f in facts:
        for k, v in f.throttle_share.items():
            reasons[k] = reasons.get(k, 0.0) + v / len(facts)
    return Power(
        runs=len(facts),
        limited=sum(f.power_limited for f in facts) > len(facts) / 2,
        at_cap_share=statistics.mean(caps) if len(caps) == len(facts) else None,
        power_limit_w=facts[0].power_limit_w,
        power_w_per_gpu=statistics.mean(f.power_w_per_gpu_mean for f in facts),
        sm_clock_mhz=statistics.mean(clocks) if clocks else None,
        sm_clock_max_mhz=facts[0].sm_clock_mhz_max_spec,
        throttle_share=reasons,
        window_s=statistics.mean(f.window.seconds for f in facts),
        window=window,
    )


def recorded_energy(bench: Benchmark, variant: str) -> Energy | None:
    """The energy of a workload that records its joules per unit itself (WorkloadSpec.energy:
    decode's per output token), from the metric's summary over the runs."""
    col = bench.spec.energy if bench.spec else None
    if col is None:
        return None
    row = (bench.metrics.get(col.metric) or {}).get(variant)
    if row is None or row.summary is None or row.summary.median <= 0:
        return None
    low = (bench.metrics.get(col.under) or {}).get(variant) if col.under else None
    return Energy(
        j_per_unit=row.summary.median,
        units_per_kwh=KWH_J / row.summary.median,
        unit=col.unit,
        basis=col.basis,
        interval=_interval(row.summary, col.unit),
        words=col.words,
        under=(col.under_words, low.summary.median) if low and low.summary else None,
    )


def window_energy(
    ok: list[RunResult], hardware: Hardware, window: str
) -> tuple[Energy | None, str, Power | None]:
    """The energy over each finished run's timed window (the energy counter at its edges, else
    sampled power integrated), with why there is none where there is none, and the power."""
    by_run = [(energy_per_unit(r, hardware), window_facts(r, hardware)) for r in ok]
    facts = [f for _, f in by_run if f is not None]
    power = _power(facts, window)
    if all(e is None for e, _ in by_run):
        return None, "", power
    usable = [
        e
        for e, f in by_run
        if e is not None
        and e.complete
        and (
            e.source == COUNTER
            or (f is not None and f.samples / max(1, f.gpus) >= MIN_SAMPLES_PER_GPU)
        )
    ]
    if not usable:
        shortest = min(f.window.seconds for f in facts) if facts else 0.0
        note = (
            f"energy not measured: the timed window ({shortest:.1f} s) holds too few "
            "power samples (one every ~0.25 s)"
            if facts and shortest < 2.0
            else "energy not measured: not every GPU was sampled"
        )
        return None, note, power
    joules = summarize([e.j_per_unit for e in usable])
    sources = {e.source for e in usable}
    basis = (
        "NVML's total-energy counter of every GPU, read at each run's timed window edges"
        if sources == {COUNTER}
        else "GPU board power sampled every ~0.25 s and integrated over each run's timed window "
        "(this bundle recorded no energy counter; NVML's power reading is a one-second average, "
        "so on windows of a few seconds this reads low)"
        if sources == {SAMPLED}
        else "the energy counter where the run recorded it, sampled power elsewhere"
    )
    unit = usable[0].unit.rstrip("s")
    energy = Energy(
        j_per_unit=joules.median,
        units_per_kwh=statistics.median(e.units_per_kwh for e in usable),
        unit=unit,
        basis=basis,
        interval=_interval(joules, unit),
    )
    return energy, "", power
