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
from functools import cached_property
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from kit.bundle import MANIFEST, Bundle, now_iso, sha256_file, verify_manifest
from kit.envdiff import VERSION_KEYS, environment_diff, environment_versions
from kit.errors import InputError, KitError
from kit.recipe import Recipe
from kit.report import analysis, plots
from kit.report.render import Figure, jinja_env, machine_line, write_pdf
from kit.stats import Ratio, StatsError, summarize, unpaired_ratio
from kit.workloads.registry import metric_label

TEMPLATE = "compare.html.j2"
P2P, NO_P2P = "p2p", "no-p2p"
RECIPE_NOTES = ("description", "verified_on")  # recipe fields that do not change a measurement


@dataclass
class Machine:
    """One bundle as a column of the comparison."""

    index: int  # 1-based, as the user counts on the command line
    path: Path
    bundle: Bundle
    hardware: dict[str, Any]
    environment: dict[str, Any]

    @property
    def results(self) -> dict[str, Any]:
        return self.bundle.results

    @property
    def hostname(self) -> str:
        return str((self.hardware.get("host") or {}).get("hostname") or "unknown host")

    @property
    def label(self) -> str:
        return f"#{self.index} {self.hostname}"

    @property
    def summary(self) -> str:
        return machine_line(self.hardware, {})

    @cached_property
    def benches(self) -> list[analysis.Benchmark]:
        """The bundle read the way its report reads it (one reader of results.json)."""
        return analysis.build_benchmarks(self.results, recipe_of(self.bundle))


def recipe_of(bundle: Bundle) -> dict[str, Any]:
    try:
        recipe = bundle.recipe
    except Exception:  # a missing or broken recipe.yaml: compare what the results hold
        return {}
    return recipe if isinstance(recipe, dict) else {}


def load_machines(paths: list[Path]) -> list[Machine]:
    """Each bundle, refused unless it matches its manifest."""
    if len(paths) < 2:
        raise InputError("kit compare needs at least two bundles")
    machines = []
    for i, path in enumerate(paths, 1):
        bundle = Bundle.load(Path(path))
        check = verify_manifest(bundle.path)
        if not check.ok:
            names = ", ".join(check.changed + check.missing + check.extra)
            raise KitError(
                f"{path}: does not match its {MANIFEST} ({names}); `kit verify {path}` shows "
                "what changed; compare only untouched bundles"
            )
        machines.append(
            Machine(
                i,
                Path(path),
                bundle,
                bundle.read_json("hardware.json") or {},
                bundle.read_json("environment.json") or {},
            )
        )
    return machines


def pick_baseline(spec: str | int | None, machines: list[Machine]) -> int:
    """The 0-based index of the baseline: a 1-based position or one of the bundle paths."""
    if spec is None or spec == "":
        return 0
    text = str(spec)
    if text.isdigit():
        n = int(text)
        if not 1 <= n <= len(machines):
            raise InputError(f"--baseline {n}: allowed: 1 to {len(machines)} (a bundle's position)")
        return n - 1
    wanted = Path(text).resolve()
    for i, m in enumerate(machines):
        if m.path.resolve() == wanted:
            return i
    raise InputError(
        f"--baseline {text}: not one of the compared bundles; give its position (1 to "
        f"{len(machines)}) or one of: {', '.join(str(m.path) for m in machines)}"
    )


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


# --- hardware, environment, warnings -------------------------------------------------------------


def hardware_rows(machines: list[Machine]) -> list[dict[str, Any]]:
    def gpus(h: dict[str, Any]) -> str:
        names = [g.get("name") or "?" for g in h.get("gpus") or []]
        return ", ".join(f"{names.count(n)}x {n}" for n in dict.fromkeys(names)) or "none"

    def gpu_mem(h: dict[str, Any]) -> str:
        mems = {g.get("memory_total_gib") for g in h.get("gpus") or []} - {None}
        return ", ".join(f"{v:g} GiB" for v in sorted(mems)) or "-"

    def links(h: dict[str, Any]) -> str:
        matrix = (h.get("topology") or {}).get("matrix") or []
        words = sorted({w for row in matrix for w in row} - {"X"})
        return ", ".join(words) or "-"

    def host(h: dict[str, Any], *keys: str) -> str:
        hh = h.get("host") or {}
        return next((str(hh[k]) for k in keys if hh.get(k)), "-")

    getters = [
        ("summary", lambda h: machine_line(h, {})),
        ("host", lambda h: host(h, "hostname")),
        ("GPUs", gpus),
        ("GPU memory", gpu_mem),
        ("GPU links", links),
        ("driver", lambda h: str((h.get("driver") or {}).get("version") or "-")),
        ("CPU", lambda h: host(h, "cpu_model", "cpu_count")),
        ("logical CPUs", lambda h: host(h, "logical_cpus", "cpu_count")),
        ("OS", lambda h: host(h, "os")),
    ]
    rows = []
    for name, get in getters:
        values = [get(m.hardware) for m in machines]
        rows.append({"name": name, "values": values, "differs": len(set(values)) > 1})
    return rows


def environment_rows(machines: list[Machine], base: int) -> list[dict[str, Any]]:
    """Every fingerprint field any bundle knows; cells that differ from the baseline marked."""
    flat = [environment_versions(m.environment, m.hardware) for m in machines]
    rows = []
    for key in flat[0]:
        values = [f[key] for f in flat]
        if all(v is None for v in values):
            continue
        ref = values[base]
        differs = [v is not None and ref is not None and v != ref for v in values]
        rows.append(
            {
                "name": key,
                "values": [v or "-" for v in values],
                "differs": differs,
                "any": any(differs),
            }
        )
    return rows


def _recipe_core(recipe: dict[str, Any]) -> dict[str, Any]:
    """The recipe as it ran: validated (defaults filled, so a field added later or written as
    null reads the same as one left out), without the fields that change no measurement."""
    try:
        full = Recipe.model_validate(recipe).model_dump(mode="json")
    except ValidationError:  # a recipe this kit no longer accepts: compare what is written
        full = {k: v for k, v in recipe.items() if v is not None}
    return {k: v for k, v in full.items() if k not in RECIPE_NOTES}


def warnings_for(machines: list[Machine], base: int) -> list[dict[str, str]]:
    """What the first page must say before any number: software differs, scale, edits, failures."""
    out: list[dict[str, str]] = []
    ref = machines[base]
    for m in machines:
        if m is ref:
            continue
        diffs = environment_diff(ref.environment, m.environment, ref.hardware, m.hardware)
        if diffs:
            what = "; ".join(f"{d.field} {d.new} vs {d.old}" for d in diffs)
            out.append(
                {
                    "level": "env",
                    "text": (
                        f"Different environments: {m.label} differs from the baseline {ref.label} in "
                        f"{what}. These results compare software as well as hardware."
                    ),
                }
            )
    recipes = [_recipe_core(m.bundle.recipe) for m in machines]
    for m, r in zip(machines, recipes, strict=True):
        keys = sorted(k for k in set(r) | set(recipes[base]) if r.get(k) != recipes[base].get(k))
        if m is not ref and keys:
            out.append(
                {
                    "level": "recipe",
                    "text": (
                        f"Different recipes: {m.label} ran a recipe that differs from the baseline's in "
                        f"{', '.join(keys)}; its numbers are not like for like."
                    ),
                }
            )
    for key, word in (("smoke", "smoke scale"), ("device", "device")):
        values = {str(m.results.get(key)) for m in machines}
        if len(values) > 1:
            out.append(
                {
                    "level": "recipe",
                    "text": f"The bundles differ in {word}: "
                    + ", ".join(f"{m.label} {m.results.get(key)}" for m in machines),
                }
            )
    if any(m.results.get("smoke") for m in machines):
        out.append(
            {
                "level": "note",
                "text": (
                    "Smoke scale: sizes were shrunk to check the method; these numbers do not measure "
                    "the hardware."
                ),
            }
        )
    for m in machines:
        if not m.results.get("pinned"):
            out.append(
                {
                    "level": "note",
                    "text": (
                        f"{m.label} ran on the {m.results.get('runtime', 'host')} runtime: its software "
                        "environment was not pinned."
                    ),
                }
            )
        if m.results.get("status") != "complete":
            out.append(
                {"level": "note", "text": f"{m.label}: bundle status {m.results.get('status')!r}."}
            )
        for bench, rec in (m.results.get("adaptive") or {}).items():
            if rec.get("cap_reached"):
                out.append(
                    {
                        "level": "note",
                        "text": (
                            f"{m.label}: {bench} stayed noisy ({rec.get('reason')}) after "
                            f"{rec.get('repeats')} repeats, the cap."
                        ),
                    }
                )
    return out


def reproductions(machines: list[Machine]) -> list[str]:
    """Which bundle reruns which, checked by the recorded manifest hash."""
    digests = {sha256_file(m.path / MANIFEST): m for m in machines}
    lines = []
    for m in machines:
        src = m.results.get("reproduces") or {}
        if not src:
            continue
        other = digests.get(src.get("manifest_sha256"))
        target = other.label if other else f"{src.get('bundle')} (not in this comparison)"
        lines.append(f"{m.label} reruns {target}, created {src.get('created_at')}.")
    return lines


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
