"""hardware.json: the machine the runs ran on (kit.inventory.collect, or each node's for Slurm).

The inventory carries whatever NVML and the host report; readers rely on the fields typed here,
and everything else is kept as written (Open).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from kit.model.base import Open


class Driver(Open):
    version: str | None = None
    cuda_driver_version: str | None = None
    nvml_version: str | None = None


class Host(Open):
    hostname: str | None = None
    cpu_model: str | None = None
    os: str | None = None
    kernel: str | None = None
    arch: str | None = None
    python: str | None = None
    logical_cpus: int | None = Field(default=None, ge=0)
    mem_total_bytes: int | None = Field(default=None, ge=0)
    shm_bytes: int | None = Field(default=None, ge=0)


class Gpu(Open):
    index: int = Field(ge=0)
    name: str | None = None
    uuid: str | None = None
    pci_bus_id: str | None = None
    memory_total_bytes: int | None = Field(default=None, ge=0)
    compute_capability: str | None = None
    nvlink_active: int | None = Field(default=None, ge=0)


class Topology(Open):
    labels: list[str] = Field(default_factory=list)
    matrix: list[list[str]] = Field(default_factory=list)
    legend: dict[str, str] = Field(default_factory=dict)


class Hardware(Open):
    """hardware.json. `nodes` holds each node's inventory on multi-node and Slurm runs."""

    schema_: int | None = Field(default=None, alias="schema", ge=1)
    collected_at: str | None = None
    summary: str | None = None
    host: Host | None = None
    driver: Driver | None = None
    nvml_error: str | None = None
    gpus: list[Gpu] = Field(default_factory=list)
    topology: Topology | None = None
    nodes: list[dict[str, Any]] | None = None
    source: str | None = None
