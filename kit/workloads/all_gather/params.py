"""All-gather sweep parameters: the shared collective sweep's."""

from __future__ import annotations

from dataclasses import dataclass

from kit.workloads.collective import CollectiveParams


@dataclass
class AllGatherParams(CollectiveParams):
    """An all-gather sweep with nccl-tests definitions (all_gather_perf -b MIN -e MAX -f FACTOR)."""
