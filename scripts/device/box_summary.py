"""Print what page 1 of an acceptance bundle says about each GPU, in plain text: the device run
(scripts/device/acceptance.sh) writes it beside each bundle, so a call's output shows at once
whether the planted slow GPU was named (the machines have no Pango for the PDF).

    python3 scripts/device/box_summary.py BUNDLE [--expect-named GPU]

--expect-named N: exit 1 unless GPU N (hardware.json's index; on the CPU, rank N) is named below
the median of the box's other GPUs and no other GPU is. Reads the bundle as every report does
(kit.report.analysis.box.judge_bundle).
"""

from __future__ import annotations

import argparse
import sys
from datetime import datetime
from pathlib import Path

from kit.model import load_bundle
from kit.report.analysis.box import judge_bundle


def _seconds(start: str, end: str | None) -> str:
    if not end:
        return "not finished"
    took = datetime.fromisoformat(end) - datetime.fromisoformat(start)
    return f"{took.total_seconds():.0f} s from the bundle's creation to its last run"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("bundle", type=Path)
    p.add_argument("--expect-named", type=int, default=None)
    args = p.parse_args()
    data = load_bundle(args.bundle)
    r = data.results
    print(
        f"{args.bundle.name}: recipe {r.recipe}, status {r.status}, {data.recipe.gpus} GPUs, "
        f"{_seconds(r.created_at, r.finished_at)}"
    )
    box = judge_bundle(data)
    if box is None:
        print("no per-GPU checks in this bundle")
        return 1 if args.expect_named is not None else 0
    print(f"repeats {box.repeats}{' (screening)' if box.screening else ''}; margins {box.margins}")
    for row in box.rows:
        cells = "  ".join(
            f"{f.label} {f.median:.4g}" + (f" ({f.vs_words})" if f.vs_words else "")
            for f in row.figures.values()
            if f.median is not None
        )
        print(f"  {row.identity}: {row.verdict}; {cells}")
    for line in box.outliers + box.link_outliers:
        print(f"NAMED: {line}")
    if not box.outliers and not box.link_outliers:
        print("no GPU and no pair named")
    for note in box.notes:
        print(f"note: {note}")
    if args.expect_named is None:
        return 0
    named = [row.gpu.index if row.gpu else row.position for row in box.rows if row.below]
    ok = named == [args.expect_named]
    words = "named, alone" if ok else f"NOT as expected: named {named}"
    print(f"planted GPU {args.expect_named}: {words}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
