"""The kit's sweep beside nccl-tests run in the same device call (`kit refs nccl-tests`).

Per variant: nccl-tests' files of the same program and variant (nccl-tests/<program>-<variant>-
<k>.txt in the bundle), the median over them of time and busbw per size in the column that times
what the kit times, and the kit's busbw over it. Only the same timing mode is compared: the
kit's CUDA-graph sweeps with nccl-tests -G, every other with nccl-tests without it. Sizes are
named where busbw reads below SAME_CALL_FLOOR from SAME_CALL_FROM up, or the time per call
is over SAME_CALL_TIME times nccl-tests' (kit.refs.nccl_tests: one definition, which
scripts/device/collectives_check.py reads too).
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass, field
from typing import Any

from kit.refs.nccl_tests import (
    SAME_CALL_ABOVE,
    SAME_CALL_FLOOR,
    SAME_CALL_FROM,
    SAME_CALL_TIME,
    SPIN_HELD_WHY,
    NcclTestsRun,
    parse,
    size_words,
)
from kit.report.analysis.model import Benchmark
from kit.report.analysis.sweeps import sweep_curves


@dataclass
class SameCall:
    """One variant of a sweep against nccl-tests' runs of the same call."""

    variant: str
    program: str
    placement: str
    files: list[str]
    mode: str  # the kit's timing methods, as its rows name them
    rows: list[dict[str, Any]] = field(default_factory=list)
    below: list[tuple[int, float]] = field(default_factory=list)  # busbw under the floor
    slow: list[tuple[int, float]] = field(default_factory=list)  # time over the ceiling
    above: list[tuple[int, float]] = field(default_factory=list)  # spin-held over eager nccl-tests
    counts: str = ""  # nccl-tests' -w / -n / -G, as its headers printed them
    path: str = ""  # the call each side made
    note: str = ""  # why nothing was compared
    skipped: str = ""  # the sizes left out because nccl-tests ran no run of their mode

    @property
    def first_page(self) -> str:
        """Page 1's sentence: this comparison, which replaces the shipped reference's there."""
        runs = f"{len(self.files)} run{'s' if len(self.files) != 1 else ''}"
        return (
            f"against nccl-tests {self.program} in the same call ({runs}, {self.counts}, its "
            f"{self.placement} column): {self.verdict}"
        )

    @property
    def verdict(self) -> str:
        """The sizes named, in words (the report's sentence under the table)."""
        if self.note:
            return self.note
        parts = []
        if self.below:
            sizes = ", ".join(f"{size_words(s)} ({r:.3f}x)" for s, r in self.below)
            parts.append(f"busbw below {SAME_CALL_FLOOR}x nccl-tests' at {sizes}")
        if self.slow:
            sizes = ", ".join(f"{size_words(s)} ({r:.2f}x)" for s, r in self.slow)
            parts.append(f"time per call over {SAME_CALL_TIME:.2f}x nccl-tests' at {sizes}")
        if not parts:
            every = "every compared size" if self.skipped else "every size"
            # from the first size compared at or above the floor's start: where CUDA-graph sizes
            # were left out, that may be above SAME_CALL_FROM (2 MiB, not 1 MiB)
            start = min((r["size"] for r in self.rows if r["size"] >= SAME_CALL_FROM), default=0)
            parts.append(
                f"busbw at least {SAME_CALL_FLOOR}x nccl-tests' at {every} from "
                f"{size_words(start or SAME_CALL_FROM)}, and time within {SAME_CALL_TIME:.2f}x "
                f"at {every}"
            )
        if self.above:  # above it, by more than noise: the reason, which is the timing mode
            sizes = ", ".join(f"{size_words(s)} ({r:.2f}x)" for s, r in self.above)
            parts.append(f"busbw above nccl-tests' at {sizes}: {SPIN_HELD_WHY}")
        return "; ".join(parts + ([self.skipped] if self.skipped else []))


NAME = re.compile(r"^(?P<stem>.+)-(?P<k>\d+)\.txt$")


def runs_of(texts: dict[str, str], program: str, variant: str) -> list[NcclTestsRun]:
    """nccl-tests' runs of this program and variant among the bundle's stored files."""
    out = []
    for name, text in sorted(texts.items()):
        m = NAME.match(name)
        if m and m["stem"] == f"{program}-{variant}":
            try:  # `kit refs nccl-tests` stored only parsed runs; a planted file is skipped
                run = parse(text, name)
            except ValueError:
                continue
            if run.test == program:
                out.append(run)
    return out


def mode_of(timing: list[str]) -> str:
    """The nccl-tests mode a size's kit methods compare with: -G for CUDA-graph sizes only;
    a size graph-timed in some repeats and not others ("mixed") with neither."""
    if "cuda-graph" in timing:
        return "cuda-graph" if timing == ["cuda-graph"] else "mixed"
    return "eager"


def _median_column(
    runs: list[NcclTestsRun], placement: str, size: int
) -> tuple[float, float] | None:
    points = [r.column(placement)[size] for r in runs if size in r.column(placement)]
    if not points:
        return None
    return statistics.median(p[0] for p in points), statistics.median(p[1] for p in points)


SKIPPED_WORDS = {
    "cuda-graph": "timed by CUDA-graph replay not compared: no nccl-tests run used -G",
    "eager": "timed without a CUDA graph not compared: every nccl-tests run used -G",
    "mixed": "timed by CUDA-graph replay in some repeats and not in others not compared",
}
"""Why sizes of a timing mode were left out: only the same mode is compared."""


def same_call(bench: Benchmark, texts: dict[str, str]) -> dict[str, SameCall]:
    """Per variant with nccl-tests files of the bench's program: the comparison, each size
    against nccl-tests' runs of its own timing mode only."""
    sweep = bench.spec.sweep if bench.spec else None
    if sweep is None or not texts:
        return {}
    curves = sweep_curves(bench)["curves"]
    calls = sorted({c for r in bench.runs if (c := r.data.extra("call"))})
    out = {}
    for v in bench.variants:
        every = runs_of(texts, sweep.tool, v.name)
        curve = curves.get(v.name) or {}
        if not every or not curve:
            continue
        methods = ", ".join(sorted({t for p in curve.values() for t in p["timing"]}))
        sc = SameCall(v.name, sweep.tool, sweep.placement, [], methods or "not recorded")
        sc.path = (
            f"kit: {', '.join(calls) or 'the torch.distributed call was not recorded'}; "
            f"nccl-tests: {', '.join(sorted({r.nccl_call for r in every}))}"
        )
        sc.counts = "; ".join(
            sorted(
                {
                    f"-w {r.warmup} -n {r.iters}" + (f" -G {r.graph}" if r.graph else "")
                    for r in every
                }
            )
        )
        unmatched: dict[str, int] = {}
        for size in sorted(curve):
            p = curve[size]
            mode = mode_of(p["timing"])
            runs = [r for r in every if r.mode == mode]
            if not runs:
                unmatched[mode] = unmatched.get(mode, 0) + 1
                continue
            theirs = _median_column(runs, sweep.placement, size)
            if theirs is None:
                continue
            sc.files += [r.name for r in runs if r.name not in sc.files]
            ratio = p["busbw"] / theirs[1] if theirs[1] > 0 else None
            time_ratio = p["time"] / theirs[0] if theirs[0] > 0 else None
            wrongs = [r.wrong_of(sweep.placement).get(size) for r in runs]
            sc.rows.append(
                {
                    "size": size,
                    "time": p["time"],
                    "latency": p.get("latency"),
                    "busbw": p["busbw"],
                    "dropped": p.get("dropped", 0),
                    "wrong": p["wrong"],
                    "nt_time": theirs[0],
                    "nt_busbw": theirs[1],
                    "nt_wrong": None if None in wrongs else sum(wrongs),
                    "ratio": ratio,
                    "time_ratio": time_ratio,
                    "mode": mode,
                }
            )
            if size >= SAME_CALL_FROM and ratio is not None and ratio < SAME_CALL_FLOOR:
                sc.below.append((size, ratio))
            if time_ratio is not None and time_ratio > SAME_CALL_TIME:
                sc.slow.append((size, time_ratio))
            held = "spin-held" in p["timing"] and mode == "eager"
            if held and size >= SAME_CALL_FROM and ratio is not None and ratio > SAME_CALL_ABOVE:
                sc.above.append((size, ratio))
        sc.skipped = "; ".join(
            f"{n} size{'s' if n != 1 else ''} {SKIPPED_WORDS[m]}"
            for m, n in sorted(unmatched.items())
        )
        if not sc.rows:
            sc.note = sc.skipped or "not compared: no size in common with nccl-tests' runs"
        out[v.name] = sc
    return out
