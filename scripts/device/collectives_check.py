#!/usr/bin/env python3
"""The kit's collective sweeps against nccl-tests' *_perf programs run in the same device call.

    python3 scripts/device/collectives_check.py BUNDLE [NCCL_TESTS_DIR] [--out comparison.md]

Without NCCL_TESTS_DIR the bundle's own nccl-tests/ folder is read (what `kit refs nccl-tests`
stored); with it, `<program>-<variant>.txt` or `<program>-<variant>-<anything>.txt` there
(all_reduce_perf-p2p-r1.txt, ...: what scripts/device/multi_gpu.sh writes), several runs of one
program and variant taken as their median per size. The comparison is the report's
(kit.report.analysis.same_call): per size, the kit's busbw (median over repeats of each repeat's
median trial) over nccl-tests' in the column that times what the kit times, in the same timing
mode. PASS when every size from SAME_CALL_FROM up reads at least SAME_CALL_FLOOR x
(kit.refs.nccl_tests), and the kit's headline (busbw at the largest size) is within 3% of the
sweep's highest busbw. Whether that size is on the bandwidth plateau is said in the report's words
(kit.report.analysis.sweeps.plateau_words), one definition for both. Time per call over
SAME_CALL_TIME x nccl-tests' is listed too (the issue's goal from 8 B), without failing the check.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from kit.model import load_bundle  # noqa: E402
from kit.refs.nccl_tests import SAME_CALL_FLOOR, SAME_CALL_FROM, size_words  # noqa: E402
from kit.report.analysis import bundle_benchmarks  # noqa: E402
from kit.report.analysis.same_call import same_call  # noqa: E402
from kit.report.analysis.sweeps import plateau_words  # noqa: E402
from kit.workloads import registry  # noqa: E402

KINDS = [kind for kind in registry.KINDS if (s := registry.spec(kind)) and s.sweep is not None]
"""Every collective the kit sweeps: the kinds whose spec names an nccl-tests program."""
FLOOR = SAME_CALL_FLOOR
FROM_BYTES = SAME_CALL_FROM
PEAK_SHARE = 0.97


def program_and_column(kind: str) -> tuple[str, str]:
    """The nccl-tests program a kind follows and the column it times, from its workload spec."""
    sweep = registry.spec(kind).sweep
    return sweep.tool, sweep.placement


def dir_texts(refs: Path, variants: list[str]) -> dict[str, str]:
    """A folder's nccl-tests outputs under the names a bundle stores them by
    (<program>-<variant>-<k>.txt)."""
    out: dict[str, str] = {}
    for kind in KINDS:
        program, _ = program_and_column(kind)
        for variant in variants:
            stem = f"{program}-{variant}"
            found = sorted(refs.glob(f"{stem}.txt")) + sorted(refs.glob(f"{stem}-*.txt"))
            for k, path in enumerate(found, 1):
                out[f"{stem}-{k}.txt"] = path.read_text()
    return out


def compare(bundle: Path, refs: Path | None = None) -> tuple[str, dict]:
    data = load_bundle(bundle)
    benches = bundle_benchmarks(data)
    variants = list(dict.fromkeys(v.name for b in benches for v in b.variants))
    texts = data.nccl_tests if refs is None else dir_texts(refs, variants)
    lines = [
        f"# Collectives: kit (`{bundle.name}`) against nccl-tests, same call\n",
        f"Per size: the kit's busbw over nccl-tests' busbw in the column that times what the kit "
        f"times, in the same timing mode (median over nccl-tests' runs). PASS: every size from "
        f"{size_words(FROM_BYTES)} at least {FLOOR}x and the kit's headline (largest size) within "
        f"{1 - PEAK_SHARE:.0%} of its sweep's highest busbw.\n",
    ]
    summary: dict = {}
    for kind in KINDS:
        program, column = program_and_column(kind)
        bench = next((b for b in benches if b.kind == kind), None)
        found = same_call(bench, texts) if bench is not None else {}
        for variant in variants:
            sc = found.get(variant)
            if sc is None or not sc.rows:
                why = "no kit run" if bench is None else (sc.note if sc else f"no {program} run")
                lines.append(f"\n## {kind}, {variant}: not compared ({why})\n")
                continue
            lines += [
                f"\n## {kind}, {variant} (nccl-tests {program}, {column} column, "
                f"{len(sc.files)} run(s), {sc.counts}; kit timed by {sc.mode})\n",
                f"Path: {sc.path}\n",
                "| size | kit time (us) | nccl-tests time (us) | kit busbw (GB/s) "
                f"| nccl-tests busbw {column} | ratio | kit latency (us) | dropped |",
                "|---|---|---|---|---|---|---|---|",
            ]
            for r in sc.rows:
                ratio = f"{r['ratio']:.3f}" if r["ratio"] is not None else "-"
                latency = f"{r['latency']:.1f}" if r["latency"] is not None else "-"
                lines.append(
                    f"| {size_words(r['size'])} | {r['time']:.1f} | {r['nt_time']:.1f} | "
                    f"{r['busbw']:.2f} | {r['nt_busbw']:.2f} | {ratio} | {latency} | "
                    f"{r['dropped']} |"
                )
            judged = [
                (r["size"], r["ratio"])
                for r in sc.rows
                if r["size"] >= FROM_BYTES and r["ratio"] is not None
            ]
            kit = {r["size"]: r["busbw"] for r in sc.rows}
            largest = max(kit)
            peak = max(kit.values())
            at_peak = kit[largest] >= PEAK_SHARE * peak
            block = next(v for v in bench.variants if v.name == variant)
            plateau = plateau_words(block.ok)
            worst = min(judged, key=lambda x: x[1]) if judged else (None, float("nan"))
            ok = bool(judged) and worst[1] >= FLOOR and at_peak
            summary[f"{kind}/{variant}"] = {
                "lowest_ratio": worst[1],
                "lowest_at_bytes": worst[0],
                "headline_gbps": kit[largest],
                "peak_gbps": peak,
                "headline_at_peak": at_peak,
                "slow_sizes": [s for s, _ in sc.slow],
                "pass": ok,
            }
            lines.append(
                f"\n{'PASS' if ok else 'FAIL'}: lowest ratio {worst[1]:.3f}"
                f"{f' at {size_words(worst[0])}' if worst[0] else ''}; headline "
                f"{kit[largest]:.1f} GB/s at {size_words(largest)}, "
                f"{'the sweep' if at_peak else f'NOT within {1 - PEAK_SHARE:.0%} of the sweep'}'s "
                "highest "
                f"({peak:.1f}); {plateau or 'plateau not judged'}\n"
            )
            lines.append(f"{variant}: {sc.verdict}.\n")
    return "\n".join(lines), summary


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("bundle", type=Path)
    ap.add_argument("refs", type=Path, nargs="?", default=None)
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
