"""All-gather sweep (nccl-tests all_gather_perf): size = the gathered output, size/n per rank.

busbw = algbw * (n - 1)/n (each rank receives the n - 1 chunks it does not hold)
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

from kit.worker.common import Context
from kit.workloads.all_gather.params import AllGatherParams
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
    send = torch.ones(chunk, dtype=dtype, device=ctx.device)
    recv = torch.empty(chunk * ctx.world_size, dtype=dtype, device=ctx.device)
    return (lambda: dist.all_gather_into_tensor(recv, send)), (lambda: None)


def count_wrong(ctx: Context, chunk: int, dtype: torch.dtype) -> int:
    base = pattern(chunk, dtype, ctx.device)
    recv = torch.zeros(chunk * ctx.world_size, dtype=dtype, device=ctx.device)
    dist.all_gather_into_tensor(recv, base * (ctx.rank + 1))
    expected = torch.cat([base * (r + 1) for r in range(ctx.world_size)])
    return mismatches(recv, expected)


COLLECTIVE = Collective("all_gather", bus_factor, layout, prepare, count_wrong)


def run(ctx: Context, params: dict[str, Any]) -> dict[str, Any]:
    return sweep(ctx, AllGatherParams(**params), COLLECTIVE)
