#!/usr/bin/env python3
"""Containers against the host runtime: the headline of each benchmark and variant, paired by round.

    python3 reports/measurements/2026-11-24-h100x1-llama-container-rounds/runtime_ratio.py BUNDLE... [--out runtime_ratio.md]

The bundles come from interleaved rounds in one device call (docker, host, docker, host, ...;
scripts/device/containers.sh makes them): each bundle's runtime is read from its
environment.json, and round i of the container goes with round i of the host, so drift that
hits both (clocks, temperature) cancels inside each pair. Per benchmark and variant: every
round's headline on both runtimes, the paired ratio container / host with its interval
(kit.stats.paired_ratio), and the P2P effect (p2p / no-p2p) on each runtime, paired by round.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from kit.stats import paired_ratio  # noqa: E402
from kit.workloads.registry import headline_metric  # noqa: E402

Key = tuple[str, str, str]  # (benchmark, variant, metric)
WINDOW = "throughput_window"  # whole-window throughput, beside each kind's headline


def headlines(bundle: Path) -> tuple[str, dict[Key, tuple[float, str, str]]]:
    """(runtime, {(benchmark, variant, metric): (median over the bundle's repeats, metric, unit)})."""
    env = json.loads((bundle / "environment.json").read_text())
    runs = json.loads((bundle / "results.json").read_text())["runs"]
    values: dict[Key, list[float]] = defaultdict(list)
    names: dict[Key, tuple[str, str]] = {}
    for r in runs:
        for metric in dict.fromkeys([headline_metric(r["kind"]), WINDOW]):
            if r["status"] != "ok" or not (r["metrics"].get(metric) or {}).get("value"):
                continue  # a failed run, or a headline of 0 (busbw on one GPU): no ratio
            key = (r["benchmark"], r["variant"], metric)
            values[key].append(r["metrics"][metric]["value"])
            names[key] = (metric, r["metrics"][metric]["unit"])
    out = {k: (statistics.median(v), *names[k]) for k, v in values.items()}
    return env.get("runtime", "?"), out


def started(bundle: Path) -> str:
    """When the bundle's first run started (ISO time, so it sorts)."""
    runs = json.loads((bundle / "results.json").read_text())["runs"]
    return min((r.get("started_at") or "" for r in runs), default="")


def fmt(r) -> str:
    iv = f" [{r.ci_low:.3f}, {r.ci_high:.3f}] {r.label}" if r.ci_available else ""
    return f"{r.estimate:.3f}x{iv} ({r.ci_method}, n={r.n_a})"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("bundles", type=Path, nargs="+")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    rounds: dict[str, list[dict]] = defaultdict(list)
    units: dict[Key, tuple[str, str]] = {}
    bundles = [b for b in a.bundles if (b / "results.json").is_file()]
    for b in sorted(set(a.bundles) - set(bundles)):
        print(f"skipped {b}: no results.json", file=sys.stderr)
    bundles.sort(key=started)  # the order they ran in: round i of each runtime pairs with round i
    for b in bundles:
        runtime, found = headlines(b)
        rounds[runtime].append({k: v[0] for k, v in found.items()})
        units |= {k: v[1:] for k, v in found.items()}
    docker, host = rounds.get("docker", []), rounds.get("host", [])
    lines = [
        "# Containers against the host runtime, interleaved rounds in one call\n",
        f"Bundles: {len(docker)} docker, {len(host)} host, in the order run: "
        + ", ".join(b.name for b in bundles)
        + "\n",
        "| benchmark | variant | metric | docker rounds | host rounds | docker / host (paired) |",
        "|---|---|---|---|---|---|",
    ]
    n = min(len(docker), len(host))
    for key in sorted(units):
        d = [r[key] for r in docker[:n] if key in r]
        h = [r[key] for r in host[:n] if key in r]
        ratio = fmt(paired_ratio(d, h)) if len(d) == len(h) and d else "not paired"
        metric, unit = units[key]
        lines.append(
            f"| {key[0]} | {key[1]} | {metric} ({unit}) | {', '.join(f'{x:.1f}' for x in d)} "
            f"| {', '.join(f'{x:.1f}' for x in h)} | {ratio} |"
        )
    effects = []
    for bench, metric in sorted({(k[0], k[2]) for k in units}):
        on, off = (bench, "p2p", metric), (bench, "no-p2p", metric)
        if on not in units or off not in units:
            continue
        for name, rs in (("docker", docker), ("host", host)):
            pairs = [(r[on], r[off]) for r in rs if on in r and off in r]
            if pairs:
                ratio = paired_ratio([p for p, _ in pairs], [q for _, q in pairs])
                effects.append(f"- {bench}, {metric}, {name}: {fmt(ratio)}")
    if effects:
        lines += ["", "P2P effect (p2p / no-p2p, paired by round) on each runtime:", "", *effects]
    text = "\n".join(lines) + "\n"
    print(text)
    if a.out:
        a.out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
