"""The Method page's facts: read from the runs (never assumed), and each workload's paragraph
rendered from its spec's method template, once per workload."""

from __future__ import annotations

from typing import Any

from jinja2 import Environment
from markupsafe import Markup

from kit.model import RunData
from kit.model.results import AdaptiveRecord
from kit.report import analysis
from kit.stats.acceptance import MIN_RUNS
from kit.stats.spread import noisy_reason


def _method_facts(group: list[analysis.Benchmark]) -> dict[str, Any]:
    """What a workload's method paragraph may state, read from the finished runs of every
    benchmark of that workload (one paragraph covers them all, so it must hold for each)."""
    b = group[0]
    ok = [r for g in group for v in g.variants for r in v.ok]
    data = ok[0].data if ok else RunData()
    rows = [row for r in ok for row in r.data.sizes or []]
    return {
        "label": b.label,
        "params": data.params or b.params,
        "timing": sorted({row.timing for row in rows if row.timing}),
        "world": sorted({r.world_size for r in ok if r.world_size}),
        "bus_factor": data.bus_factor,
        "backend": sorted({r.backend for r in ok if r.backend}),
        "warmup": sorted({r.data.warmup_steps for r in ok} - {None}),
        "steps": sorted({len(r.data.step_times_s or []) for r in ok} - {0}),
        "flops_formula": data.extra("flops_formula"),
        "step_note": str(data.extra("step_times_note") or "").rstrip("."),
        "peak": data.extra("peak_flops_source"),
        "weights": data.extra("weights"),
        "data": data.extra("data"),
        "whole_window": any(analysis.verdict_metric(g) == "throughput_window" for g in group),
        "synced_per_step": SYNCED_PER_STEP in str(data.extra("step_times_note") or ""),
        "window_s": _span([r.data.extra("window_s") for r in ok]),
        "window_rules": sorted({str(rule) for r in ok if (rule := r.data.extra("window_rule"))}),
        "gc_frozen": bool(ok) and all(r.data.extra("gc_note") for r in ok),
        "gc_window": _span([r.data.extra("gc_window_s") for r in ok], "ms"),
        "energy": sorted(
            {
                "counter" if (r.data.extra("energy_counter") or {}).get("complete") else "sampled"
                for r in ok
                if r.device == "cuda"
            }
        ),
    }


SYNCED_PER_STEP = "the device synchronized before each clock read"
"""What the step-times note of bundles recorded before the CUDA-event step timer says."""


def _span(values: list[Any], unit: str = "s") -> str:
    """ "1.7 s" or "1.7 to 2.9 s" over the runs' recorded seconds, in `unit` ("s": one decimal;
    "ms": whole milliseconds); "" when none."""
    scale, digits = (1e3, 0) if unit == "ms" else (1.0, 1)
    xs = sorted(float(v) * scale for v in values if isinstance(v, int | float))
    if not xs:
        return ""
    lo, hi = f"{xs[0]:.{digits}f}", f"{xs[-1]:.{digits}f}"
    return f"{lo} {unit}" if lo == hi else f"{lo} to {hi} {unit}"


def _times(n: int | None) -> str:
    """ "once", "3 times" ("? times" when the count was not recorded)."""
    return "once" if n == 1 else f"{n or '?'} times"


def adaptive_why(rec: AdaptiveRecord) -> str:
    """Why the adaptive repeats asked for more, from the CVs the bundle recorded (not its
    recorded sentence, so an older bundle's "3.0% > 3%" reads "3.04% > 3%"); "" when none was
    noisy. The report and `kit compare` both say it this way."""
    if not rec.noisy:
        return ""
    return noisy_reason({v: rec.cv.get(v) for v in rec.noisy}, rec.cv_threshold)


def repeats_words(benches: list[analysis.Benchmark]) -> str:
    """How many times each benchmark ran per variant: the count that ran, with the planned
    count and the adaptive decision beside it wherever the two differ."""
    planned = benches[0].planned_repeats if benches else None
    if all(b.repeats_ran == planned for b in benches):
        return f"Every benchmark ran {_times(planned)} per variant"
    parts = []
    for b in benches:
        words = f"{b.label} ran {_times(b.repeats_ran)} per variant"
        if b.repeats_ran != b.planned_repeats:
            added = b.repeats_ran - b.planned_repeats
            why = adaptive_why(b.adaptive) if b.adaptive else ""
            extra = (
                f"; adaptive repeats added {added}{f' ({why})' if why else ''}"
                if added > 0
                else "; the rest did not run"
            )
            words += f" ({b.planned_repeats} planned{extra})"
        parts.append(words)
    return "; ".join(parts)


def repeats_short(benches: list[analysis.Benchmark]) -> str:
    """Page 1's count: "3 repeats per variant", or "2 to 4 repeats per variant (2 planned)"."""
    planned = benches[0].planned_repeats if benches else None
    ran = sorted({b.repeats_ran for b in benches})
    if not ran or ran == [planned]:
        return f"{planned or '?'} repeat{'' if planned == 1 else 's'} per variant"
    count = f"{ran[0]}" if len(ran) == 1 else f"{ran[0]} to {ran[-1]}"
    return f"{count} repeats per variant ({planned} planned)"


def evidence_grade(benches: list[analysis.Benchmark]) -> dict[str, Any]:
    """The grade of the evidence, from the fewest runs any variant finished: a screening below
    kit.stats.acceptance.MIN_RUNS (no confidence interval, so no finding and no acceptance), else an
    acceptance. Page 1 states it; the verdicts and the trust note follow the same count."""
    counts = [len(v.ok) for b in benches for v in b.variants]
    finished = [c for c in counts if c]  # a variant with none finished is a failure, said apart
    n = min(finished) if finished else 0
    runs = f"{n} finished run{'' if n == 1 else 's'}"
    if n < MIN_RUNS:
        return {
            "grade": "screening",
            "n": n,
            "sentence": (
                f"Screening: {runs} per variant at the fewest. Fewer than {MIN_RUNS} runs give no "
                "confidence interval, so this is a first look, not an acceptance: no finding, no "
                f"verdict against a reference; rerun with --repeats {MIN_RUNS} or more to accept."
            ),
        }
    return {
        "grade": "acceptance",
        "n": n,
        "sentence": f"Acceptance grade: {runs} per variant at the fewest, each interval from them.",
    }


def method_view(benches: list[analysis.Benchmark], env: Environment) -> dict[str, Any]:
    """Facts the Method section states, read from the runs (never assumed), and each
    workload's paragraph, rendered from its spec's method template."""
    out: dict[str, Any] = {
        "repeats": repeats_words(benches),
        "repeats_short": repeats_short(benches),
        "evidence": evidence_grade(benches),
        "cv": benches[0].cv_threshold if benches else analysis.CV_THRESHOLD,
        "drift": analysis.DRIFT_THRESHOLD,
    }
    # a paragraph: keep the spaces between lines (an overlay: the shared environment is untouched)
    env = env.overlay(trim_blocks=False, lstrip_blocks=False)
    paragraphs = []
    kinds: dict[str, list[analysis.Benchmark]] = {}
    for b in benches:
        if b.spec is not None:
            kinds.setdefault(b.kind, []).append(b)
    for group in kinds.values():  # one paragraph per workload, its parameters per benchmark
        first = group[0]
        facts = _method_facts(group)
        facts["label"] = " and ".join(b.label for b in group)
        html = env.from_string(first.spec.method).render(a=facts, s=first.spec, me=out)
        params = [(b.label, _method_facts([b])["params"]) for b in group]
        paragraphs.append(
            {"label": facts["label"], "kind": first.kind, "html": Markup(html), "params": params}
        )
    out["workloads"] = paragraphs
    return out
