"""All-reduce sweep (nccl-tests all_reduce_perf): size = the buffer every rank reduces.

busbw = algbw * 2(n - 1)/n (the bandwidth each link must carry in a ring)
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

from kit.worker.common import Context
from kit.workloads.allreduce.params import AllreduceParams
from kit.workloads.collective_sweep import Collective, Op, mismatches, pattern, sweep


def bus_factor(world_size: int) -> float:
    """nccl-tests' all-reduce bus bandwidth factor 2(n-1)/n."""
    return 2.0 * (world_size - 1) / world_size


def layout(nbytes: int, elsize: int, n: int) -> tuple[int, int]:
    count = max(1, nbytes // elsize)
    return count, count * elsize


def prepare(ctx: Context, count: int, dtype: torch.dtype) -> tuple[Op, Op]:
    buf = torch.ones(count, dtype=dtype, device=ctx.device)
    return (lambda: dist.all_reduce(buf)), (lambda: buf.fill_(1))  # refilled: sums grow


def count_wrong(ctx: Context, count: int, dtype: torch.dtype) -> int:
    """All-reduce a known pattern (x rank+1) and count elements off the exact sum."""
    n = ctx.world_size
    base = pattern(count, dtype, ctx.device)
    buf = base * (ctx.rank + 1)
    dist.all_reduce(buf)
    return mismatches(buf, base * (n * (n + 1) // 2))


COLLECTIVE = Collective("all_reduce", bus_factor, layout, prepare, count_wrong)


def run(ctx: Context, params: dict[str, Any]) -> dict[str, Any]:
    return sweep(ctx, AllreduceParams(**params), COLLECTIVE)
