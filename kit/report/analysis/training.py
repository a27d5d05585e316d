"""Training runs: every step time, steady-state drift, and the GPU telemetry series."""

from __future__ import annotations

import statistics
from typing import Any

from kit.model import RunResult
from kit.report.analysis.model import Benchmark
from kit.report.facts.window import timed_window, used_gpus

# A training run whose median step time differs this much between the first and second half
# of its timed window had not settled (on 2x H200 every steady run stayed within 2%).
DRIFT_THRESHOLD = 0.05
DRIFT_MIN_STEPS = 8


def step_traces(bench: Benchmark) -> list[dict[str, Any]]:
    """Every step time of every finished repeat, with its warm-up count."""
    out = []
    for v in bench.variants:
        for r in v.ok:
            steps = r.data.step_times_s
            if not steps:
                continue
            out.append(
                {
                    "variant": v.name,
                    "repeat": r.repeat,
                    "run_id": r.run_id,
                    "steps": [float(s) for s in steps],
                    "warmup": r.data.warmup_steps or 0,
                }
            )
    return out


def window_drift(steps: list[float], warmup: int) -> tuple[float, float] | None:
    """Median step time (s) of the first and of the second half of a run's timed window.

    None when there are fewer than DRIFT_MIN_STEPS timed steps (halves too short to say).
    """
    timed = steps[warmup:]
    if len(timed) < DRIFT_MIN_STEPS:
        return None
    half = len(timed) // 2
    return statistics.median(timed[:half]), statistics.median(timed[half:])


def _ms(seconds: float) -> str:
    ms = seconds * 1e3
    return f"{ms:.3g}" if ms < 100 else f"{ms:,.0f}"


def run_drift(run: RunResult) -> float | None:
    """Relative change of the median step time from the first to the second half of the run's
    timed window, or None (too few steps)."""
    steps = run.data.step_times_s
    if not steps:
        return None
    halves = window_drift([float(s) for s in steps], run.data.warmup_steps or 0)
    if halves is None or halves[0] <= 0:
        return None
    return halves[1] / halves[0] - 1


def drifting(bench: Benchmark) -> list[str]:
    """The finished runs whose step time moved more than DRIFT_THRESHOLD inside the window."""
    out = []
    for trace in step_traces(bench):
        halves = window_drift(trace["steps"], trace["warmup"])
        if halves is None or halves[0] <= 0:
            continue
        change = halves[1] / halves[0] - 1
        if abs(change) > DRIFT_THRESHOLD:
            first, second = (_ms(t) for t in halves)
            out.append(
                f"{bench.label} {trace['variant']} r{trace['repeat']}: "
                f"{first} → {second} ms ({change:+.0%})"
            )
    return out


def telemetry_series(bench: Benchmark) -> list[dict[str, Any]]:
    """Telemetry samples of every finished run that has them, per GPU the run drove (an idle
    GPU of the box beside them is not drawn: kit.report.facts.window.used_gpus, the power line's
    rule), with the run's timed window on the telemetry clock ((start, end) s, or None where it
    cannot be placed)."""
    out = []
    for v in bench.variants:
        for r in v.ok:
            tel = r.telemetry
            if tel is None or not tel.available:
                continue
            w = timed_window(r)
            for g in used_gpus(r):
                s = g.get("samples") or {}
                if s.get("t_s"):
                    out.append(
                        {
                            "variant": v.name,
                            "run_id": r.run_id,
                            "gpu": g.get("index"),
                            "samples": s,
                            "window": (w.start_s, w.end_s) if w else None,
                        }
                    )
    return out
