"""All-reduce sweep parameters: the shared collective sweep's, under the name recipes know."""

from __future__ import annotations

from dataclasses import dataclass

from kit.workloads.collective import CollectiveParams


@dataclass
class AllreduceParams(CollectiveParams):
    """An all-reduce sweep with nccl-tests definitions (all_reduce_perf -b MIN -e MAX -f FACTOR)."""
