"""Verdicts: variants compared on a workload's headline metric, and the recipe's references."""

from __future__ import annotations

from typing import Any

from kit.model import Hardware, RunResult
from kit.model.run import INTERRUPTED
from kit.report.analysis.model import Benchmark, VariantBlock, Verdict
from kit.report.analysis.ran import recorded
from kit.report.analysis.training import DRIFT_THRESHOLD, run_drift
from kit.report.facts.window import power_capped
from kit.shared import metrics as catalog
from kit.stats import StatsError, paired_ratio
from kit.stats.acceptance import (
    MIN_RUNS,
    NOT_COMPARABLE,
    WINDOW_WORDS,
    Basis,
    decide,
    mismatches,
    scale_of,
)
from kit.stats.spread import cv_words
from kit.workloads.registry import headline_metric


def _pairs(a: VariantBlock, b: VariantBlock, metric: str) -> tuple[list[float], list[float]]:
    """Values of repeat i of a and repeat i of b, for every i where both finished."""
    bv = {r.repeat: r for r in b.ok if metric in r.metrics}
    xs, ys = [], []
    for r in a.ok:
        other = bv.get(r.repeat)
        if other is not None and metric in r.metrics:
            xs.append(float(r.metrics[metric].value))
            ys.append(float(other.metrics[metric].value))
    return xs, ys


def compare(bench: Benchmark, a: VariantBlock, b: VariantBlock, metric: str) -> Verdict:
    """Paired ratio a / b on one metric, as a sentence ("1.37x faster (95% CI ...)")."""
    verdict = _compare(bench, a, b, metric)
    verdict.p2p = p2p_effect(a, b)
    return verdict


def p2p_effect(a: VariantBlock, b: VariantBlock) -> bool:
    """a had peer-to-peer on and b off, by what their runs held (kit.shared.p2p)."""
    return a.p2p_off is False and b.p2p_off is True


def silent(bench: Benchmark, a: VariantBlock, b: VariantBlock) -> str:
    """Why P2P on against off says nothing here ("" when it may): every finished run of both
    recorded the workload's no-traffic value (WorkloadSpec.silent: decode with tp 1, data
    parallel, moves no data between GPUs), in the workload's words."""
    rule = bench.spec.silent if bench.spec else None
    runs = a.ok + b.ok
    if rule is None or not runs or not p2p_effect(a, b):
        return ""
    return rule.why if all(_fact(r, rule.name) == rule.value for r in runs) else ""


def _fact(run: RunResult, name: str) -> Any:
    """A fact the run's result recorded under `name` (as the "what ran" line reads it), else its
    parameter of that name."""
    value = recorded(run.data, name)
    return value if value is not None else (run.data.params or {}).get(name)


def _compare(bench: Benchmark, a: VariantBlock, b: VariantBlock, metric: str) -> Verdict:
    rows = bench.metrics.get(metric) or {}
    hib = next((r.higher_is_better for r in rows.values()), True)
    label = catalog.label(metric)
    p2p_pair = p2p_effect(a, b)
    missing = [v.name for v in (a, b) if not v.ok]
    if missing:
        return Verdict(
            bench.name,
            metric,
            f"{bench.label}: no comparison of {a.name} and "
            f"{b.name}: every run of {' and '.join(missing)} failed.",
            failed=True,
        )
    xs, ys = _pairs(a, b, metric)
    quiet = silent(bench, a, b)
    if quiet:  # no ratio at all: a number here would read as the link's
        sentence = f"{bench.label}, {a.name} against {b.name}: no P2P verdict: {quiet}."
        return Verdict(bench.name, metric, sentence, pairs=len(xs), withheld=quiet)
    if not xs:
        return Verdict(
            bench.name,
            metric,
            f"{bench.label}: no repeat finished for both "
            f"{a.name} and {b.name}, so there is no paired comparison.",
            failed=True,
        )
    try:
        ratio = paired_ratio(xs, ys, higher_is_better=hib)
    except StatsError as exc:
        return Verdict(bench.name, metric, f"{bench.label}: no comparison ({exc}).", failed=True)
    text = ratio.sentence(*catalog.words(metric))  # "faster" for a rate, "higher" for a share
    n = f"{len(xs)} paired repeat{'s' if len(xs) > 1 else ''}"
    if text.startswith("no "):
        if p2p_pair:
            sentence = f"Peer-to-peer makes {text} to {bench.label} in {label} ({n})."
        else:
            sentence = f"{bench.label}, {a.name} against {b.name}: {text} in {label} ({n})."
    elif p2p_pair:
        sentence = f"Peer-to-peer makes {bench.label} {text} in {label} ({n})."
    else:
        sentence = f"{bench.label} is {text} with {a.name} than with {b.name}, in {label} ({n})."
    why = withheld_because(bench, a, b, metric)
    if all(r.backend == "gloo" for r in a.ok + b.ok):
        sentence = (
            f"{bench.label} on the CPU (gloo, where NCCL settings have no effect), "
            f"{a.name} against {b.name}: "
            + (f"verdict withheld ({label}): {why}" if why else f"{text} in {label} ({n})")
            + "; both variants ran the same code, so any difference is noise."
        )
        return Verdict(bench.name, metric, sentence, ratio, len(xs), withheld=why)
    if why:
        sentence = (
            # the metric first: beside a headline verdict on another metric ("12.75x faster in bus
            # bandwidth"), a withheld one must not read as withdrawing it (all-reduce, 2x H200)
            f"{bench.label}, {label}: verdict withheld ({a.name} against {b.name}): {why}. "
            "The per-variant figures are in its section; their ratio is not a finding."
        )
        against = f"{a.name} against {b.name}"
        return Verdict(bench.name, metric, sentence, ratio, len(xs), withheld=why, against=against)
    return Verdict(bench.name, metric, sentence, ratio, len(xs))


def folded(bench: Benchmark) -> list[Verdict]:
    """Page 1's verdicts of a benchmark: those withheld for one same reason, of one same pair,
    said once ("verdicts withheld on throughput, time per token and HBM share (p2p against
    no-p2p): one run a side is a screening ..."). A screening decode bundle printed the reason
    four times over and pushed its decode figures off page 1. Its own section lists each."""
    groups: dict[tuple[str, str], list[Verdict]] = {}
    for v in bench.verdicts:
        if v.withheld and v.against and not v.failed:
            groups.setdefault((v.withheld, v.against), []).append(v)
    out, said = [], set()
    for v in bench.verdicts:
        key = (v.withheld, v.against)
        same = groups.get(key, [])
        if len(same) < 2:
            out.append(v)
            continue
        if key in said:
            continue
        said.add(key)
        labels = [catalog.label(x.metric) for x in same]
        listed = ", ".join(labels[:-1]) + " and " + labels[-1]
        sentence = (
            f"{bench.label}: verdicts withheld on {listed} ({v.against}): {v.withheld}. "
            "The per-variant figures are in its section; their ratios are not findings."
        )
        out.append(Verdict(bench.name, v.metric, sentence, withheld=v.withheld, against=v.against))
    return out


def unfinished(blocks: tuple[VariantBlock, ...]) -> str:
    """How many of the planned runs gave no figure, by why: "1 of 6 runs failed", "of 6 runs, 1
    was interrupted and 1 never ran" (a run cut short by a stop did not fail); "" when none."""
    total = sum(len(v.runs) + v.missing for v in blocks)
    cut = sum(r.error == INTERRUPTED for v in blocks for r in v.failed)
    failed = sum(len(v.failed) for v in blocks) - cut
    missing = sum(v.missing for v in blocks)
    if failed and not (cut or missing):
        return f"{failed} of {total} runs failed"
    said = [
        f"{n} {why}"
        for n, why in (
            (failed, "failed"),
            (cut, "was interrupted" if cut == 1 else "were interrupted"),
            (missing, "never ran"),
        )
        if n
    ]
    return f"of {total} runs, {' and '.join(said)}" if said else ""


def withheld_because(bench: Benchmark, a: VariantBlock, b: VariantBlock, metric: str) -> str:
    """Why a comparison of a and b cannot be called a finding ("" when it can): runs that
    failed, a noisy metric (CV over the recipe's cv_threshold), or runs not at steady state.
    Power capping is normal operation and never withholds a verdict."""
    reasons = []
    pairs = len(_pairs(a, b, metric)[0])
    if pairs < MIN_RUNS:  # the evidence grade page 1 states (kit.report.method.evidence_grade)
        runs = "one run a side" if pairs == 1 else f"{pairs} runs a side"
        reasons.append(
            f"{runs} is a screening, not a finding (no confidence interval below {MIN_RUNS})"
        )
    if short := unfinished((a, b)):
        reasons.append(short)
    rows = bench.metrics.get(metric) or {}
    cvs = [
        row.summary.cv
        for v in (a, b)
        if (row := rows.get(v.name)) is not None and row.noisy and row.summary is not None
    ]
    if cvs:
        t = bench.cv_threshold
        low, high = cv_words(min(cvs), t), cv_words(max(cvs), t)
        spread = low if low == high else f"{low} to {high}"
        reasons.append(
            f"the runs were noisy (CV {spread}, over the recipe's {bench.cv_threshold:.0%})"
        )
    drifts = [d for v in (a, b) for r in v.ok if (d := run_drift(r)) is not None]
    moved = [d for d in drifts if abs(d) > DRIFT_THRESHOLD]
    if moved:
        worst = max(moved, key=abs)
        reasons.append(
            f"{len(moved)} of {len(drifts)} runs were not at steady state (step time moved "
            f"up to {worst:+.0%} inside the timed window)"
        )
    return "; ".join(reasons)


WHOLE_WINDOW = {"throughput": "throughput_window"}
"""Headline -> the whole-window figure that replaces it when the GPUs sat at their power cap."""


def verdict_metric(bench: Benchmark) -> str:
    """The metric a benchmark is judged by: its workload's headline metric, or the throughput
    over the whole window when most finished runs of a variant sat at the power cap (clocks
    swing under a cap, and the median step then reads a few percent above what the window
    delivered)."""
    metric = headline_metric(bench.kind)
    whole = WHOLE_WINDOW.get(metric)
    if whole in bench.metrics and power_capped_runs(bench):
        return whole
    return metric if metric in bench.metrics else next(iter(bench.metrics), metric)


def shared_verdict_metric(benches: list[Benchmark]) -> str:
    """The one metric a benchmark is judged by on several machines, whatever their order: the
    verdict metric each machine's page leads with where they agree; where one machine sat at its
    power cap and another did not, the whole-window figure when every machine recorded it (the
    rule `verdict_metric` applies across variants, applied across machines), else the workload's
    headline. Reading the last machine's choice instead gave 1.08x one way and 1.07x swapped."""
    chosen = {verdict_metric(b) for b in benches}
    if len(chosen) == 1:
        return chosen.pop()
    metric = headline_metric(benches[0].kind)
    whole = WHOLE_WINDOW.get(metric)
    if whole in chosen and all(whole in b.metrics for b in benches):
        return whole
    return metric


def power_capped_runs(bench: Benchmark) -> bool:
    """Most finished runs of some variant sat at their power cap in the timed window.

    Per variant, not pooled: 4x H200 Llama ran P2P at the cap in every run and without P2P in
    none, and a pooled count (2 of 4, not most) headlined the capped variant by its median step.
    One variant capped puts the whole benchmark on the whole window, so that its paired
    comparison reads one metric; uncapped, the two figures agree within about 1%."""
    return any(v.ok and sum(power_capped(r) for r in v.ok) > len(v.ok) / 2 for v in bench.variants)


def verdicts(bench: Benchmark) -> list[Verdict]:
    """The headline comparison: the first variant with P2P on (else the first) against each
    other variant; then
    the workload's secondary metrics, where both sides finished."""
    if len(bench.variants) < 2:
        return []
    ref = next((v for v in bench.variants if v.p2p_off is False), bench.variants[0])
    others = [v for v in bench.variants if v is not ref]
    out = [compare(bench, ref, other, verdict_metric(bench)) for other in others]
    for metric in bench.spec.secondary if bench.spec else ():
        if metric not in bench.metrics:
            continue
        for other in others:  # a silent pair's one sentence is said once, on the headline
            if ref.ok and other.ok and not silent(bench, ref, other):
                v = compare(bench, ref, other, metric)
                if not v.failed:
                    out.append(v)
    return out


def headline(bench: Benchmark) -> list[dict[str, Any]]:
    """Per variant: the verdict metric's median with its interval, or failed."""
    metric = verdict_metric(bench)
    rows = bench.metrics.get(metric) or {}
    out = []
    for v in bench.variants:
        row = rows.get(v.name)
        out.append(
            {
                "variant": v.name,
                "row": row,
                "metric": metric,
                "failed": row is None or row.summary is None,
                "n_ok": len(v.ok),
                "n": len(v.runs) + v.missing,
            }
        )
    return out


def judged_note(named: str, headline: str) -> str:
    """Why an acceptance verdict judges another figure than the one the page leads with: the
    reference names its metric, and is judged on that one only (a median-step reference never
    judges the whole window); empty when it names the headline."""
    if named == headline:
        return ""
    there = WINDOW_WORDS.get(named, catalog.label(named))
    here = WINDOW_WORDS.get(headline, catalog.label(headline))
    return f"judged on {there}, as the reference was measured; the figure above is {here}"


def run_basis(
    bench: Benchmark,
    block: VariantBlock | None,
    hardware: Hardware | None,
    metric: str,
    smoke: bool | None = None,
) -> Basis:
    """What one variant of a benchmark ran on, for matching against a reference
    (kit.stats.acceptance.mismatches): the GPU model hardware.json names, the runs' GPU count, the
    task, GPU or CPU (gloo), and the metric judged."""
    names = sorted({g.name for g in (hardware.gpus if hardware else []) if g.name})
    runs = block.ok if block else []
    cpu = bool(runs) and all(r.backend == "gloo" or r.device == "cpu" for r in runs)
    if cpu:  # the CPU's model stands where a GPU's would (kit.stats.acceptance.Basis)
        host = hardware.host if hardware else None
        names = [host.cpu_model] if host and host.cpu_model else []
    return Basis(
        gpu_model=names[0] if len(names) == 1 else None,
        gpus=block.gpus if block else None,
        task=bench.kind,
        device="CPU" if cpu else "GPU",  # from the runs: a missing hardware.json is no CPU
        metric=metric,
        scale=scale_of(smoke),
    )


def expectations(bench: Benchmark, hardware: Hardware | None = None) -> list[dict[str, Any]]:
    """The recipe's `expect:` references against the first variant with P2P on, each an
    acceptance verdict decided by the interval (kit.stats.acceptance: PASS only when the interval's
    lower end clears the reference less its tolerance; UNDECIDED when it straddles it or fewer
    than 3 runs finished), never by the median alone.

    One rule for every reference (kit.stats.acceptance.mismatches): an `expect` judges only runs on
    the GPU model and count it was measured on, on the metric it names (a median-step figure
    never judges the whole window); anything else is NOT COMPARABLE, with the reason, and the
    page says there is no reference for this machine."""
    out = []
    headline = verdict_metric(bench)
    ref = next((v for v in bench.variants if v.p2p_off is False), None) or (
        bench.variants[0] if bench.variants else None
    )
    for named, listed in bench.expect:
        row = (bench.metrics.get(named) or {}).get(ref.name) if ref else None
        here = run_basis(bench, ref, hardware, named)
        # the entry for this run's GPU model and count; else the first, to say why none applies
        bases = [(exp, Basis(*exp.measured_on(), bench.kind, "GPU", named)) for exp in listed]
        exp, there = next(((e, b) for e, b in bases if not mismatches(b, here)), bases[0])
        unit = exp.unit or (row.unit if row else "")
        why = mismatches(there, here)
        if why and len(bases) > 1:  # the page names every machine the recipe has a figure for
            there = Basis(" or ".join(b.words for _, b in bases), None, bench.kind, "GPU", named)
            why = [f"none of the recipe's {len(bases)} figures is for {here.words}"]
        measured = row.summary.median if row is not None and row.summary is not None else None
        decision = None
        if why:
            verdict = NOT_COMPARABLE
            reason = (
                f"no reference for this machine: the recipe's figure was measured on "
                f"{there.words}, these runs on {here.words} ({'; '.join(why)}); nothing judged"
            )
        elif measured is None:
            verdict, reason = "failed: no finished run", ""
        else:
            decision = decide(
                list(row.values),
                exp.value,
                min(exp.tolerance, 0.99),
                row.higher_is_better,
                named,
                unit,
            )
            verdict, reason = decision.verdict, decision.reason
        out.append(
            {
                "metric": named,
                "label": catalog.label(named),
                "named": named,
                "judged_note": judged_note(named, headline),
                "value": exp.value,
                "unit": unit,
                "tolerance": exp.tolerance,
                "variant": ref.name if ref else "-",
                "measured": measured,
                "verdict": verdict,
                "reason": reason,
                "more_repeats": decision.more_repeats if decision else None,
                "low": decision.low if decision else None,
                "high": decision.high if decision else None,
                "n": decision.n if decision else None,
                "higher_is_better": row.higher_is_better if row is not None else True,
                "source": exp.source,
                "comparable": not why,
                "mismatches": why,
                "measured_on": there.words,
                "runs_on": here.words,
                "per_gpu": False,
                "gpus": here.gpus,
            }
        )
    return out
