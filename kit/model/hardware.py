"""hardware.json: the machine the runs ran on (kit.inventory.measure), and each node's.

The inventory carries whatever NVML and the host report; readers rely on the fields typed here
(the report's Hardware section, `kit inspect`, the facts, refs and envdiff read them as
attributes), and everything else is kept as written (Open). A live inventory is the same model:
`kit.inventory.measure()`, so one reader serves a recorded machine and this one.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import (
    Field,
    ModelWrapValidatorHandler,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)

from kit.model.base import Open


class Record(Open):
    """An inventory record, dumped in the order its writer gave the fields (kit.inventory builds
    hardware.json in NVML's and the host's order), fields set afterwards last: a measured
    inventory written through the model is the file the inventory always wrote, key for key."""

    _order: list[str] = PrivateAttr(default_factory=list)

    @model_validator(mode="wrap")
    @classmethod
    def _given_order(cls, data: Any, handler: ModelWrapValidatorHandler[Record]) -> Record:
        record = handler(data)
        if isinstance(data, dict):
            record._order = [str(k) for k in data]
        return record

    def __eq__(self, other: object) -> bool:
        """Equal when the fields are: the order is how a record is written, not what it holds."""
        if type(other) is not type(self):
            return NotImplemented
        return self.__dict__ == other.__dict__ and self.model_extra == other.model_extra

    @model_serializer(mode="wrap")
    def _in_given_order(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        out = handler(self)
        rank = {name: i for i, name in enumerate(self._order)}
        return dict(sorted(out.items(), key=lambda item: rank.get(item[0], len(rank))))


class Driver(Record):
    version: str | None = None
    cuda_driver_version: str | None = None
    nvml_version: str | None = None


class NumaNode(Record):
    id: int | None = None
    cpus: str | None = None
    mem_total_bytes: int | None = Field(default=None, ge=0)


class Detection(Record):
    """What the host check found: a container around the inventory, or a hypervisor."""

    detected: bool | None = None
    runtime: str | None = None
    evidence: list[str] = Field(default_factory=list)


class Host(Record):
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

    def virtual_machine(self) -> list[str]:
        """Why this host is a virtual machine, from what the inventory recorded (the hypervisor
        flag, the DMI vendor, a CPU model the hypervisor masked); empty when nothing says so.
        One reading for the report's "not bare metal" and `kit inspect`."""
        virt = self.virtualization
        why = (
            (list(virt.evidence) or ["the host check found a hypervisor"])
            if virt and virt.detected
            else []
        )
        model = str(self.cpu_model or "")
        if model and not MODEL_NUMBER.search(model):
            why.append(f'the CPU model reads "{model}", naming no model: a hypervisor masks it')
        return why


MODEL_NUMBER = re.compile(r"\d{3,}|\b[A-Z]{1,3}\d+[A-Za-z]*\b")
"""A CPU model string that names a model has a model number ("8480+", "9654", "E5-2698", "M2")."""


class Pcie(Record):
    gen_current: int | None = None
    width_current: int | None = None
    gen_max: int | None = None
    width_max: int | None = None
    gen_gpu_max: int | None = None


class NvLink(Record):
    active: bool = False
    version: str | None = None
    remote: str | None = None  # GPU<n>, NVSwitch, or the far end's PCI bus id
    speed_gbs: float | None = None


class Ecc(Record):
    mode_current: int | None = None
    volatile_uncorrected: int | None = Field(default=None, ge=0)
    aggregate_uncorrected: int | None = Field(default=None, ge=0)


def uncorrected_words(eccs: list[Ecc]) -> str:
    """The uncorrected ECC errors of one GPU or of several, as every report line says them:
    "0 uncorrected since boot", and the lifetime count where it is not 0 (a GPU the preflight
    warned about read "0 uncorrected" on page 1 while it held 2 over its lifetime)."""
    boot = sum(e.volatile_uncorrected or 0 for e in eccs)
    life = sum(e.aggregate_uncorrected or 0 for e in eccs)
    whose = "its lifetime" if len(eccs) == 1 else "their lifetimes"
    return f"{boot} uncorrected since boot" + (f", {life} over {whose}" if life else "")


class GpuProcess(Record):
    pid: int
    used_memory_bytes: int | None = Field(default=None, ge=0)


class Utilization(Record):
    gpu: int | None = None  # percent of the last sample period with a kernel running
    memory: int | None = None


class RemappedRows(Record):
    pending: int | bool | None = None
    failure: int | bool | None = None


class RetiredPages(Record):
    dbe: int | None = Field(default=None, ge=0)
    pending: int | bool | None = None


class Gpu(Record):
    index: int = Field(ge=0)
    name: str | None = None
    uuid: str | None = None
    pci_bus_id: str | None = None
    memory_total_bytes: int | None = Field(default=None, ge=0)
    compute_capability: str | None = None
    nvlink_active: int | None = Field(default=None, ge=0)
    memory_total_gib: float | None = Field(default=None, ge=0)
    vbios_version: str | None = None
    serial: str | None = None  # the board serial (NVML), where the GPU answers it
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


class PeerAccess(Record):
    """CUDA's can_device_access_peer per GPU pair, in NVML's GPU order."""

    source: str | None = None
    matrix: list[list[bool | None]] = Field(default_factory=list)


class Topology(Record):
    labels: list[str] = Field(default_factory=list)
    matrix: list[list[str]] = Field(default_factory=list)
    legend: dict[str, str] = Field(default_factory=dict)


class NodeGpu(Record):
    index: int | None = Field(default=None, ge=0)
    name: str | None = None
    memory_total_gib: float | None = Field(default=None, ge=0)


class NodeInterface(Record):
    """A network interface as the node saw it (/sys/class/net), loopback left out."""

    name: str | None = None
    address: str | None = None
    speed_mbps: int | None = None  # None: the kernel did not say (virtual links, links down)
    mtu: int | None = None
    state: str | None = None
    kind: str | None = None  # ethernet | infiniband | bridge | virtual
    mac: str | None = None


class IbPort(Record):
    """An InfiniBand/RoCE port (/sys/class/infiniband)."""

    device: str | None = None
    port: int | str | None = None
    rate: str | None = None  # "400 Gb/sec (4X NDR)"
    state: str | None = None
    link_layer: str | None = None


class NodeInventory(Record):
    """One node of a multi-node or Slurm run, as kit.worker.nodeinfo saw it from its container:
    name, CPUs, memory, GPUs and above all its network."""

    node: int | str  # its index; Slurm: the file's name where the file could not be read
    host: str | None = None  # the node's Docker daemon (multi-node runtime)
    hostname: str | None = None
    kernel: str | None = None
    arch: str | None = None
    cpus: int | None = Field(default=None, ge=0)
    mem_total_bytes: int | None = Field(default=None, ge=0)
    gpus: list[NodeGpu] | None = None  # None: no NVML on the node
    interfaces: list[NodeInterface] = Field(default_factory=list)
    infiniband: list[IbPort] = Field(default_factory=list)
    error: str | None = None  # Slurm: why the node's inventory could not be read


class Hardware(Record):
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
    nodes: list[NodeInventory] | None = None
    source: str | None = None  # who wrote a file of nodes only (kit slurm collect)
