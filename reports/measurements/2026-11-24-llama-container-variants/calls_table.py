#!/usr/bin/env python3
"""One place against the host runtime over many device calls: each call's ratio, and all of them.

    python3 reports/measurements/2026-11-24-llama-container-variants/calls_table.py CALL... [--place docker] [--out calls.md]

A CALL is one device call's bundles from reports/measurements/2026-11-24-llama-container-variants/container_rounds.sh: a folder of them,
or the `callN-bundles.tar.xz` the measurement folders keep. Each call is one lent machine, and
machines differ by several percent from call to call, so runs compare only within their call:
per call, the median whole-window throughput of PLACE's runs over the host's
(`place_table.py` gives the same figure for one call). Over the calls, the median of those
ratios with its interval (kit.stats.paired_ratio: each call is a pair, PLACE against host) and
how many calls read below the host. Calls without both places are listed and left out.
Where the runs carry step statistics (STATS=1), also each thread's CPU per ordinary step, PLACE's
median less the host's (step_stats_table.py's figure): which side of the step got slower.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from place_table import BASELINE, run_row  # noqa: E402  (beside this script)
from step_stats_table import THREADS, load, ordinary_cpu_ms  # noqa: E402

from kit.stats import paired_ratio  # noqa: E402


def call_bundles(call: Path, scratch: Path) -> list[Path]:
    """The call's bundle folders: the folder's own, or those of its archive unpacked."""
    if call.is_dir():
        return sorted(p for p in call.iterdir() if (p / "results.json").is_file())
    out = Path(tempfile.mkdtemp(dir=scratch))  # two folders may each hold a call2-bundles
    with tarfile.open(call) as tar:
        if hasattr(tarfile, "data_filter"):  # Python 3.11.4+: no links or paths out of `out`
            tar.extractall(out, filter="data")
        else:  # Debian's 3.11.2: the archives read here are the project's own, committed ones
            tar.extractall(out)
    return sorted(p for p in out.iterdir() if (p / "results.json").is_file())


def thread_cpu(bundle: Path) -> dict[str, float | None]:
    """The bundle's run's CPU per ordinary step by thread (ms); None where not recorded."""
    runs = load(bundle)  # the runs with step statistics, as step_stats_table.py reads them
    return ordinary_cpu_ms(runs[0][1]) if runs else dict.fromkeys(THREADS)


def call_row(name: str, bundles: list[Path], place: str) -> dict:
    """One call: the runs of PLACE and of the host, their medians' ratio (None without both),
    and each thread's CPU per ordinary step, PLACE's median less the host's."""
    runs: dict[str, list[float]] = {place: [], BASELINE: []}
    cpu: dict[str, dict[str, list[float]]] = {t: {place: [], BASELINE: []} for t in THREADS}
    for b in bundles:
        row = run_row(b)
        if row["place"] in runs:
            runs[row["place"]].append(row["window"])
            for thread, ms in thread_cpu(b).items():
                if ms is not None:
                    cpu[thread][row["place"]].append(ms)
    medians = [statistics.median(runs[p]) if runs[p] else None for p in (place, BASELINE)]
    ratio = medians[0] / medians[1] if None not in medians else None
    more = {
        t: statistics.median(v[place]) - statistics.median(v[BASELINE])
        if v[place] and v[BASELINE]
        else None
        for t, v in cpu.items()
    }
    return {"call": name, "place": runs[place], "host": runs[BASELINE], "medians": medians,
            "ratio": ratio, **more}  # fmt: skip


def _ms(x: float | None) -> str:
    return f"{x:+.1f}" if x is not None else "-"


def table(rows: list[dict], place: str) -> str:
    lines = [
        f"| call | {place} runs (tokens/s) | host runs (tokens/s) | {place} / host (median / median) "
        "| main-thread CPU per step, less the host's (ms) | autograd-thread CPU, less the host's (ms) |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        ratio = f"{r['ratio']:.3f}x" if r["ratio"] is not None else "- (not both places)"
        lines.append(
            f"| {r['call']} | {', '.join(f'{v:.0f}' for v in r['place']) or '-'} | "
            f"{', '.join(f'{v:.0f}' for v in r['host']) or '-'} | {ratio} | {_ms(r['main'])} | "
            f"{_ms(r['autograd'])} |"
        )
    both = [r for r in rows if r["ratio"] is not None]
    if len(both) >= 2:
        ratio = paired_ratio(*zip(*(r["medians"] for r in both), strict=True))
        below = sum(r["ratio"] < 1 for r in both)
        lines += [
            "",
            f"Over {len(both)} calls, {place} against host (each call a pair of medians): "
            f"{ratio.estimate:.3f}x [{ratio.ci_low:.3f}, {ratio.ci_high:.3f}] ({ratio.label}); "
            f"{below} of {len(both)} calls read below the host.",
        ]
        for thread in THREADS:
            diffs = [r[thread] for r in both if r[thread] is not None]
            if diffs:
                lines.append(
                    f"The {thread} thread's CPU per ordinary step, {place} less host: higher in "
                    f"{sum(d > 0 for d in diffs)} of {len(diffs)} calls, median "
                    f"{statistics.median(diffs):+.1f} ms."
                )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "calls", nargs="+", type=Path, help="each call's bundles (folder or .tar.xz)"
    )
    parser.add_argument("--place", default="docker", help="the place set against the host")
    parser.add_argument("--out", type=Path, help="also write the table here")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        rows = []
        for call in args.calls:
            name = f"{call.parent.parent.name}/{call.name.split('-bundles')[0]}"
            try:
                rows.append(call_row(name, call_bundles(call, Path(scratch)), args.place))
            except (OSError, tarfile.TarError, ValueError, KeyError) as e:
                print(f"calls_table.py: {call}: {' '.join(str(e).split())}", file=sys.stderr)
                return 2
    text = table(rows, args.place)
    print(text, end="")
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
