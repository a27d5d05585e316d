#!/usr/bin/env python3
"""The kit's collective sweeps against nccl-tests' *_perf programs run in the same device call.

    python3 scripts/device/collectives_check.py BUNDLE NCCL_TESTS_DIR [--out comparison.md]

NCCL_TESTS_DIR holds `<program>-<variant>.txt` (all_reduce_perf-p2p.txt, ...), what
scripts/device/multi_gpu.sh writes. For each collective and variant, per size from 1 MiB up: the
kit's busbw (median over repeats of each repeat's median trial) over nccl-tests' busbw in the
column that times what the kit times (each workload's spec names its placement: torch's
all_reduce works in place, all-gather, reduce-scatter and all-to-all take a separate output). PASS when every size from 1 MiB up reads at least 0.97x, and the kit's headline (busbw
at the largest size) lies on the plateau (within 3% of the sweep's highest busbw).
nccl-tests' output is read by the kit's own parser (kit.refs.nccl_tests).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from kit.model import load_bundle  # noqa: E402
from kit.refs.nccl_tests import parse, size_words  # noqa: E402
from kit.report.analysis import Benchmark, bundle_benchmarks, size_table  # noqa: E402
from kit.workloads.registry import SPECS  # noqa: E402

KINDS = [kind for kind, s in SPECS.items() if s.sweep is not None]
"""Every collective the kit sweeps: the kinds whose spec names an nccl-tests program."""
FLOOR = 0.97
FROM_BYTES = 1 << 20
PLATEAU = 0.97


def program_and_column(kind: str) -> tuple[str, str]:
    """The nccl-tests program a kind follows and the column it times, from its workload spec."""
    sweep = SPECS[kind].sweep
    return sweep.tool, sweep.placement


def kit_rows(benches: list[Benchmark], kind: str, variant: str) -> dict[int, tuple[float, float]]:
    """{bytes: (time us, busbw GB/s)} of the kit's sweep of this kind (the report's curve:
    kit.report.analysis.size_table); {} where the bundle ran none."""
    bench = next((b for b in benches if b.kind == kind), None)
    return size_table(bench, variant) if bench is not None else {}


OTHER = {"in-place": "out-of-place", "out-of-place": "in-place"}


def compare(bundle: Path, refs: Path) -> tuple[str, dict]:
    benches = bundle_benchmarks(load_bundle(bundle))
    variants = list(dict.fromkeys(v.name for b in benches for v in b.variants))
    lines = [
        f"# Collectives: kit (`{bundle.name}`) against nccl-tests, same call\n",
        f"Per size from {size_words(FROM_BYTES)} up: the kit's busbw over nccl-tests' busbw in the "
        "column that times what the kit times. PASS: every such size at least "
        f"{FLOOR}x and the kit's headline (largest size) within {1 - PLATEAU:.0%} of its sweep's "
        "highest busbw.\n",
    ]
    summary: dict = {}
    for kind in KINDS:
        program, column = program_and_column(kind)
        for variant in variants:
            kit = kit_rows(benches, kind, variant)
            ref_file = refs / f"{program}-{variant}.txt"
            if not kit or not ref_file.is_file():
                lines.append(
                    f"\n## {kind}, {variant}: not compared "
                    f"({'no kit run' if not kit else f'no {ref_file.name}'})\n"
                )
                continue
            run = parse(ref_file.read_text(), ref_file.name)
            ref, other_ref = run.column(column), run.column(OTHER[column])
            lines += [
                f"\n## {kind}, {variant} (nccl-tests {program}, {column} column)\n",
                "| size | kit time (us) | nccl-tests time (us) | kit busbw (GB/s) "
                f"| nccl-tests busbw {column} | other column | ratio |",
                "|---|---|---|---|---|---|---|",
            ]
            ratios = []
            for size in sorted(kit):
                if size < FROM_BYTES or size not in ref:
                    continue
                (kt, kb), (rt, rb) = kit[size], ref[size]
                ratio = kb / rb if rb else float("nan")
                ratios.append((size, ratio))
                lines.append(
                    f"| {size_words(size)} | {kt:.1f} | {rt:.1f} | {kb:.2f} | {rb:.2f} | "
                    f"{other_ref.get(size, (0, float('nan')))[1]:.2f} | {ratio:.3f} |"
                )
            largest = max(kit)
            peak = max(b for _, b in kit.values())
            on_plateau = kit[largest][1] >= PLATEAU * peak
            worst = min(ratios, key=lambda x: x[1]) if ratios else (None, float("nan"))
            ok = bool(ratios) and worst[1] >= FLOOR and on_plateau
            summary[f"{kind}/{variant}"] = {
                "lowest_ratio": worst[1],
                "lowest_at_bytes": worst[0],
                "headline_gbps": kit[largest][1],
                "peak_gbps": peak,
                "on_plateau": on_plateau,
                "pass": ok,
            }
            lines.append(
                f"\n{'PASS' if ok else 'FAIL'}: lowest ratio {worst[1]:.3f}"
                f"{f' at {size_words(worst[0])}' if worst[0] else ''}; headline "
                f"{kit[largest][1]:.1f} GB/s at {size_words(largest)}, sweep peak {peak:.1f} "
                f"({'on' if on_plateau else 'NOT on'} the plateau)\n"
            )
    return "\n".join(lines), summary


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("bundle", type=Path)
    ap.add_argument("refs", type=Path)
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args()
    text, summary = compare(a.bundle, a.refs)
    print(text)
    if a.out:
        a.out.write_text(text)
        a.out.with_suffix(".json").write_text(json.dumps(summary, indent=1))
    return 0 if summary and all(s["pass"] for s in summary.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
