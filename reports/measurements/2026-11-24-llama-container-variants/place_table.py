#!/usr/bin/env python3
"""One training benchmark run in several places: each run's throughput and step-time tail, and
each place against the host runtime.

    python3 reports/measurements/2026-11-24-llama-container-variants/place_table.py BUNDLE... [--out places.md]

The bundles come from reports/measurements/2026-11-24-llama-container-variants/container_rounds.sh: each holds one run of one training
benchmark, made on the host runtime or in a GPU container that differs from the kit's in one
thing. A bundle's place is the last part of its folder name (`call2-3-hostcg` is `hostcg`).
Per run: the whole-window throughput (the figure a power-capped page leads with), the median-step
throughput, and the step times after warm-up (median, 90th percentile, slowest). Per place: the
ratio of its median whole-window throughput to the host's, with its interval
(kit.stats.unpaired_ratio: the places' runs are not paired one to one).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from kit.model import load_bundle  # noqa: E402
from kit.stats import unpaired_ratio  # noqa: E402

WINDOW, MEDIAN = "throughput_window", "throughput"
BASELINE = "host"


def place_of(bundle: Path) -> str:
    return bundle.name.rsplit("-", 1)[-1]


def run_row(bundle: Path) -> dict:
    """The bundle's one finished run: when it started, its throughputs and its step-time tail."""
    data = load_bundle(bundle)
    runs = [r for r in data.results.runs if r.status == "ok"]
    if len(runs) != 1:
        raise SystemExit(f"{bundle}: {len(runs)} finished runs; a place's bundle holds one")
    run = runs[0]
    steps = sorted((run.data.step_times_s or [])[run.data.warmup_steps or 0 :])
    if not steps:
        raise SystemExit(f"{bundle}: the run recorded no step times")
    return {
        "bundle": bundle.name,
        "place": place_of(bundle),
        "runtime": data.environment.runtime if data.environment else "?",
        "started": run.started_at or "",
        "window": run.metrics[WINDOW].value,
        "median": run.metrics[MEDIAN].value,
        "unit": run.metrics[WINDOW].unit,
        "p50": steps[len(steps) // 2],
        "p90": steps[min(len(steps) - 1, int(0.9 * len(steps)))],
        "slowest": steps[-1],
        "steps": len(steps),
    }


def table(bundles: list[Path]) -> str:
    rows = sorted((run_row(b) for b in bundles), key=lambda r: r["started"])
    unit = rows[0]["unit"]
    lines = [
        f"| bundle | place | runtime | whole window ({unit}) | median step ({unit}) "
        "| step p50 (s) | step p90 (s) | slowest (s) | steps |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['bundle']} | {r['place']} | {r['runtime']} | {r['window']:.0f} "
            f"| {r['median']:.0f} | {r['p50']:.3f} | {r['p90']:.3f} | {r['slowest']:.3f} "
            f"| {r['steps']} |"
        )
    by_place: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        by_place[r["place"]].append(r)
    base = [r["window"] for r in by_place.get(BASELINE, [])]
    lines += [
        "",
        f"| place | runs | whole window, median ({unit}) | range | step p90 range (s) "
        f"| against {BASELINE} (median / median) |",
        "|---|---|---|---|---|---|",
    ]
    for place, rs in by_place.items():
        w = [r["window"] for r in rs]
        p90 = [r["p90"] for r in rs]
        if place == BASELINE or not base:
            against = "-"
        else:
            ratio = unpaired_ratio(w, base)
            against = f"{ratio.estimate:.3f}x"
            if ratio.ci_available:
                against += f" [{ratio.ci_low:.3f}, {ratio.ci_high:.3f}] ({ratio.ci_method})"
        lines.append(
            f"| {place} | {len(rs)} | {statistics.median(w):.0f} | {min(w):.0f}-{max(w):.0f} "
            f"| {min(p90):.3f}-{max(p90):.3f} | {against} |"
        )
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("bundles", type=Path, nargs="+")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    text = table([b for b in a.bundles if (b / "results.json").is_file()])
    print(text)
    if a.out:
        a.out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
