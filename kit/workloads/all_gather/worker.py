"""All-gather sweep (nccl-tests all_gather_perf): size = the gathered output, size/n per rank.

busbw = algbw * (n - 1)/n (each rank receives the n - 1 chunks it does not hold)
"""

from __future__ import annotations

import torch

from kit.worker.common import Context, dist_call
from kit.workloads.all_gather.params import AllGatherParams
from kit.workloads.collective_sweep import runner, split_collective


def expected(ctx: Context, base: torch.Tensor, chunk: int) -> torch.Tensor:
    """Every rank's chunk, in rank order: base x (r + 1)."""
    return torch.cat([base * (r + 1) for r in range(ctx.world_size)])


COLLECTIVE = split_collective(
    "all_gather",
    counts=lambda chunk, n: (chunk, chunk * n),
    call=dist_call("all_gather_single", "all_gather_into_tensor"),
    expected=expected,
    also_in_place=True,
)
run = runner(AllGatherParams, COLLECTIVE)
