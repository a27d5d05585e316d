"""What a benchmark gets in the report and the comparison, per figure kind: the one place that
knows it. A workload's spec names its kind (`WorkloadSpec.figures`); the page, page 1, the
silicon section and compare ask the kind's object here, never compare the name.

Adding a figure kind is one entry in KINDS (its plots are keys of kit.report.bench_view.PLOTS).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from kit.io.errors import InputError
from kit.workloads.registry import spec


@dataclass(frozen=True)
class FigureKind:
    """One figure kind.

    plots: the benchmark section's figures, in order (kit.report.bench_view.PLOTS draws each).
    by_size: the message-size curves: the by-size tables as nccl-tests prints them with NCCL's
    setup per variant, the #wrong total, and compare's bus bandwidth lines by size.
    step_note: say so when no finished run recorded its step times.
    page1: what page 1 adds per variant: "link" (bus bandwidth against the link, the plateau,
    nccl-tests beside it) or "work" (per GPU, cost, energy, MFU).
    silicon: which facts of the silicon section its runs give ("copy": host links, HBM and the
    pair matrices; "matmul": the ceilings), None for none.
    placed: how the silicon section places it against what it measured ("mfu": MFU against the
    ceiling of its dtype; "busbw": bus bandwidth against the pair matrix; "hbm": a decode step's
    memory reads against the device-local copy traffic), None for not at all.
    """

    name: str
    plots: tuple[str, ...]
    by_size: bool = False
    step_note: bool = False
    page1: Literal["link", "work"] = "work"
    silicon: Literal["copy", "matmul"] | None = None
    placed: Literal["mfu", "busbw", "hbm"] | None = None


KINDS: dict[str, FigureKind] = {
    k.name: k
    for k in (
        # a message-size sweep (the NCCL collectives): bandwidth and time against size
        FigureKind("sweep", plots=("busbw", "time"), by_size=True, page1="link", placed="busbw"),
        # a training workload: headline bars and every step time
        FigureKind("training", plots=("bars", "steps"), step_note=True, placed="mfu"),
        # copy bandwidth: the GPU-pair heat maps and the plateau, in the silicon section
        FigureKind("matrix", plots=("bars", "steps"), silicon="copy"),
        # the matmul search: the per-GPU ceilings, in the silicon section
        FigureKind("ceiling", plots=("bars", "steps"), silicon="matmul"),
        # LLM decode: tokens/s against batch, a curve per variant, and the headline bars
        FigureKind("decode", plots=("decode", "bars"), placed="hbm"),
    )
}


def figure_kind(name: str) -> FigureKind:
    """The kind a spec names (a KeyError for a name this kit does not know: check_workloads
    refuses such a workload before any run)."""
    return KINDS[name]


def check_workloads(kinds: Iterable[str], where: str = "") -> None:
    """Every workload named draws with a figure kind of KINDS: one line at `kit recipes
    validate` and before any run of `kit reproduce`, not a KeyError when the bundle is sealed."""
    for kind in dict.fromkeys(kinds):
        s = spec(kind)
        if s is not None and s.figures not in KINDS:
            raise InputError(
                f"{where}workload {kind!r} (kit/workloads/{kind}/spec.py) names figure kind "
                f"{s.figures!r}, which kit/report/kinds.py (KINDS) lacks; known: "
                + ", ".join(KINDS)
            )
