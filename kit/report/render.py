"""Render a bundle into report.html (and, with the report issue, report.pdf).

The page reads only the bundle's own files; a failed or missing run shows as failed, never as a
number.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape

from kit.bundle import Bundle

TEMPLATES = Path(__file__).parent / "templates"


def _env() -> Environment:
    return Environment(
        loader=FileSystemLoader(TEMPLATES), autoescape=select_autoescape(["html", "j2"]),
        trim_blocks=True, lstrip_blocks=True,
    )  # fmt: skip


def summarize_runs(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per benchmark and variant: each headline metric's median over the ok repeats."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for run in runs:
        groups[(run["benchmark"], run["variant"])].append(run)
    rows = []
    for (bench, variant), items in groups.items():
        ok = [r for r in items if r.get("status") == "ok"]
        metrics: dict[str, dict[str, Any]] = {}
        for r in ok:
            for name, m in r.get("metrics", {}).items():
                entry = metrics.setdefault(name, {"unit": m["unit"], "values": []})
                entry["values"].append(m["value"])
        for entry in metrics.values():
            entry["median"] = statistics.median(entry["values"])
        rows.append(
            {"benchmark": bench, "variant": variant, "ok": len(ok), "runs": len(items),
             "failed": [r for r in items if r.get("status") != "ok"], "metrics": metrics}
        )  # fmt: skip
    return rows


def allreduce_table(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Median busbw per size and variant over the ok repeats of each all-reduce benchmark."""
    tables: dict[str, Any] = {}
    for run in runs:
        if run.get("kind") != "allreduce" or run.get("status") != "ok":
            continue
        table = tables.setdefault(run["benchmark"], {"variants": [], "sizes": {}})
        if run["variant"] not in table["variants"]:
            table["variants"].append(run["variant"])
        for row in run["data"]["sizes"]:
            cell = (
                table["sizes"]
                .setdefault(row["bytes"], {})
                .setdefault(run["variant"], {"busbw": [], "time": [], "wrong": 0})
            )
            cell["busbw"].append(statistics.median(row["busbw_gbps"]))
            cell["time"].append(statistics.median(row["time_us"]))
            cell["wrong"] += row["wrong"]
    for table in tables.values():
        for cells in table["sizes"].values():
            for cell in cells.values():
                cell["busbw_median"] = statistics.median(cell["busbw"])
                cell["time_median"] = statistics.median(cell["time"])
    return tables


def human_bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return (
                f"{n:g} {unit}"
                if unit == "B"
                else f"{n:.0f} {unit}"
                if n == int(n)
                else f"{n:.1f} {unit}"
            )
        n /= 1024
    return str(n)


def render_html(bundle: Bundle) -> str:
    env = _env()
    env.filters["bytes"] = human_bytes
    results = bundle.results
    return env.get_template("report.html.j2").render(
        results=results,
        recipe=bundle.recipe,
        hardware=bundle.read_json("hardware.json") or {},
        environment=bundle.read_json("environment.json") or {},
        summary=summarize_runs(results["runs"]),
        allreduce=allreduce_table(results["runs"]),
    )


def render_bundle(bundle: Bundle) -> Path:
    out = bundle.path / "report.html"
    out.write_text(render_html(bundle))
    return out
