"""All-to-all sweep (nccl-tests alltoall_perf): size = what each rank sends, size/n per peer.

torch's all_to_all_single: NCCL on GPUs; gloo implements it on the CPU as well (torch 2.14).

    busbw = algbw * (n - 1)/n (the chunk a rank keeps for itself crosses no link)
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

from kit.worker.common import Context
from kit.workloads.alltoall.params import AlltoallParams
from kit.workloads.collective_sweep import (
    Collective,
    Op,
    mismatches,
    pattern,
    ring_bus_factor,
    split_layout,
    sweep,
)

bus_factor = ring_bus_factor  # (n-1)/n
layout = split_layout  # size = what the buffer holds in all; size/n per rank


def prepare(ctx: Context, chunk: int, dtype: torch.dtype) -> tuple[Op, Op]:
    send = torch.ones(chunk * ctx.world_size, dtype=dtype, device=ctx.device)
    recv = torch.empty_like(send)
    return (lambda: dist.all_to_all_single(recv, send)), (lambda: None)


def count_wrong(ctx: Context, chunk: int, dtype: torch.dtype) -> int:
    """Chunk j of what rank r receives is chunk r of what rank j sent: pattern x (j + 1)."""
    n = ctx.world_size
    base = pattern(chunk * n, dtype, ctx.device)
    recv = torch.zeros_like(base)
    dist.all_to_all_single(recv, base * (ctx.rank + 1))
    mine = base[ctx.rank * chunk : (ctx.rank + 1) * chunk]
    expected = torch.cat([mine * (j + 1) for j in range(n)])
    return mismatches(recv, expected)


COLLECTIVE = Collective("alltoall", bus_factor, layout, prepare, count_wrong)


def run(ctx: Context, params: dict[str, Any]) -> dict[str, Any]:
    return sweep(ctx, AlltoallParams(**params), COLLECTIVE)
