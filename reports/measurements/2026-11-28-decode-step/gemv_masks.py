#!/usr/bin/env python3
# ruff: noqa: B023  (each lambda is called, and graphed, in its own loop iteration)
"""The kit's _gemv_kernel (row and column masks, ADD flag) against the study's gemv_add_kernel
(column mask only), config by config, on the output (4096x4096) and down (4096x14336) weights:
which of the two, or which block sizes, cost the kit's step 0.3 ms in call 14. One-off instrument."""

import json
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parents[2]), str(HERE)]

import torch  # noqa: E402
import triton_step as study  # noqa: E402

from kit.workloads.llm_decode import kernels as kit  # noqa: E402


def timed(fn, reps: int = 20) -> float:
    """us per call: a CUDA graph of `reps` calls, median of 20 replays."""
    fn()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(reps):
            fn()
    times = []
    for _ in range(20):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e3 / reps)
    return sorted(times)[10]


rows = []
configs = [
    (4, 512, 8, 3),
    (2, 1024, 4, 3),
    (4, 1024, 8, 3),
    (4, 512, 4, 3),
    (2, 512, 4, 3),
    (8, 256, 4, 3),
    (4, 256, 4, 1),
    (2, 1024, 4, 1),
    (1, 1024, 4, 3),
    (2, 2048, 8, 3),
]
for n, k in ((4096, 4096), (4096, 14336)):
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16) * 0.02
    x = torch.randn(k, device="cuda", dtype=torch.bfloat16)
    h = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    for r, bk, warps, stages in configs:
        grid = (n // r,)
        opts = dict(R=r, BK=bk, num_warps=warps, num_stages=stages)
        t_kit = timed(lambda: kit._gemv_kernel.fn[grid](x, w, h, h, n, k, True, **opts))
        t_study = timed(lambda: study.gemv_add_kernel.fn[grid](x, w, h, n, k, **opts))
        row = {
            "N": n,
            "K": k,
            "R": r,
            "BK": bk,
            "warps": warps,
            "stages": stages,
            "kit_us": t_kit,
            "study_us": t_study,
            "kit_GB_s": n * k * 2 / t_kit / 1e3,
        }
        rows.append(row)
        print(row, flush=True)
out = Path(os.environ.get("OUT", "/tmp/out"))
out.mkdir(parents=True, exist_ok=True)
(out / "gemv_masks.json").write_text(json.dumps(rows, indent=1))
