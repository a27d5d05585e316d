"""Matmul-ceiling parameters: the dtypes, the shape search (as mamf-finder's --m/--n/--k) and
how long each measurement lasts."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Literal

from kit.workloads.base import STRICT, check

Dtype = Literal["bf16", "fp16", "tf32", "fp8", "fp32"]


@dataclass
class MatmulCeilingParams:
    """Search every (m, n, k) of m_sizes x n_sizes x k_sizes per dtype on the first GPU, then
    hold the best shape for sustain_s on each GPU alone and on all GPUs together.

    dtypes: fp8 runs where the GPU has it (compute capability 8.9 and up: torch._scaled_mm,
    e4m3, unit scales, bf16 output) and is skipped with a note elsewhere; tf32 is float32 with
    TF32 tensor cores allowed; fp32 is plain float32 (the CPU analogue runs fp32 only).
    search_s / sustain_s: seconds of back-to-back matmuls per timed trial in the search / in the
    per-GPU measurement; trials: timed trials per shape (the median counts).
    outlier_pct: a GPU more than this far below the median of the other GPUs is flagged, in
    the run's notes, the silicon section and page 1's table of every GPU (one margin). 10 by
    default: a power-capped matmul follows the clock (one H100's bf16 trials spread 668 to 762
    TFLOP/s, 13%, within one call), and healthy parts of one model hold different clocks at the
    same cap; 10% names a GPU that is throttled, clocked down or shared with another process (a
    background load takes half of it) without naming the low end of healthy silicon.
    alone_dtypes: the dtypes also held on each GPU alone, one GPU after another (None: all);
    the GPUs one after another cost n x the time, so a large machine's recipe names one.
    """

    __pydantic_config__ = STRICT
    # The parameters that change how long or how often a figure is measured, never the figure:
    # a known machine that differs from a run only in these measured the same workload
    # (kit.refs matches on every other parameter, one this list lacks included, and names these).
    # Untimed and timed trials per shape (the median counts); the search and hold times are not
    # among them: a longer hold warms the GPU towards its power cap.
    # The outlier margin only names GPUs: no figure changes with it.
    SAME_FIGURE: ClassVar[frozenset[str]] = frozenset({"warmup", "trials", "outlier_pct"})

    dtypes: list[Dtype] = field(default_factory=lambda: ["bf16", "fp16", "tf32", "fp8"])
    m_sizes: list[int] = field(default_factory=lambda: [4096, 8192, 16384])
    n_sizes: list[int] = field(default_factory=lambda: [4096, 8192, 16384])
    k_sizes: list[int] = field(default_factory=lambda: [4096, 8192, 16384])
    search_s: float = 0.05
    sustain_s: float = 1.0
    trials: int = 3
    warmup: int = 3
    outlier_pct: float = 10.0
    alone_dtypes: list[Dtype] | None = None

    def alone(self, dtype: str) -> bool:
        """Whether `dtype` is also held on each GPU alone (None: every dtype)."""
        return self.alone_dtypes is None or dtype in self.alone_dtypes

    def __post_init__(self) -> None:
        check(
            len(self.dtypes) >= 1 and len(set(self.dtypes)) == len(self.dtypes),
            "dtypes",
            "one or more distinct of bf16, fp16, tf32, fp8, fp32",
        )
        for name in ("m_sizes", "n_sizes", "k_sizes"):
            sizes = getattr(self, name)
            check(
                len(sizes) >= 1 and all(16 <= s <= 131072 and s % 16 == 0 for s in sizes),
                name,
                "one or more multiples of 16 from 16 to 131072",
            )
        check(self.search_s > 0, "search_s", "above 0")
        check(self.sustain_s > 0, "sustain_s", "above 0")
        check(self.trials >= 1, "trials", "at least 1")
        check(self.warmup >= 0, "warmup", "0 or more")
        check(0 < self.outlier_pct < 100, "outlier_pct", "between 0 and 100")

    def shapes(self) -> list[tuple[int, int, int]]:
        return [(m, n, k) for m in self.m_sizes for n in self.n_sizes for k in self.k_sizes]
