"""Each GPU's and each GPU pair's figures over the finished runs: the one reading of the copy and
matmul payloads that the silicon section, page 1's per-GPU table and the per-GPU section share
(a figure printed in two places comes from here once).

A position is the runs' own index: CUDA's device number on a GPU machine (the copy worker's
`per_gpu` row, the matmul worker's rank, the pair matrix's row and column), the rank on the CPU.
`hardware_of` says which GPU of hardware.json stood there. A figure of a GPU is its value in
each finished run that measured it; what is printed is their median.
"""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from kit.model import Hardware, RunResult
from kit.model.hardware import Gpu
from kit.report.analysis.model import Benchmark, is_ok
from kit.report.facts.window import used_gpus
from kit.workloads.registry import params_class

COPY_KEYS = ("h2d_gbps", "d2h_gbps", "local_gbps")
"""The copy worker's per-GPU figures (kit/workloads/copy_bandwidth/worker.py)."""


def silicon_runs(benches: list[Benchmark], facts: str) -> list[RunResult]:
    """The finished runs, with a payload, of the benchmarks whose figure kind gives these
    silicon `facts` ("copy" or "matmul": kit.report.kinds, never a kind name here)."""
    return [
        r
        for b in benches
        if b.figures.silicon == facts
        for r in b.runs
        if is_ok(r) and (r.data.model_fields_set or r.data.model_extra)
    ]


def median(values: list[Any]) -> float | None:
    """The median of the numbers among `values`, None when there are none."""
    xs = [v for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
    return statistics.median(xs) if xs else None


def distance(value: float | None, reference: float | None) -> float | None:
    """How far a median is from the one it is held against (-0.21: 21% below); None when
    either is unknown or the reference is 0 (no ratio)."""
    return value / reference - 1 if value is not None and reference else None


class HeldAgainstPeers:
    """A figure's value in each repeat held against the median of its peers (the box's GPUs,
    the pairs on its path): named when its own median is more than `margin` below theirs. For
    the dataclasses that carry `values` and `margin` and say which median is their peers'."""

    values: list[float]
    margin: float

    @property
    def peers_median(self) -> float | None:
        raise NotImplementedError

    @property
    def median(self) -> float | None:
        return median(self.values)

    @property
    def vs_peers(self) -> float | None:
        """The median's distance from the peers' median (-0.21: 21% below)."""
        return distance(self.median, self.peers_median)

    @property
    def below(self) -> bool:
        """More than the margin below the peers' median: the GPU or the pair is named for it."""
        return self.vs_peers is not None and self.vs_peers < -self.margin


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def copy_values(runs: list[RunResult]) -> list[dict[str, list[float]]]:
    """Per position, per copy figure (COPY_KEYS), its value in each run that measured it."""
    rows = [r.data.extra("per_gpu") or [] for r in runs]
    n = min((len(x) for x in rows), default=0)
    return [
        {k: [v for x in rows if (v := _number(x[i].get(k))) is not None] for k in COPY_KEYS}
        for i in range(n)
    ]


@dataclass
class Ceiling:
    """One dtype of the matmul runs: per position its TFLOP/s in each run, held alone and all
    at once, and the shapes and hold the runs used (the conditions a reference must share)."""

    dtype: str
    alone: list[list[float]] = field(default_factory=list)
    together: list[list[float]] = field(default_factory=list)
    shapes: list[list[int]] = field(default_factory=list)  # the best shape of each run
    sustain_s: float | None = None
    search: str | None = None  # the shapes searched (search_words), the same in every run

    @property
    def shape_words(self) -> str:
        """The best shape the runs found: "8192x4096x16384", or where the repeats' searches
        found different ones, each with how many runs found it ("8192x4096x16384 in 2 of 3
        runs, 4096x4096x8192 in 1"): near-equal shapes trade places from repeat to repeat, and
        the table named the first run's alone beside a median over all three."""
        counts = Counter("x".join(map(str, s)) for s in self.shapes)
        if len(counts) <= 1:
            return next(iter(counts), "not recorded")
        (first, n), *rest = counts.most_common()
        return ", ".join(
            [f"{first} in {n} of {len(self.shapes)} runs"] + [f"{s} in {k}" for s, k in rest]
        )


def search_words(params: dict[str, Any]) -> str | None:
    """The shapes a matmul ceiling searched, as a reference's condition names them:
    "m 4096/8192, n 4096/8192, k 8192/16384"; None where the run did not record them."""
    sizes = [params.get(f"{d}_sizes") for d in "mnk"]
    if not all(isinstance(x, list) and x for x in sizes):
        return None
    return ", ".join(f"{d} {'/'.join(map(str, x))}" for d, x in zip("mnk", sizes, strict=True))


def _column(found: list[dict[str, Any]], where: str) -> list[list[float]]:
    lists = [f.get(where) or [] for f in found]
    n = min((len(x) for x in lists), default=0)
    return [[v for x in lists if (v := _number(x[i].get("tflops"))) is not None] for i in range(n)]


def ceilings(runs: list[RunResult]) -> list[Ceiling]:
    """Per dtype the first run names, each position's TFLOP/s in every run that measured it."""
    datas = [r.data for r in runs]
    out = []
    for dtype in (datas[0].extra("dtypes") or {}) if datas else {}:
        found = [d.extra("dtypes")[dtype] for d in datas if dtype in (d.extra("dtypes") or {})]
        shapes = [list(f["best_shape"]) for f in found if f.get("best_shape")]
        sustain = median([(d.params or {}).get("sustain_s") for d in datas])
        searched = {search_words(d.params or {}) for d in datas}
        search = searched.pop() if len(searched) == 1 else "several (the runs differ)"
        out.append(
            Ceiling(
                dtype, _column(found, "alone"), _column(found, "together"), shapes, sustain, search
            )
        )
    return out


def outlier_pct(runs: list[RunResult]) -> float:
    """How far below the other GPUs' median (percent) the matmul runs named a GPU: the first
    recorded `outlier_pct`, else the workload's default (why 10: its params). One reading for
    the run's notes as the silicon section prints them and for page 1's table of every GPU."""
    for r in runs:
        pct = (r.data.params or {}).get("outlier_pct") if r.data else None
        if isinstance(pct, int | float) and not isinstance(pct, bool):
            return float(pct)
    return float(params_class(runs[0].kind)().outlier_pct)


def pair_values(runs: list[RunResult], key: str) -> list[list[list[float]]] | None:
    """The pair matrix `key` (kit.workloads.copy_bandwidth.matrix) cell by cell: each cell's
    value in every run that measured it ([] where none did: N/A); None when no run has it."""
    mats = [m for r in runs if (m := (r.data.extra("pairs") or {}).get(key))]
    if not mats:
        return None
    n = min(len(m) for m in mats)
    return [
        [[v for m in mats if (v := _number(m[i][j])) is not None] for j in range(n)]
        for i in range(n)
    ]


def hardware_of(runs: list[RunResult], hardware: Hardware | None, n: int) -> list[Gpu | None]:
    """The hardware.json GPU at each of `n` positions: by the UUIDs the runs' telemetry names
    for the GPUs they drove (kit.report.facts.window.used_gpus, in CUDA's order), else the i-th GPU
    recorded (the launch hands a run the first GPUs); None on the CPU."""
    gpus = hardware.gpus if hardware else []
    if not gpus:
        return [None] * n
    by_uuid = {g.uuid: g for g in gpus if g.uuid}
    for run in runs:
        used = [by_uuid.get(u.get("uuid")) for u in used_gpus(run)]
        if len(used) >= n and all(used[:n]):
            return used[:n]
    return [gpus[i] if i < len(gpus) else None for i in range(n)]
