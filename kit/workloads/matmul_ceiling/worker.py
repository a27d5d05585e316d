"""The best sustained matmul TFLOP/s per dtype, searched the way mamf-finder searches (worker side).

For each dtype, rank 0 times every shape of the search alone (the other ranks wait on a
host-side gloo barrier, so no kernel of theirs shares the machine's power or clocks): a probe
call sets how many back-to-back matmuls fill `search_s`, then `trials` timed trials of that many
(CUDA events; the host clock on the CPU), the shape's figure is the median trial, and the best
shape is the one with the highest median. That shape is then held for `sustain_s` per trial on
every GPU alone (one after another) and on all GPUs at once: a power-capped, throttled or weak
GPU shows up as an outlier against the median GPU.

    TFLOP/s = 2 m n k x matmuls / seconds / 1e12

Operands are torch.randn (power draw depends on the data; random data is what training feeds).
fp8: torch._scaled_mm on e4m3 operands with unit scales and bf16 output (compute capability 8.9+).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

import torch
import torch.distributed as dist

from kit.shared.metrics import record
from kit.worker.common import Context
from kit.workloads.matmul_ceiling.params import MatmulCeilingParams
from kit.workloads.timing import elapsed

TORCH_DTYPES = {
    "bf16": torch.bfloat16,
    "fp16": torch.float16,
    "tf32": torch.float32,
    "fp32": torch.float32,
}


def fp8_missing(device: torch.device) -> str | None:
    """Why this device cannot run the fp8 matmul, or None when it can."""
    if device.type != "cuda":
        return "fp8 matmul needs a GPU"
    if torch.cuda.get_device_capability(device) < (8, 9):
        return "fp8 tensor cores need compute capability 8.9 or later"
    if not hasattr(torch, "_scaled_mm") or not hasattr(torch, "float8_e4m3fn"):
        return "this torch has no fp8 matmul (torch._scaled_mm)"
    return None


def set_tf32(on: bool) -> None:
    """TF32 tensor cores for float32 matmuls on or off (torch's newer switch where it has one)."""
    matmul = torch.backends.cuda.matmul
    if hasattr(matmul, "fp32_precision"):
        matmul.fp32_precision = "tf32" if on else "ieee"
    else:
        matmul.allow_tf32 = on


def operation(dtype: str, m: int, n: int, k: int, device: torch.device) -> Callable[[], Any]:
    """One m x k by k x n matmul on preallocated operands, as a call."""
    gen = torch.Generator(device=device).manual_seed(0)
    if dtype == "fp8":
        a = torch.randn(m, k, device=device, generator=gen).to(torch.float8_e4m3fn)
        b = torch.randn(n, k, device=device, generator=gen).to(torch.float8_e4m3fn).t()
        one = torch.ones((), device=device)
        return lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    dt = TORCH_DTYPES[dtype]
    a = torch.randn(m, k, device=device, dtype=dt, generator=gen)
    b = torch.randn(k, n, device=device, dtype=dt, generator=gen)
    out = torch.empty(m, n, device=device, dtype=dt)
    set_tf32(dtype == "tf32")
    return lambda: torch.matmul(a, b, out=out)


def measure(
    ctx: Context, dtype: str, shape: tuple[int, int, int], seconds: float, p: MatmulCeilingParams
) -> dict[str, Any]:
    """Trials of back-to-back matmuls filling `seconds` each: TFLOP/s per trial, and the median."""
    m, n, k = shape
    op = operation(dtype, m, n, k, ctx.device)
    for _ in range(p.warmup):
        op()
    probe = elapsed(ctx, op, 1)
    count = max(1, math.ceil(seconds / max(probe, 1e-9)))
    flop = 2.0 * m * n * k * count
    trials = [flop / elapsed(ctx, op, count) / 1e12 for _ in range(p.trials)]
    return {
        "shape": list(shape),
        "matmuls": count,
        "trials": trials,
        "tflops": statistics.median(trials),
    }


def outliers(values: list[float], pct: float) -> list[int]:
    """Indexes of values more than pct% below the median of the others (with two GPUs: the
    other one; the value itself never pulls its own yardstick down)."""
    return [
        i
        for i, v in enumerate(values)
        if len(values) > 1 and v < statistics.median(values[:i] + values[i + 1 :]) * (1 - pct / 100)
    ]


class Ranks:
    """Host-side coordination of the ranks (gloo): turns, barriers and gathers."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.group = dist.new_group(backend="gloo") if ctx.world_size > 1 else None

    def barrier(self) -> None:
        if self.group is not None:
            dist.barrier(group=self.group)

    def gather(self, value: Any) -> list[Any]:
        if self.group is None:
            return [value]
        out: list[Any] = [None] * self.ctx.world_size
        dist.all_gather_object(out, value, group=self.group)
        return out

    def broadcast(self, value: Any) -> Any:
        if self.group is None:
            return value
        box = [value]
        dist.broadcast_object_list(box, src=0, group=self.group)
        return box[0]


def _dtypes(ctx: Context, p: MatmulCeilingParams) -> tuple[list[str], dict[str, str]]:
    """The dtypes this device runs, and why each of the others is skipped."""
    skipped: dict[str, str] = {}
    if not ctx.is_cuda:
        for d in p.dtypes:
            if d != "fp32":
                skipped[d] = "the CPU analogue measures fp32 only"
        return ["fp32"], skipped
    if (why := fp8_missing(ctx.device)) and "fp8" in p.dtypes:
        skipped["fp8"] = why
    return [d for d in p.dtypes if d not in skipped], skipped


def run(ctx: Context, params: dict[str, Any]) -> dict[str, Any]:
    p = MatmulCeilingParams(**params)
    ranks = Ranks(ctx)
    dtypes, skipped = _dtypes(ctx, p)
    for d, why in skipped.items():
        ctx.notes.append(f"{d} skipped: {why}")
    found: dict[str, Any] = {}
    for dtype in dtypes:
        search = []
        if ctx.rank == 0:
            for shape in p.shapes():
                search.append(measure(ctx, dtype, shape, p.search_s, p))
                ctx.log(
                    f"{dtype} {'x'.join(map(str, shape)):>17}: {search[-1]['tflops']:8.1f} TFLOP/s"
                )
        best = ranks.broadcast(max(search, key=lambda r: r["tflops"])["shape"] if search else None)
        alone_all: list[dict[str, Any]] = []
        if p.alone(dtype):
            mine = None
            for turn in range(ctx.world_size):
                ranks.barrier()
                if ctx.rank == turn:
                    mine = measure(ctx, dtype, tuple(best), p.sustain_s, p)
                ranks.barrier()
            alone_all = ranks.gather(mine)
        ranks.barrier()
        together_all = ranks.gather(measure(ctx, dtype, tuple(best), p.sustain_s, p))
        a_vals = [r["tflops"] for r in alone_all]
        t_vals = [r["tflops"] for r in together_all]
        found[dtype] = {
            "search": search,
            "best_shape": best,
            "search_best_tflops": max(r["tflops"] for r in search) if search else None,
            "alone": alone_all,
            "together": together_all,
            "outliers_alone": outliers(a_vals, p.outlier_pct),
            "outliers_together": outliers(t_vals, p.outlier_pct),
        }
        ctx.log(
            f"{dtype} best {'x'.join(map(str, best))}: alone {[round(v, 1) for v in a_vals]}"
            f" together {[round(v, 1) for v in t_vals]} TFLOP/s"
        )
        if ctx.is_cuda:
            torch.cuda.empty_cache()
    set_tf32(False)
    metrics: dict[str, Any] = {}
    for dtype, f in found.items():
        together = [r["tflops"] for r in f["together"]]
        alone = [r["tflops"] for r in f["alone"]]
        metrics[f"tflops_{dtype}"] = record(f"tflops_{dtype}", statistics.median(together))
        metrics[f"tflops_{dtype}_weakest"] = record(f"tflops_{dtype}_weakest", min(together))
        if alone:
            metrics[f"tflops_{dtype}_alone"] = record(
                f"tflops_{dtype}_alone", statistics.median(alone)
            )
        for where in ("alone", "together"):
            for i in f[f"outliers_{where}"]:
                who = f"GPU {i}" if ctx.is_cuda else f"rank {i}"
                ctx.notes.append(
                    f"{dtype}: {who} is more than {p.outlier_pct:g}% below the "
                    f"median of the others ({where})"
                )
    names = ranks.gather(torch.cuda.get_device_name(ctx.device) if ctx.is_cuda else "cpu")
    data = {"params": asdict(p), "dtypes": found, "skipped": skipped, "gpus": names}
    return {"metrics": metrics, "data": data}
