"""hardware.json: the machine the runs ran on (kit.inventory.collect, or each node's for Slurm).

The inventory carries whatever NVML and the host report; readers rely on the fields typed here
(the report's Hardware section, `kit inspect`, the facts, refs and envdiff read them as
attributes), and everything else is kept as written (Open). A live inventory is the same model:
`kit.inventory.measure()`, so one reader serves a recorded machine and this one.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from kit.model.base import Open


class Driver(Open):
    version: str | None = None
    cuda_driver_version: str | None = None
    nvml_version: str | None = None


class NumaNode(Open):
    id: int | None = None
    cpus: str | None = None
    mem_total_bytes: int | None = Field(default=None, ge=0)


class Detection(Open):
    """What the host check found: a container around the inventory, or a hypervisor."""

    detected: bool | None = None
    runtime: str | None = None
    evidence: list[str] = Field(default_factory=list)


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
    sockets: int | None = Field(default=None, ge=0)
    physical_cores: int | None = Field(default=None, ge=0)
    cpu_count: int | None = Field(default=None, ge=0)  # what early inventories recorded
    allowed_cpus: str | None = None
    numa_nodes: list[NumaNode] = Field(default_factory=list)
    container: Detection | None = None
    virtualization: Detection | None = None


class Pcie(Open):
    gen_current: int | None = None
    width_current: int | None = None
    gen_max: int | None = None
    width_max: int | None = None
    gen_gpu_max: int | None = None


class NvLink(Open):
    active: bool = False
    version: str | None = None
    remote: str | None = None  # GPU<n>, NVSwitch, or the far end's PCI bus id
    speed_gbs: float | None = None


class Ecc(Open):
    mode_current: int | None = None
    volatile_uncorrected: int | None = Field(default=None, ge=0)
    aggregate_uncorrected: int | None = Field(default=None, ge=0)


class GpuProcess(Open):
    pid: int
    used_memory_bytes: int | None = Field(default=None, ge=0)


class Utilization(Open):
    gpu: int | None = None  # percent of the last sample period with a kernel running
    memory: int | None = None


class RemappedRows(Open):
    pending: int | bool | None = None
    failure: int | bool | None = None


class RetiredPages(Open):
    dbe: int | None = Field(default=None, ge=0)
    pending: int | bool | None = None


class Gpu(Open):
    index: int = Field(ge=0)
    name: str | None = None
    uuid: str | None = None
    pci_bus_id: str | None = None
    memory_total_bytes: int | None = Field(default=None, ge=0)
    compute_capability: str | None = None
    nvlink_active: int | None = Field(default=None, ge=0)
    memory_total_gib: float | None = Field(default=None, ge=0)
    vbios_version: str | None = None
    persistence_mode: bool | None = None
    clocks_max_mhz: dict[str, int | None] | None = None
    power_limit_w: float | None = Field(default=None, ge=0)
    power_default_limit_w: float | None = Field(default=None, ge=0)
    temperature_c: int | None = None
    temperature_slowdown_c: int | None = None
    throttle_reasons: list[str] | None = None
    utilization: Utilization | None = None
    processes: list[GpuProcess] | None = None
    remapped_rows: RemappedRows | None = None
    retired_pages: RetiredPages | None = None
    gpu_numa_node_id: int | None = None
    pcie: Pcie | None = None
    cpu_affinity: str | None = None
    numa_node: int | list[int] | None = None
    nvlinks: list[NvLink] | None = None  # None: NVLink not read
    ecc: Ecc | None = None


class PeerAccess(Open):
    """CUDA's can_device_access_peer per GPU pair, in NVML's GPU order."""

    source: str | None = None
    matrix: list[list[bool | None]] = Field(default_factory=list)


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
    nvml_p2p_status: dict[str, list[list[str]]] | None = None
    peer_access: PeerAccess | None = None
    peer_access_note: str | None = None
    nodes: list[dict[str, Any]] | None = None
    source: str | None = None
