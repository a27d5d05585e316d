"""Reduce-scatter sweep parameters: the shared collective sweep's."""

from __future__ import annotations

from dataclasses import dataclass

from kit.workloads.collective import CollectiveParams


@dataclass
class ReduceScatterParams(CollectiveParams):
    """A reduce-scatter sweep with nccl-tests definitions (reduce_scatter_perf -b -e -f)."""
