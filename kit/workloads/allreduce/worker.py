"""All-reduce sweep (nccl-tests all_reduce_perf): size = the buffer every rank reduces.

busbw = algbw * 2(n - 1)/n (the bandwidth each link must carry in a ring)
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from kit.worker.common import Context
from kit.workloads.allreduce.params import AllreduceParams
from kit.workloads.collective_sweep import Collective, runner


def bus_factor(world_size: int) -> float:
    """nccl-tests' all-reduce bus bandwidth factor 2(n-1)/n."""
    return 2.0 * (world_size - 1) / world_size


def layout(nbytes: int, elsize: int, n: int) -> tuple[int, int]:
    count = max(1, nbytes // elsize)
    return count, count * elsize


def expected(ctx: Context, base: torch.Tensor, count: int) -> torch.Tensor:
    """The exact sum of base x (r + 1) over the ranks."""
    n = ctx.world_size
    return base * (n * (n + 1) // 2)


COLLECTIVE = Collective(
    "all_reduce",
    bus_factor,
    layout,
    counts=lambda count, n: (count, count),
    call=lambda buf, _: dist.all_reduce(buf),
    expected=expected,
    in_place=True,
    api="all_reduce",
)
run = runner(AllreduceParams, COLLECTIVE)
