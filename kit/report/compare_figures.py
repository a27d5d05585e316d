"""The comparison's figures, drawn by the report's plotting code: the headline metric per machine
and variant (and per GPU when GPU counts differ), and bus bandwidth against message size. Every
bar and line is named by its machine's label, which carries the GPU count.
"""

from __future__ import annotations

from typing import Any

from kit.report import analysis, plots
from kit.report.machines import Machine
from kit.report.render import Figure, display


def axis_label(m: Machine, bench: str | None = None) -> str:
    """The machine as a bar or line is labelled: its label, and the GPUs the runs used where the
    label's count is not that (2 of 8 GPUs)."""
    used, total = m.gpus_used(bench), m.gpus_total
    if used and total and used != total:
        return f"{m.label}, {used} of {total} GPUs used"
    if used and not total:
        return f"{m.label}, {used} ranks"
    return m.label


def _interval_words(rows: list[Any]) -> str:
    labels = {
        c["summary"]["label"].split(",")[0] for r in rows for c in r.cells if c.get("summary")
    }
    return " or ".join(sorted(labels)) or "interval"


def headline_figures(rows: list[Any], machines: list[Machine]) -> list[Figure]:
    """Per benchmark: the headline metric per machine and variant, medians with their intervals;
    for a rate on machines with different GPU counts, the same per GPU."""
    figures = []
    for n, bench in enumerate(dict.fromkeys(r.benchmark for r in rows)):
        mine = [r for r in rows if r.benchmark == bench and r.headline]
        if not mine:
            continue
        first = mine[0]
        counts = {m.gpus_used(bench) for m in machines}
        views = [("summary", "")]
        if first.rate and len(counts) > 1:
            views.append(("per_gpu", " per GPU"))
        for key, suffix in views:
            bars = []
            for i, m in enumerate(machines):
                for row in mine:
                    s = row.cells[i].get(key)
                    bars.append(
                        {
                            "variant": f"{axis_label(m, bench)} {row.variant}",
                            "median": s["median"] if s else None,
                            "low": s["ci_low"] if s else None,
                            "high": s["ci_high"] if s else None,
                            "absent": row.cells[i].get("absent", False),
                        }
                    )
            unit = display(1, first.unit)[1]
            title = f"{bench}: {first.label}{suffix}"
            scope_words = ", all GPUs" if first.rate and key == "summary" else ""
            xlabel = f"{first.label}{suffix} ({unit}{scope_words})"
            svg = plots.metric_bars(bars, xlabel, title, f"cmp-{n}-{key}")
            if svg:
                figures.append(
                    Figure("bars", f"{title}: median, whisker {_interval_words(mine)}", svg)
                )
    return figures


def sweep_figures(machines: list[Machine]) -> list[Figure]:
    """Bus bandwidth against message size, one line per machine and variant (the report's plot)."""
    merged: dict[str, dict[str, Any]] = {}
    for m in machines:
        for b in m.benches:
            if not b.figures.by_size:
                continue
            curves = analysis.sweep_curves(b)
            entry = merged.setdefault(b.name, {"label": b.label, "sizes": set(), "curves": {}})
            entry["sizes"].update(curves["sizes"])
            for variant, c in curves["curves"].items():
                entry["curves"][f"{axis_label(m, b.name)} {variant}"] = c
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
