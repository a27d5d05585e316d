"""All-to-all sweep parameters: the shared collective sweep's."""

from __future__ import annotations

from dataclasses import dataclass

from kit.workloads.collective import CollectiveParams


@dataclass
class AlltoallParams(CollectiveParams):
    """An all-to-all sweep with nccl-tests definitions (alltoall_perf -b MIN -e MAX -f FACTOR)."""
