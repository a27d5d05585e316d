"""`kit compare`: bundles side by side, in one HTML and PDF document.

What a reader needs to decide between machines: what each machine is, whether the software was
the same, and for each workload the median with its 95% interval on each machine, the ratio to a
chosen baseline with its interval (unpaired: repeats on two machines have nothing in common), and
the P2P effect on each machine (paired: repeat i with P2P ran next to repeat i without).

Every bundle must match its manifest: a comparison of edited numbers would be worthless. The
comparison reads the bundles and writes only into its own output directory.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from kit.bundle import MANIFEST, now_iso, sha256_file
from kit.envdiff import VERSION_KEYS
from kit.errors import InputError
from kit.report import analysis, plots
from kit.report.machines import (
    Machine,
    environment_rows,
    hardware_rows,
    load_machines,
    pick_baseline,
    reproductions,
    warnings_for,
)
from kit.report.render import Figure, jinja_env, write_pdf
from kit.stats import Ratio, StatsError, summarize, unpaired_ratio
from kit.workloads.registry import metric_label

__all__ = ["comparison", "load_machines", "pick_baseline", "warnings_for", "write_comparison"]

TEMPLATE = "compare.html.j2"


# --- samples -----------------------------------------------------------------------------------


def _words(metric: str) -> tuple[str, str]:
    if any(k in metric for k in ("throughput", "busbw", "algbw", "time")):
        return "faster", "slower"
    return "better", "worse"


def _ratio_dict(r: Ratio, metric: str) -> dict[str, Any]:
    return {**r.to_dict(), "sentence": r.sentence(*_words(metric))}


def _summary_dict(values: list[float]) -> dict[str, Any] | None:
    try:
        return summarize(values).to_dict()
    except StatsError:
        return None


@dataclass
class MetricRow:
    benchmark: str
    variant: str
    metric: str
    unit: str
    higher_is_better: bool
    cells: list[dict[str, Any]] = field(default_factory=list)  # one per machine
    label: str = ""
    headline: bool = False  # the workload's headline metric (the report's verdict metric)


def _samples(m: Machine) -> dict[tuple[str, str, str], tuple[analysis.MetricRow, int]]:
    """(benchmark, variant, metric) -> (the report's row, failed runs of that variant)."""
    out = {}
    for b in m.benches:
        for name, per_variant in b.metrics.items():
            for v in b.variants:
                row = per_variant.get(v.name)
                if row is not None:
                    out[(b.name, v.name, name)] = (row, len(v.failed))
    return out


def workload_rows(machines: list[Machine], base: int) -> list[MetricRow]:
    """Each benchmark, variant and metric: per machine median, interval, n, ratio to baseline."""
    per = [_samples(m) for m in machines]
    headline = {(b.name, b.kind): analysis.verdict_metric(b) for m in machines for b in m.benches}
    kinds = {b.name: b.kind for m in machines for b in m.benches}
    order = [per[base], *per[:base], *per[base + 1 :]]
    keys: dict[tuple[str, str, str], analysis.MetricRow] = {}
    for data in order:
        for key, (row, _) in data.items():
            keys.setdefault(key, row)
    rows: list[MetricRow] = []
    for (bench, variant, name), first in keys.items():
        kind = kinds.get(bench, "")
        row = MetricRow(
            bench,
            variant,
            name,
            first.unit,
            first.higher_is_better,
            label=metric_label(kind, name),
            headline=headline.get((bench, kind)) == name,
        )
        base_values = _values(per[base], bench, variant, name)
        for i, data in enumerate(per):
            values = _values(data, bench, variant, name)
            failed = next(
                (f for (b, v, _), (_, f) in data.items() if (b, v) == (bench, variant)), 0
            )
            cell: dict[str, Any] = {
                "summary": _summary_dict(values) if values else None,
                "failed": failed,
                "baseline": i == base,
                "ratio": None,
            }
            if i != base and values and base_values:
                try:
                    ratio = unpaired_ratio(values, base_values, first.higher_is_better)
                    cell["ratio"] = _ratio_dict(ratio, name)
                except StatsError:
                    cell["ratio_error"] = "no ratio: a side has zero or negative values"
            row.cells.append(cell)
        rows.append(row)
    return rows


def _values(data: dict[Any, Any], bench: str, variant: str, metric: str) -> list[float]:
    entry = data.get((bench, variant, metric))
    return list(entry[0].values) if entry else []


def p2p_effects(machines: list[Machine]) -> list[dict[str, Any]]:
    """Per machine and benchmark: its report's P2P verdict on the headline metric (paired)."""
    out = []
    for m in machines:
        for b in m.benches:
            metric = analysis.verdict_metric(b)
            v = next(
                (
                    x
                    for x in b.verdicts
                    if x.metric == metric and {"p2p", "no-p2p"} <= {y.name for y in b.variants}
                ),
                None,
            )
            if v is None:
                continue
            row = next(iter((b.metrics.get(metric) or {}).values()), None)
            entry: dict[str, Any] = {
                "machine": m.label,
                "index": m.index,
                "benchmark": b.name,
                "metric": metric,
                "label": metric_label(b.kind, metric),
                "unit": row.unit if row else "",
                "pairs": v.pairs,
                "ratio": _ratio_dict(v.ratio, metric) if v.ratio is not None else None,
            }
            if v.ratio is None:
                entry["error"] = v.sentence
            out.append(entry)
    return out


# --- figures: the report's plotting path ------------------------------------------------------


def headline_figures(rows: list[MetricRow], machines: list[Machine]) -> list[Figure]:
    """Per benchmark: the headline metric per machine and variant, medians with 95% intervals."""
    figures = []
    for n, bench in enumerate(dict.fromkeys(r.benchmark for r in rows)):
        mine = [r for r in rows if r.benchmark == bench and r.headline]
        if not mine:
            continue
        bars = []
        for i, m in enumerate(machines):
            for row in mine:
                s = row.cells[i]["summary"]
                bars.append(
                    {
                        "variant": f"{m.label} {row.variant}",
                        "median": s["median"] if s else None,
                        "low": s["ci_low"] if s else None,
                        "high": s["ci_high"] if s else None,
                    }
                )
        title = f"{bench}: {mine[0].label}"
        svg = plots.metric_bars(bars, f"{mine[0].label} ({mine[0].unit})", title, f"cmp-{n}")
        if svg:
            figures.append(Figure("bars", f"{title}, median and 95% interval", svg))
    return figures


def sweep_figures(machines: list[Machine]) -> list[Figure]:
    """Bus bandwidth against message size, one line per machine and variant (the report's plot)."""
    merged: dict[str, dict[str, Any]] = {}
    for m in machines:
        for b in m.benches:
            if b.figures != "sweep":
                continue
            curves = analysis.sweep_curves(b)
            entry = merged.setdefault(b.name, {"label": b.label, "sizes": set(), "curves": {}})
            entry["sizes"].update(curves["sizes"])
            for variant, c in curves["curves"].items():
                entry["curves"][f"{m.label} {variant}"] = c
    figures = []
    for n, (bench, entry) in enumerate(merged.items()):
        curves = {"sizes": sorted(entry["sizes"]), "curves": entry["curves"]}
        if not curves["sizes"]:
            continue
        title = f"{bench}: {entry['label']} bus bandwidth by size"
        svg = plots.sweep_busbw(curves, title, f"cmp-sweep-{n}")
        if svg:
            figures.append(
                Figure("busbw", f"{title} (line: median over repeats; band: min to max)", svg)
            )
    return figures


# --- assembly ----------------------------------------------------------------------------------


def comparison(machines: list[Machine], base: int) -> dict[str, Any]:
    """Everything the page shows, as plain data (also written as compare.json)."""
    rows = workload_rows(machines, base)
    return {
        "created_at": now_iso(),
        "baseline": base + 1,
        "machines": [
            {
                "index": m.index,
                "label": m.label,
                "bundle": str(m.path),
                "summary": m.summary,
                "recipe": m.results.get("recipe"),
                "created_at": m.results.get("created_at"),
                "device": m.results.get("device"),
                "runtime": m.results.get("runtime"),
                "pinned": m.results.get("pinned"),
                "smoke": m.results.get("smoke"),
                "status": m.results.get("status"),
                "manifest_sha256": sha256_file(m.path / MANIFEST),
            }
            for m in machines
        ],
        "warnings": warnings_for(machines, base),
        "reproductions": reproductions(machines),
        "hardware": hardware_rows(machines),
        "environment": environment_rows(machines, base),
        "workloads": [r.__dict__ for r in rows],
        "p2p": p2p_effects(machines),
        "version_keys": list(VERSION_KEYS),
    }


def render_html(data: dict[str, Any], figures: list[dict[str, str]]) -> str:
    """The comparison page, with the report's templates, filters and stylesheet."""
    return jinja_env().get_template(TEMPLATE).render(c=data, figures=figures)


def write_comparison(
    paths: list[Path], baseline: str | int | None = None, out: Path | None = None
) -> list[Path]:
    """Write compare.html, compare.pdf and compare.json into `out`; returns their paths."""
    machines = load_machines(paths)
    base = pick_baseline(baseline, machines)
    out = out or Path("reports") / f"compare-{datetime.now().strftime('%Y%m%d-%H%M%S')}"
    bundle_dirs = {m.path.resolve() for m in machines}
    target = out.resolve()
    if any(target == d or d in target.parents for d in bundle_dirs):
        raise InputError(f"--out {out}: is inside a bundle; a comparison never writes into one")
    out.mkdir(parents=True, exist_ok=True)
    data = comparison(machines, base)
    rows = [MetricRow(**w) for w in data["workloads"]]
    figures = headline_figures(rows, machines) + sweep_figures(machines)
    html = render_html(data, figures)
    html_path = out / "compare.html"
    html_path.write_text(html)
    json_path = out / "compare.json"
    json_path.write_text(json.dumps(data, indent=1) + "\n")
    pdf_path = out / "compare.pdf"
    write_pdf(html, pdf_path)
    return [html_path, pdf_path, json_path]
