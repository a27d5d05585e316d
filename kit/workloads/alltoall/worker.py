"""All-to-all sweep (nccl-tests alltoall_perf): size = what each rank sends, size/n per peer.

torch's all_to_all_single: NCCL on GPUs; gloo implements it on the CPU as well (torch 2.14).

    busbw = algbw * (n - 1)/n (the chunk a rank keeps for itself crosses no link)
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from kit.worker.common import Context
from kit.workloads.alltoall.params import AlltoallParams
from kit.workloads.collective_sweep import own_chunk, runner, split_collective


def expected(ctx: Context, base: torch.Tensor, chunk: int) -> torch.Tensor:
    """Chunk j of what rank r receives is chunk r of what rank j sent: that chunk x (j + 1)."""
    mine = own_chunk(ctx, base, chunk)
    return torch.cat([mine * (j + 1) for j in range(ctx.world_size)])


COLLECTIVE = split_collective(
    "alltoall",
    counts=lambda chunk, n: (chunk * n, chunk * n),
    call=dist.all_to_all_single,
    expected=expected,
)
run = runner(AlltoallParams, COLLECTIVE)
