"""`kit accept BUNDLE --against REF`: acceptance verdicts of a bundle against a reference.

REF is one of
- a published figure's id (`kit refs published` lists them): its workload's benchmarks are
  judged on its metric, per GPU where the figure is per GPU;
- another bundle directory: each benchmark of the same name, the same variant, judged on the
  headline metric against that bundle's median;
- a number with its unit ("330GB/s", "14000tokens/s"): every benchmark whose judged metric has
  that unit (a bare number is a usage error).

One rule for every reference (kit.stats.acceptance.mismatches): a published figure or a bundle judges
a run only on the same GPU model and count, the same task, on GPUs, in the same metric (a
median-step figure never judges a whole-window one); a published figure's `requires` conditions
(NVLS, fabric) must match too. Otherwise the decision is NOT COMPARABLE, naming the reasons, and
nothing is judged, unless `judge_anyway` (`--judge-anyway`): then the verdict is decided all the
same and says "judged despite: ...".

Tolerance: a fraction for every metric ("0.05") or per metric ("busbw_largest=0.03"); defaults:
0 against a published floor or a number, 0.05 against a published figure or a bundle. The
verdicts are kit.stats.acceptance's (PASS only when the interval's lower end clears the threshold).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kit import __version__
from kit.bundle.intake import receive
from kit.io.errors import InputError
from kit.model import Hardware, Results
from kit.refs.published import Figure, differences, run_conditions, unmet
from kit.report import analysis
from kit.report.against import Against, parse_against, parse_tolerances
from kit.report.analysis.verdicts import run_basis
from kit.stats.acceptance import (
    NOT_COMPARABLE,
    RULE,
    Basis,
    decide,
    device_mismatch,
    mismatches,
    overall,
)

SCHEMA = 1
DEFAULT_TOLERANCE = 0.05


def _variant(bench: analysis.Benchmark, wanted: str | None) -> analysis.VariantBlock | None:
    if wanted:
        return next((v for v in bench.variants if v.name == wanted), None)
    return next((v for v in bench.variants if v.p2p_off is False), None) or (
        bench.variants[0] if bench.variants else None
    )


def _benches(
    bundle_dir: Path, signers: tuple[Path | None, bool, bool] = (None, False, False)
) -> tuple[list[analysis.Benchmark], Results, Hardware, str]:
    """The bundle read once: sealed, complete and, with an allowed-signers file, signed by a
    listed signer (kit.bundle.intake; `signers` is the file, whether unsigned is accepted and whether
    a broken signature is read anyway; the last item returned is then the line saying so)."""
    data = receive(Path(bundle_dir), "accept only an untouched bundle", *signers)
    hardware = data.hardware or Hardware()
    return analysis.bundle_benchmarks(data), data.results, hardware, data.broken_signature


@dataclass
class _Target:
    """What one benchmark's figure is held against: the value, its unit and where it comes from,
    the default tolerance (where --tolerance names none), and what differs between the two or
    what the comparison is made despite (--judge-anyway)."""

    value: float
    unit: str
    tolerance: float
    source: str
    per_gpu: bool = False
    differ: list[str] = field(default_factory=list)
    despite: list[str] = field(default_factory=list)


@dataclass
class _RefBundle:
    """A reference bundle, read once: its benchmarks by name, its hardware and results."""

    benches: dict[str, analysis.Benchmark]
    hardware: Hardware
    results: Results


@dataclass
class _Case:
    """One benchmark's variant and metric to judge, and the run's basis (GPU model and count,
    task, device, metric: what a reference must share with it)."""

    bench: analysis.Benchmark
    block: analysis.VariantBlock
    row: analysis.MetricRow
    here: Basis


Outcome = _Target | dict[str, Any] | None
"""A target to judge against, a NOT COMPARABLE decision, or None: the reference says nothing
of this benchmark (a figure of another unit)."""


def _decision(
    block: analysis.VariantBlock,
    bench: str,
    label: str,
    source: str,
    verdict: dict[str, Any],
    per_gpu: bool = False,
    differences: list[str] | None = None,
    unmet: list[str] | None = None,
    judged_despite: list[str] | None = None,
) -> dict[str, Any]:
    """One decision of the document, every kind in one shape: the benchmark, variant and what it
    was held against, then `verdict` (kit.stats.acceptance's Decision, or NOT COMPARABLE's
    metric, reference, unit and reason) and the sentence a reader sees."""
    return {
        "benchmark": bench,
        "variant": block.name,
        "label": label,
        "gpus": block.gpus,
        "per_gpu": per_gpu,
        "source": source,
        "differences": differences or [],
        "unmet": unmet or [],
        "judged_despite": judged_despite or [],
        **verdict,
        "sentence": f"{verdict['verdict']}: {verdict['reason']}",
    }


def _not_judged(metric: str, reference: float | None, unit: str, reason: str) -> dict[str, Any]:
    """NOT COMPARABLE's verdict fields: no threshold, no interval."""
    return {
        "verdict": NOT_COMPARABLE,
        "metric": metric,
        "reference": reference,
        "unit": unit,
        "reason": reason,
    }


def not_comparable(
    bench: str,
    block: analysis.VariantBlock,
    label: str,
    figure: Figure,
    unmet: list[str],
    differ: list[str],
) -> dict[str, Any]:
    """The decision where the figure does not apply: which conditions differ, in its own words
    how far it compares, and how to judge it all the same; no threshold, no interval."""
    reason = (
        f"{figure.title} is no reference for this run: {'; '.join(unmet)} "
        f"(its own note: {figure.comparability}); `--judge-anyway` judges it all the same"
    )
    verdict = _not_judged(figure.metric, figure.value, figure.unit, reason)
    return _decision(block, bench, label, figure.cited, verdict, figure.per_gpu, differ, unmet)


def _merge(first: list[str], second: list[str]) -> list[str]:
    """Both lists of reasons, each said once (the GPU count appears in both)."""
    return first + [w for w in second if w not in first]


def _bundle_not_comparable(
    bench: str,
    block: analysis.VariantBlock,
    row: analysis.MetricRow,
    label: str,
    there: str,
    here: Basis,
    why: list[str],
    value: float,
) -> dict[str, Any]:
    """The decision where a reference bundle (or a figure given for GPUs) ran on another GPU
    model, count, task or device (`there`: its words): nothing judged, the reason named, and how
    to judge it all the same."""
    reason = (
        f"{label} ({there}) is no reference for this run ({here.words}): "
        f"{'; '.join(why)}; `--judge-anyway` judges it all the same"
    )
    verdict = _not_judged(row.name, value, row.unit, reason)
    return _decision(block, bench, row.label, label, verdict, differences=why, unmet=why)


def _no_counterpart(
    bench: analysis.Benchmark,
    block: analysis.VariantBlock,
    row: analysis.MetricRow,
    label: str,
    name: str,
    ran: list[str],
) -> dict[str, Any]:
    """The decision where the reference bundle measured no `name` for this benchmark and
    variant (another task): NOT COMPARABLE with the reason, as for another GPU model; there is
    no figure to judge, so --judge-anyway cannot judge it either."""
    task = bench.name if bench.name == bench.kind else f"{bench.name} ({bench.kind})"
    reason = (
        f"{label} is no reference for this run: it has no {name} of {task} {block.name} "
        f"(it ran {', '.join(ran) or 'nothing that finished'})"
    )
    return _decision(block, bench.name, row.label, label, _not_judged(name, None, row.unit, reason))


def _figure_target(fig: Figure, case: _Case, hardware: Hardware, judge_anyway: bool) -> Outcome:
    """A published figure: judged only under its conditions, per GPU where it is per GPU."""
    bench, block, row, here = case.bench, case.block, case.row, case.here
    mine = run_conditions(block.ok, hardware)
    differ = differences(fig, mine)
    there = Basis(fig.gpu, fig.gpus, fig.kind, "GPU", fig.metric, fig.always_differs)
    despite = _merge(mismatches(there, here), unmet(fig, mine))
    if despite and not judge_anyway:
        return not_comparable(bench.name, block, row.label, fig, despite, differ)
    default = 0.0 if fig.floor else DEFAULT_TOLERANCE
    return _Target(fig.value, fig.unit, default, fig.cited, fig.per_gpu, differ, despite)


def _bundle_target(
    ref: Against, other_side: _RefBundle, case: _Case, judge_anyway: bool
) -> Outcome:
    """Another bundle: the median of its runs of the same benchmark, variant and metric."""
    bench, block, row, here = case.bench, case.block, case.row, case.here
    other = other_side.benches.get(bench.name)
    oblock = _variant(other, block.name) if other else None
    orow = (other.metrics.get(row.name) or {}).get(oblock.name) if other and oblock else None
    if other is None or oblock is None or orow is None or not orow.values:
        ran = sorted({f"{b.name} ({b.kind})" for b in other_side.benches.values()})
        return _no_counterpart(bench, block, row, ref.label, row.name, ran)
    value = statistics.median(orow.values)
    there = run_basis(other, oblock, other_side.hardware, row.name, other_side.results.smoke)
    despite = mismatches(there, here)
    if despite and not judge_anyway:
        return _bundle_not_comparable(
            bench.name, block, row, ref.label, there.words, here, despite, value
        )
    differ = ["the workload's parameters differ"] if other.params != bench.params else []
    source = f"median of {len(orow.values)} run(s) of {ref.label}"
    return _Target(value, row.unit, DEFAULT_TOLERANCE, source, differ=differ, despite=despite)


def _number_target(ref: Against, against: str, case: _Case, judge_anyway: bool) -> Outcome:
    """A number given on the command line: every benchmark whose metric has its unit, on GPUs
    (a figure to buy GPUs by: a run on the CPU measured no GPU, kit.stats.acceptance)."""
    bench, block, row, here = case.bench, case.block, case.row, case.here
    if ref.unit and ref.unit.replace(" ", "") != row.unit.replace(" ", ""):
        return None
    value = float(ref.value)  # type: ignore[arg-type]  # a number reference always has one
    despite = [w for w in [device_mismatch("GPU", here.device)] if w]
    if despite and not judge_anyway:
        words = "a figure to judge GPUs by"
        return _bundle_not_comparable(bench.name, block, row, against, words, here, despite, value)
    return _Target(value, row.unit, 0.0, "the figure given on the command line", despite=despite)


def _judged(case: _Case, target: _Target, tolerance: float) -> dict[str, Any]:
    """The decision against a target: kit.stats.acceptance's verdict on the runs' values (per GPU
    where the target is), and what it was judged despite."""
    bench, block, row = case.bench, case.block, case.row
    gpus = block.gpus
    values = [v / gpus for v in row.values] if target.per_gpu and gpus else list(row.values)
    shown = f"{target.unit} per GPU" if target.per_gpu else target.unit
    doc = decide(values, target.value, tolerance, row.higher_is_better, row.name, shown).to_dict()
    if target.despite:  # --judge-anyway: the verdict stands, and says what it was judged despite
        doc["reason"] = f"judged despite: {'; '.join(target.despite)}; {doc['reason']}"
    return _decision(
        block,
        bench.name,
        row.label,
        target.source,
        doc,
        per_gpu=target.per_gpu,
        differences=target.differ,
        unmet=target.despite,
        judged_despite=target.despite,
    )


def _check_tolerance_names(
    per_metric: dict[str, float], benches: list[analysis.Benchmark], bundle_dir: Path
) -> None:
    """A --tolerance METRIC=... names a metric some benchmark of the bundle has."""
    known = {m for b in benches for m in b.metrics}
    unknown = sorted(set(per_metric) - known)
    if unknown:
        raise InputError(
            f"--tolerance {unknown[0]}=...: no benchmark in {bundle_dir} has that metric "
            f"(it has {', '.join(sorted(known)) or 'none'})"
        )


def _target(
    ref: Against,
    against: str,
    other_side: _RefBundle | None,
    case: _Case,
    hardware: Hardware,
    judge_anyway: bool,
) -> Outcome:
    """What the case is held against, by the kind of reference."""
    if ref.figure is not None:
        return _figure_target(ref.figure, case, hardware, judge_anyway)
    if other_side is not None:
        return _bundle_target(ref, other_side, case, judge_anyway)
    return _number_target(ref, against, case, judge_anyway)


def accept(
    bundle_dir: Path,
    against: str,
    tolerances: list[str] | None = None,
    metric: str | None = None,
    variant: str | None = None,
    allowed_signers: Path | None = None,
    allow_unsigned: bool = False,
    judge_anyway: bool = False,
    read_broken: bool = False,
) -> dict[str, Any]:
    """The acceptance document: one decision per judged benchmark, and the overall verdict.
    With `allowed_signers`, the bundle and a reference bundle must be signed by a listed signer.
    `judge_anyway`: judge against a published figure whose required conditions differ."""
    ref = parse_against(against)
    every, per_metric = parse_tolerances(tolerances or [])
    signers = (allowed_signers, allow_unsigned, read_broken)
    benches, results, hardware, broken = _benches(bundle_dir, signers)
    if judge_anyway and ref.what == "number" and results.device == "cuda":
        raise InputError(
            "--judge-anyway: a number on the command line carries no conditions to judge "
            "despite on a GPU run; give it only with a published figure, a bundle, or a CPU run"
        )
    broken_signatures = [broken] if broken else []
    _check_tolerance_names(per_metric, benches, bundle_dir)
    other_side = None
    if ref.bundle:
        other_benches, ref_results, ref_hw, ref_broken = _benches(ref.bundle, signers)
        broken_signatures += [ref_broken] if ref_broken else []
        other_side = _RefBundle({b.name: b for b in other_benches}, ref_hw, ref_results)
    decisions = []
    skipped = []
    for bench in benches:
        block = _variant(bench, variant)
        if block is None:
            skipped.append(f"{bench.name}: no variant {variant!r}")
            continue
        if ref.figure and ref.figure.kind != bench.kind:
            continue
        name = ref.figure.metric if ref.figure else (metric or analysis.verdict_metric(bench))
        row = (bench.metrics.get(name) or {}).get(block.name)
        if row is None or row.summary is None:
            skipped.append(f"{bench.name} {block.name}: no finished run has {name}")
            continue
        # the scale is matched only against another bundle (kit.stats.acceptance.Basis.scale)
        here = run_basis(bench, block, hardware, name, results.smoke if ref.bundle else None)
        case = _Case(bench, block, row, here)
        target = _target(ref, against, other_side, case, hardware, judge_anyway)
        if isinstance(target, _Target):
            tol = per_metric.get(name, every if every is not None else target.tolerance)
            decisions.append(_judged(case, target, tol))
        elif target is not None:
            decisions.append(target)
    if not decisions:
        why = "; ".join(skipped) or "no benchmark measures what the reference names"
        raise InputError(f"nothing in {bundle_dir} to judge against {against}: {why}")
    return {
        "schema": SCHEMA,
        "kit_version": __version__,
        "bundle": {
            "path": str(bundle_dir),
            "recipe": results.recipe,
            "created_at": results.created_at,
            "status": results.status,
        },
        "against": ref.to_dict(),
        "rule": RULE,
        "verdict": overall(d["verdict"] for d in decisions),
        "decisions": decisions,
        "skipped": skipped,
        # bundles read with --read-broken-signature: a page showing this document says so
        "broken_signatures": broken_signatures,
    }
