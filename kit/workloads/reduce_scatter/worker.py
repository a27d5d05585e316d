"""Reduce-scatter sweep (nccl-tests reduce_scatter_perf): size = each rank's input, size/n out.

busbw = algbw * (n - 1)/n (each rank sends the n - 1 partial chunks it does not keep)
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

from kit.worker.common import Context
from kit.workloads.collective_sweep import (
    Collective,
    Op,
    mismatches,
    pattern,
    ring_bus_factor,
    split_layout,
    sweep,
)
from kit.workloads.reduce_scatter.params import ReduceScatterParams

bus_factor = ring_bus_factor  # (n-1)/n
layout = split_layout  # size = what the buffer holds in all; size/n per rank


def prepare(ctx: Context, chunk: int, dtype: torch.dtype) -> tuple[Op, Op]:
    send = torch.ones(chunk * ctx.world_size, dtype=dtype, device=ctx.device)
    recv = torch.empty(chunk, dtype=dtype, device=ctx.device)
    return (lambda: dist.reduce_scatter_tensor(recv, send)), (lambda: None)


def count_wrong(ctx: Context, chunk: int, dtype: torch.dtype) -> int:
    n = ctx.world_size
    base = pattern(chunk * n, dtype, ctx.device)
    recv = torch.zeros(chunk, dtype=dtype, device=ctx.device)
    dist.reduce_scatter_tensor(recv, base * (ctx.rank + 1))
    mine = base[ctx.rank * chunk : (ctx.rank + 1) * chunk]
    return mismatches(recv, mine * (n * (n + 1) // 2))


COLLECTIVE = Collective("reduce_scatter", bus_factor, layout, prepare, count_wrong)


def run(ctx: Context, params: dict[str, Any]) -> dict[str, Any]:
    return sweep(ctx, ReduceScatterParams(**params), COLLECTIVE)
