"""Reduce-scatter sweep (nccl-tests reduce_scatter_perf): size = each rank's input, size/n out.

busbw = algbw * (n - 1)/n (each rank sends the n - 1 partial chunks it does not keep)
"""

from __future__ import annotations

import torch

from kit.worker.common import Context, dist_call
from kit.workloads.collective_sweep import own_chunk, runner, split_collective
from kit.workloads.reduce_scatter.params import ReduceScatterParams


def expected(ctx: Context, base: torch.Tensor, chunk: int) -> torch.Tensor:
    """This rank's chunk of the exact sum of base x (r + 1) over the ranks."""
    n = ctx.world_size
    return own_chunk(ctx, base, chunk) * (n * (n + 1) // 2)


COLLECTIVE = split_collective(
    "reduce_scatter",
    counts=lambda chunk, n: (chunk * n, chunk),
    call=dist_call("reduce_scatter_single", "reduce_scatter_tensor"),
    expected=expected,
    also_in_place=True,
)
run = runner(ReduceScatterParams, COLLECTIVE)
