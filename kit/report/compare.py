"""`kit compare`: bundles side by side, in one HTML and PDF document.

What a reader needs to decide between machines: what each machine is, whether the software was
the same, and for each workload the median with its 95% interval on each machine, the ratio to a
chosen baseline with its interval (unpaired: repeats on two machines have nothing in common), and
the P2P effect on each machine (paired: repeat i with P2P ran next to repeat i without).

Every bundle must match its manifest: a comparison of edited numbers would be worthless. The
comparison reads the bundles and writes only into its own output directory.
"""

from __future__ import annotations

import base64
import io
import json
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from kit.bundle import MANIFEST, Bundle, now_iso, sha256_file, verify_manifest
from kit.envdiff import VERSION_KEYS, environment_diff, environment_versions
from kit.errors import InputError, KitError
from kit.report.render import jinja_env, machine_line, write_pdf
from kit.stats import Ratio, StatsError, paired_ratio, summarize, unpaired_ratio

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


def samples_of(runs: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    """benchmark -> variant -> metric -> {unit, higher_is_better, by_repeat: {repeat: value}}.

    Only successful runs give samples; `failed` counts the others per benchmark and variant.
    """
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for run in runs:
        variants = out.setdefault(run["benchmark"], {})
        metrics = variants.setdefault(run["variant"], {})
        if run.get("status") != "ok":
            metrics.setdefault("__failed__", {"count": 0})["count"] += 1
            continue
        for name, m in (run.get("metrics") or {}).items():
            entry = metrics.setdefault(
                name,
                {
                    "unit": m.get("unit", ""),
                    "higher_is_better": m.get("higher_is_better", True),
                    "by_repeat": {},
                },
            )
            entry["by_repeat"][run.get("repeat", len(entry["by_repeat"]))] = float(m["value"])
    return out


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


def workload_rows(machines: list[Machine], base: int) -> list[MetricRow]:
    """Each benchmark, variant and metric: per machine median, interval, n, ratio to baseline."""
    per = [samples_of(m.results.get("runs") or []) for m in machines]
    rows: list[MetricRow] = []
    order = [per[base], *per[:base], *per[base + 1 :]]
    keys: dict[tuple[str, str, str], tuple[str, bool]] = {}
    for data in order:
        for bench, variants in data.items():
            for variant, metrics in variants.items():
                for name, m in metrics.items():
                    if name != "__failed__":
                        keys.setdefault((bench, variant, name), (m["unit"], m["higher_is_better"]))
    for (bench, variant, name), (unit, hib) in keys.items():
        row = MetricRow(bench, variant, name, unit, hib)
        base_values = _values(per[base], bench, variant, name)
        for i, data in enumerate(per):
            values = _values(data, bench, variant, name)
            failed = data.get(bench, {}).get(variant, {}).get("__failed__", {}).get("count", 0)
            cell: dict[str, Any] = {
                "summary": _summary_dict(values) if values else None,
                "failed": failed,
                "baseline": i == base,
                "ratio": None,
            }
            if i != base and values and base_values:
                try:
                    cell["ratio"] = _ratio_dict(unpaired_ratio(values, base_values, hib), name)
                except StatsError:
                    cell["ratio_error"] = "no ratio: a side has zero or negative values"
            row.cells.append(cell)
        rows.append(row)
    return rows


def _values(data: dict[str, Any], bench: str, variant: str, metric: str) -> list[float]:
    entry = data.get(bench, {}).get(variant, {}).get(metric)
    return list(entry["by_repeat"].values()) if entry else []


def p2p_effects(machines: list[Machine]) -> list[dict[str, Any]]:
    """Per machine and benchmark: the headline metric with P2P over without, from paired repeats."""
    from kit.reproduce import HEADLINE_METRICS

    out = []
    for m in machines:
        for bench, variants in samples_of(m.results.get("runs") or []).items():
            on, off = variants.get(P2P, {}), variants.get(NO_P2P, {})
            metric = next((n for n in HEADLINE_METRICS if n in on and n in off), None)
            if metric is None:
                continue
            a, b = on[metric]["by_repeat"], off[metric]["by_repeat"]
            pairs = sorted(set(a) & set(b))
            entry: dict[str, Any] = {
                "machine": m.label,
                "index": m.index,
                "benchmark": bench,
                "metric": metric,
                "unit": on[metric]["unit"],
                "pairs": len(pairs),
                "ratio": None,
            }
            if pairs:
                try:
                    r = paired_ratio(
                        [a[k] for k in pairs], [b[k] for k in pairs], on[metric]["higher_is_better"]
                    )
                    entry["ratio"] = _ratio_dict(r, metric)
                except StatsError as exc:
                    entry["error"] = str(exc)
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
    return {k: v for k, v in recipe.items() if k not in RECIPE_NOTES}


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
        if m is not ref and r != recipes[base]:
            keys = sorted(
                k for k in set(r) | set(recipes[base]) if r.get(k) != recipes[base].get(k)
            )
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


# --- figures -----------------------------------------------------------------------------------


def _svg(fig: Any) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    return "data:image/svg+xml;base64," + base64.b64encode(buf.getvalue().encode()).decode()


def headline_figures(rows: list[MetricRow], machines: list[Machine]) -> list[dict[str, str]]:
    """Per benchmark: the headline metric per machine and variant, medians with 95% intervals."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from kit.reproduce import HEADLINE_METRICS

    figures = []
    benches = list(dict.fromkeys(r.benchmark for r in rows))
    for bench in benches:
        mine = [r for r in rows if r.benchmark == bench]
        metric = next((n for n in HEADLINE_METRICS if any(r.metric == n for r in mine)), None)
        mine = [r for r in mine if r.metric == metric]
        if not mine:
            continue
        fig, ax = plt.subplots(figsize=(6.5, 2.6))
        width = 0.8 / len(mine)
        for j, row in enumerate(mine):
            xs, ys, lo, hi = [], [], [], []
            for i, cell in enumerate(row.cells):
                s = cell["summary"]
                if s:
                    xs.append(i + j * width)
                    ys.append(s["median"])
                    lo.append(s["median"] - s["ci_low"])
                    hi.append(s["ci_high"] - s["median"])
            ax.bar(xs, ys, width, yerr=[lo, hi], capsize=3, label=row.variant)
        ax.set_xticks([i + 0.4 - width / 2 for i in range(len(machines))])
        ax.set_xticklabels([m.label for m in machines], fontsize=8)
        ax.set_ylabel(f"{metric} ({mine[0].unit})", fontsize=8)
        ax.legend(fontsize=7)
        ax.set_title(f"{bench}: {metric}, median and 95% CI", fontsize=9)
        figures.append({"title": f"{bench}: {metric}", "src": _svg(fig)})
    return figures


def allreduce_figures(machines: list[Machine]) -> list[dict[str, str]]:
    """Bus bandwidth against message size, one line per machine and variant (median of repeats)."""
    import statistics

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    curves: dict[str, dict[str, dict[int, list[float]]]] = {}
    for m in machines:
        for run in m.results.get("runs") or []:
            if run.get("kind") != "allreduce" or run.get("status") != "ok":
                continue
            line = curves.setdefault(run["benchmark"], {}).setdefault(
                f"{m.label} {run['variant']}", {}
            )
            for row in (run.get("data") or {}).get("sizes") or []:
                line.setdefault(row["bytes"], []).append(statistics.median(row["busbw_gbps"]))
    figures = []
    for bench, lines in curves.items():
        fig, ax = plt.subplots(figsize=(6.5, 2.8))
        for name, points in lines.items():
            sizes = sorted(points)
            ax.plot(sizes, [statistics.median(points[s]) for s in sizes], marker=".", label=name)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("message size (bytes)", fontsize=8)
        ax.set_ylabel("busbw (GB/s)", fontsize=8)
        ax.legend(fontsize=7)
        ax.set_title(f"{bench}: all-reduce bus bandwidth by size", fontsize=9)
        figures.append({"title": bench, "src": _svg(fig)})
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
    figures = headline_figures(
        [MetricRow(**w) for w in data["workloads"]], machines
    ) + allreduce_figures(machines)
    html = render_html(data, figures)
    html_path = out / "compare.html"
    html_path.write_text(html)
    json_path = out / "compare.json"
    json_path.write_text(json.dumps(data, indent=1) + "\n")
    pdf_path = out / "compare.pdf"
    write_pdf(html, pdf_path)
    return [html_path, pdf_path, json_path]
