"""Runs grouped by benchmark and variant, each metric summarized over the finished repeats.

The one reader of results.json for the report and compare alike: a run that did not finish
contributes no number anywhere; it is counted, named and shown as failed.
"""

from __future__ import annotations

from kit.model import BundleData, Metric, Results, RunResult
from kit.recipe import Recipe
from kit.report.analysis.model import (
    Benchmark,
    MetricRow,
    VariantBlock,
    is_ok,
)
from kit.report.analysis.verdicts import verdicts
from kit.shared import metrics as catalog
from kit.stats import StatsError, summarize
from kit.stats.spread import is_noisy
from kit.workloads.registry import label as kind_label
from kit.workloads.registry import spec


def benchmark_label(name: str, kind: str) -> str:
    base = kind_label(kind)
    return base if name in (kind, base) else f"{name} ({base})"


def _variant_info(recipe: Recipe, name: str, runs: list[RunResult]) -> list[tuple[str, str]]:
    """The variants benchmark `name` runs, in recipe order (then any the runs add), with their
    descriptions."""
    out = {v.name: v.description for v in recipe.variants_of(name)}
    for r in runs:
        out.setdefault(r.variant, "")
    return list(out.items())


def bundle_benchmarks(data: BundleData) -> list[Benchmark]:
    """A loaded bundle's benchmarks (kit.model.load_bundle), by the recipe it stored."""
    return build_benchmarks(data.results, data.recipe)


def build_benchmarks(results: Results, recipe: Recipe) -> list[Benchmark]:
    """Group runs by benchmark and variant; summarize each metric over the finished repeats.
    Benchmarks in the recipe's order, then any the runs add; noisy by its cv_threshold."""
    runs = results.runs
    planned = results.planned_repeats
    declared = {b.label: b for b in recipe.benchmarks}
    names = list(declared)
    for r in runs:
        if r.benchmark not in names:
            names.append(r.benchmark)
    kinds = [b.kind for b in recipe.benchmarks]
    out = []
    for name in names:
        decl = declared.get(name)
        mine = [r for r in runs if r.benchmark == name]
        kind = decl.kind if decl else (mine[0].kind if mine else "?")
        ran = 1 + max((r.repeat for r in mine), default=-1)
        blocks = []
        for vname, desc in _variant_info(recipe, name, mine):
            vr = sorted((r for r in mine if r.variant == vname), key=lambda r: r.repeat)
            ok = [r for r in vr if is_ok(r)]
            blocks.append(
                VariantBlock(
                    vname,
                    desc,
                    vr,
                    ok,
                    [r for r in vr if not is_ok(r)],
                    missing=max(0, max(planned, ran) - len(vr)),
                )
            )
        same_kind = kinds.count(kind) > 1
        label = benchmark_label(name, kind) if same_kind else kind_label(kind)
        label = label if spec(kind) or same_kind else name
        found = spec(kind)
        if results.smoke and found is not None and found.smoke_model:
            label = f"{label} recipe at smoke size"  # a tiny model ran, not the named one
        bench = Benchmark(
            name,
            kind,
            label,
            decl.params if decl else {},
            blocks,
            expect=decl.expectations() if decl else [],
            spec=spec(kind),
            cv_threshold=recipe.cv_threshold,
            planned_repeats=planned,
            repeats_ran=ran,
            adaptive=results.adaptive.get(name),
        )
        _summarize_metrics(bench)
        bench.wrong_total = sum(_wrong(r) for r in mine if is_ok(r))
        bench.verdicts = verdicts(bench)
        out.append(bench)
    return out


def _wrong(run: RunResult) -> int:
    if run.data.sizes:
        return sum(row.wrong for row in run.data.sizes)
    m = run.metrics.get("wrong_total")
    return int(m.value) if m else 0


def _summarize_metrics(bench: Benchmark) -> None:
    order: list[str] = []
    info: dict[str, Metric] = {}
    for v in bench.variants:
        for r in v.ok:
            for name, m in r.metrics.items():
                known = catalog.metric(name)
                if known and known.aggregate != "median":
                    continue  # a count (wrong elements) is totalled, not summarized
                if name not in info:
                    order.append(name)
                    info[name] = m
    for name in order:
        unit = info[name].unit
        hib = catalog.higher_is_better(name, info[name].higher_is_better)
        per_variant = {}
        for v in bench.variants:
            values = [float(r.metrics[name].value) for r in v.ok if name in r.metrics]
            row = MetricRow(
                name, catalog.label(name), unit, hib, values, per_gpu=catalog.per_gpu(name)
            )
            if values:
                try:
                    row.summary = summarize(values)
                    row.noisy = is_noisy(values, bench.cv_threshold)
                except StatsError:
                    row.summary = None
            per_variant[v.name] = row
        bench.metrics[name] = per_variant


def variant_subsets(recipe: Recipe, benches: list[Benchmark]) -> list[str]:
    """The benchmarks that run some of the recipe's variants, with those they run: "decode-dp
    (LLM decode): p2p" (a benchmark's `variants`; its others were never planned, not lost)."""
    every = len(recipe.resolved_variants())
    out = []
    for b in benches:
        mine = [v.name for v in recipe.variants_of(b.name)]
        if len(mine) < every:
            out.append(f"{b.label}: {', '.join(mine)}")
    return out
