"""The report's view of a bundle's runs: benchmarks, their variants and per-metric summaries.

Plain data over results.json's typed header and its typed runs (kit.model.RunResult); a
workload's own payload fields are read through RunData.extra. Built by grouping.build_benchmarks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kit.model import AdaptiveRecord, RunResult
from kit.recipe import Expectation
from kit.report.kinds import FigureKind, figure_kind
from kit.shared.metrics import CV_THRESHOLD
from kit.shared.p2p import p2p_off
from kit.workloads.base import WorkloadSpec


def is_ok(run: RunResult) -> bool:
    return run.status == "ok"


def p2p_disabled(run: RunResult) -> bool:
    return p2p_off(run.env, {"env": run.nccl.env} if run.nccl is not None else None)


@dataclass
class MetricRow:
    """One metric of one variant over its finished repeats (summary None: nothing finished).

    label, higher_is_better and per_gpu come from the metric catalog (kit.shared.metrics); the
    unit is the one the runs recorded (written by the same catalog)."""

    name: str
    label: str
    unit: str
    higher_is_better: bool
    values: list[float]
    summary: Any = None  # kit.stats.Summary
    noisy: bool = False
    per_gpu: bool = False  # work summed over the GPUs: also given per GPU, and priced


@dataclass
class VariantBlock:
    name: str
    description: str
    runs: list[RunResult]
    ok: list[RunResult]
    failed: list[RunResult]
    missing: int = 0  # repeats planned but never run

    @property
    def gpus(self) -> int | None:
        """The GPU (rank) count of the first finished run that recorded one."""
        return next((r.world_size for r in self.ok if r.world_size), None)

    @property
    def p2p_off(self) -> bool | None:
        """Whether this variant's runs had peer-to-peer off (None: no run, or they differ)."""
        seen = {p2p_disabled(r) for r in self.ok or self.runs}
        return seen.pop() if len(seen) == 1 else None


@dataclass
class Verdict:
    """A sentence comparing two variants on one metric, or why it cannot be said."""

    benchmark: str
    metric: str
    sentence: str
    ratio: Any = None  # kit.stats.Ratio
    pairs: int = 0
    failed: bool = False
    withheld: str = ""  # why the comparison is not a finding (noisy, drifting, failed runs)
    p2p: bool = False  # P2P on against P2P off: the P2P effect
    against: str = ""  # "p2p against no-p2p", where a withheld verdict names the pair


@dataclass
class Benchmark:
    name: str
    kind: str
    label: str
    params: dict[str, Any]
    variants: list[VariantBlock]
    metrics: dict[str, dict[str, MetricRow]] = field(default_factory=dict)  # metric -> variant
    verdicts: list[Verdict] = field(default_factory=list)
    wrong_total: int = 0
    # the recipe's `expect:`, per metric its references (one per GPU model and count)
    expect: list[tuple[str, list[Expectation]]] = field(default_factory=list)
    spec: WorkloadSpec | None = None  # None: a kind this kit does not know
    cv_threshold: float = CV_THRESHOLD
    # three counts that are easy to confuse: what the plan asked for (the recipe, or the
    # command's --repeats), what ran (adaptive repeats may add whole repeats), and the
    # adaptive decision itself (kit.run.adaptive.adaptive_record), None where none was recorded
    planned_repeats: int = 0
    repeats_ran: int = 0
    adaptive: AdaptiveRecord | None = None

    @property
    def runs(self) -> list[RunResult]:
        return [r for v in self.variants for r in v.runs]

    @property
    def figures(self) -> FigureKind:
        """What the report draws for it (kit.report.kinds): the spec's kind, else one guessed
        from the runs' data."""
        if self.spec is not None:
            return figure_kind(self.spec.figures)
        swept = any(r.data.sizes for r in self.runs if is_ok(r))
        return figure_kind("sweep" if swept else "training")
