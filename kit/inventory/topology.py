"""A snapshot -> the inventory (hardware.json), by pure functions: topology in `nvidia-smi topo -m`
words, NVLink counts, affinities, a summary line.
"""

from __future__ import annotations

from itertools import combinations
from typing import Any

from kit.inventory.host import format_cpulist, mask_words_to_list
from kit.model.hardware import Hardware
from kit.shared.throttle import decode_reasons  # NVML's throttle reason bits: one table

SCHEMA = 1


# NVML's nvmlGpuTopologyLevel_t -> the word nvidia-smi topo -m prints for it.
TOPOLOGY_LEVELS = {0: "PIX", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}

# Best to worst; NV# sorts before all of them.
LINK_ORDER = ["NV", "PIX", "PXB", "PHB", "NODE", "SYS"]

LEGEND = {
    "X": "the GPU itself",
    "NV#": "a bonded set of # NVLink links (direct or through NVSwitch)",
    "PIX": "PCIe through at most one PCIe switch",
    "PXB": "PCIe through several PCIe switches, not through the CPU's host bridge",
    "PHB": "PCIe through a CPU's PCIe host bridge",
    "NODE": "PCIe and the links between host bridges inside one NUMA node",
    "SYS": "PCIe and the CPU-to-CPU link between NUMA nodes (QPI/UPI/Infinity Fabric)",
}

NVLINK_VERSIONS = {1: "1.0", 2: "2.0", 3: "2.2", 4: "3.0", 5: "3.1", 6: "4.0", 7: "5.0", 8: "6.0"}
NVLINK_DEVICE_TYPES = {0: "GPU", 1: "IBMNPU", 2: "NVSwitch", 0xFF: "unknown"}


_P2P_STATUS = {0: "OK", 1: "CNS", 2: "GNS", 3: "TNS", 4: "RD", 5: "NS", 6: "U"}


# --------------------------------------------------------------------------------------------
# Building: a snapshot -> the inventory (pure)
# --------------------------------------------------------------------------------------------


def _nvlink_peer_counts(gpus: list[dict[str, Any]]) -> list[list[int]]:
    """Active NVLink links between each pair of GPUs.

    A link whose far end is a GPU in this snapshot counts for that pair. Links into NVSwitches
    join the GPU to the switch fabric; two GPUs on the fabric get min(their switch links), which
    is what nvidia-smi prints (NV18 between any two H100/H200 on an HGX board).
    """
    n = len(gpus)
    by_bus = {g.get("pci_bus_id"): i for i, g in enumerate(gpus)}
    direct = [[0] * n for _ in range(n)]
    switch = [0] * n
    for i, g in enumerate(gpus):
        for link in g.get("nvlinks") or []:
            if link.get("state") != 1:
                continue
            peer = by_bus.get(link.get("remote_pci_bus_id"))
            kind = link.get("remote_device_type")
            if peer is not None and peer != i and kind in (0, None):
                direct[i][peer] += 1
            elif kind == 2 or (kind is None and peer is None):
                switch[i] += 1
    counts = [[0] * n for _ in range(n)]
    for i, j in combinations(range(n), 2):
        # both ends report the same bonded links; max() copes with one end missing its answers
        d = max(direct[i][j], direct[j][i])
        s = min(switch[i], switch[j])
        counts[i][j] = counts[j][i] = d + s
    return counts


def topology_matrix(nvml_snap: dict[str, Any]) -> list[list[str]]:
    """The GPU-to-GPU matrix in nvidia-smi topo -m words: X, NV#, PIX, PXB, PHB, NODE, SYS."""
    gpus = nvml_snap.get("gpus") or []
    n = len(gpus)
    nv = _nvlink_peer_counts(gpus)
    ancestor = nvml_snap.get("common_ancestor") or [[None] * n for _ in range(n)]
    matrix = [["X"] * n for _ in range(n)]
    for i, j in combinations(range(n), 2):
        word = f"NV{nv[i][j]}" if nv[i][j] else TOPOLOGY_LEVELS.get(ancestor[i][j], "?")
        matrix[i][j] = matrix[j][i] = word
    return matrix


def link_rank(word: str) -> tuple[int, int]:
    """Sort key, best first: more NVLinks first, then PIX < PXB < PHB < NODE < SYS."""
    if word.startswith("NV"):
        return (0, -int(word[2:] or 0))
    return (LINK_ORDER.index(word), 0) if word in LINK_ORDER else (len(LINK_ORDER), 0)


def _numa_of(g: dict[str, Any]) -> list[int]:
    words = g.get("memory_affinity_words")
    if words:
        nodes = mask_words_to_list(words)
        if nodes:
            return nodes
    node = (g.get("sysfs") or {}).get("numa_node")
    return [node] if isinstance(node, int) and node >= 0 else []


def _cpus_of(g: dict[str, Any]) -> str | None:
    words = g.get("cpu_affinity_words")
    if words and any(words):
        return format_cpulist(mask_words_to_list(words))
    return (g.get("sysfs") or {}).get("local_cpulist")


def _cuda_version(v: int | None) -> str | None:
    return None if not v else f"{v // 1000}.{v % 1000 // 10}"


def _gpu_inventory(g: dict[str, Any], links_to: dict[str, str]) -> dict[str, Any]:
    mem = g.get("memory_total_bytes")
    mask = g.get("throttle_reasons_mask")
    power = g.get("power_mw") or {}
    nvlinks = []
    speed = g.get("nvlink_speed_mbps_common")
    for link in g.get("nvlinks") or []:
        bus = link.get("remote_pci_bus_id")
        kind = NVLINK_DEVICE_TYPES.get(link.get("remote_device_type"), "unknown")
        nvlinks.append(
            {
                "link": link["link"],
                "active": link.get("state") == 1,
                "version": NVLINK_VERSIONS.get(link.get("version") or 0),
                "remote": links_to.get(bus, kind if kind != "GPU" else bus),
                "remote_pci_bus_id": bus,
                "speed_gbs": round(speed / 1000, 3) if speed else None,
            }
        )
    pcie = dict(g.get("pcie") or {})
    numa = _numa_of(g)
    return {
        "index": g["index"],
        "name": g.get("name"),
        "uuid": g.get("uuid"),
        "pci_bus_id": g.get("pci_bus_id"),
        "memory_total_bytes": mem,
        "memory_total_gib": round(mem / 2**30, 1) if mem else None,
        "compute_capability": ".".join(map(str, g["compute_capability"]))
        if g.get("compute_capability")
        else None,
        "vbios_version": g.get("vbios_version"),
        "serial": g.get("serial"),
        "persistence_mode": bool(g["persistence_mode"])
        if g.get("persistence_mode") is not None
        else None,
        "clocks_max_mhz": g.get("clocks_max_mhz"),
        "clocks_mhz": g.get("clocks_mhz"),
        "power_limit_w": _watts(power.get("enforced_limit") or power.get("limit")),
        "power_default_limit_w": _watts(power.get("default_limit")),
        "power_draw_w": _watts(power.get("usage")),
        "pcie": pcie,
        "cpu_affinity": _cpus_of(g),
        "numa_node": numa[0] if len(numa) == 1 else (numa or None),
        "gpu_numa_node_id": g.get("gpu_numa_node_id")
        if (g.get("gpu_numa_node_id") or -1) >= 0
        else None,
        "nvlinks": nvlinks,
        "nvlink_active": sum(1 for n in nvlinks if n["active"]),
        "temperature_c": g.get("temperature_c"),
        "temperature_slowdown_c": g.get("temperature_slowdown_c"),
        "throttle_reasons": decode_reasons(mask) if mask is not None else None,
        "throttle_reasons_mask": mask,
        "utilization": g.get("utilization"),
        "memory_used_bytes": g.get("memory_used_bytes"),
        "ecc": g.get("ecc"),
        "retired_pages": g.get("retired_pages"),
        "remapped_rows": g.get("remapped_rows"),
        "processes": g.get("processes"),
        "nvml_errors": g.get("errors") or {},
    }


def _watts(mw: int | None) -> float | None:
    return round(mw / 1000, 1) if mw else None


def _p2p_words(p2p: dict[str, Any] | None, n: int) -> dict[str, list[list[str]]] | None:
    if not p2p:
        return None
    return {
        k: [["X" if i == j else _P2P_STATUS.get(m[i][j], "?") for j in range(n)] for i in range(n)]
        for k, m in p2p.items()
    }


def _peer_access(cuda: dict[str, Any], gpus: list[dict[str, Any]]) -> dict[str, Any] | None:
    """CUDA's answers, reordered to NVML's GPU order where CUDA told us the PCI bus ids."""
    if not cuda or not cuda.get("available"):
        return None
    matrix = cuda["matrix"]
    order = list(range(len(matrix)))
    buses = [d.get("pci_bus_id") for d in cuda.get("devices", [])]
    nvml_buses = [g.get("pci_bus_id") for g in gpus]
    if all(buses) and sorted(buses) == sorted(nvml_buses):
        order = [buses.index(b) for b in nvml_buses]  # NVML index -> CUDA index
    return {
        "source": f"torch {cuda.get('torch')} (CUDA {cuda.get('cuda')}): can_device_access_peer",
        "matrix": [[matrix[a][b] for b in order] for a in order],
        "cuda_index_of_gpu": order,
    }


def build_inventory(snapshot: dict[str, Any]) -> dict[str, Any]:
    """A snapshot -> hardware.json (JSON-able, `schema: 1`)."""
    nvml_snap = snapshot.get("nvml") or {}
    gpus_raw = nvml_snap.get("gpus") or []
    host = dict(snapshot.get("host") or {})
    labels = [f"GPU{g['index']}" for g in gpus_raw]
    links_to = {g.get("pci_bus_id"): f"GPU{g['index']}" for g in gpus_raw}
    gpus = [_gpu_inventory(g, links_to) for g in gpus_raw]
    matrix = topology_matrix(nvml_snap)
    words = {w for row in matrix for w in row} - {"X"}
    legend = {k: v for k, v in LEGEND.items() if k == "X" or k in words}
    if any(w.startswith("NV") for w in words):
        legend["NV#"] = LEGEND["NV#"]
    inv: dict[str, Any] = {
        "schema": SCHEMA,
        "collected_at": snapshot.get("collected_at"),
        "host": host,
        "nvml_error": nvml_snap.get("error"),
        "driver": None
        if nvml_snap.get("error")
        else {
            "version": nvml_snap.get("driver_version"),
            "cuda_driver_version": _cuda_version(nvml_snap.get("cuda_driver_version")),
            "nvml_version": nvml_snap.get("nvml_version"),
        },
        "gpus": gpus,
        "topology": {
            "labels": labels,
            "matrix": matrix,
            "legend": {k: legend[k] for k in LEGEND if k in legend},
        },
        "nvml_p2p_status": _p2p_words(nvml_snap.get("p2p_status"), len(gpus)),
        "peer_access": _peer_access(snapshot.get("cuda") or {}, gpus_raw),
        "peer_access_note": None
        if (snapshot.get("cuda") or {}).get("available")
        else (snapshot.get("cuda") or {}).get("reason"),
    }
    inv["summary"] = summary_line(Hardware.model_validate(inv))
    return inv


def interconnect_words(hw: Hardware) -> list[str]:
    """The distinct links between GPUs, best first, e.g. ["NV18"] or ["PIX", "NODE", "SYS"]."""
    matrix = hw.topology.matrix if hw.topology else []
    words = {w for row in matrix for w in row} - {"X"}
    return sorted(words, key=link_rank)


def first_pair_link(hw: Hardware) -> str | None:
    """The link word between GPU0 and GPU1 ("NV18", "SYS"): a machine's label names it; None
    with fewer than two GPUs."""
    matrix = hw.topology.matrix if hw.topology else []
    return matrix[0][1] if len(matrix) > 1 and len(matrix[0]) > 1 else None


def summary_line(hw: Hardware) -> str:
    """One line for a report's first page: "2x NVIDIA H200, NV18, driver 580.95.05"."""
    if not hw.gpus:
        cpu = (hw.host and hw.host.cpu_model) or "unknown CPU"
        cores = hw.host.logical_cpus if hw.host else None
        return f"CPU only, no NVIDIA GPU: {cpu}" + (f", {cores} CPUs" if cores else "")
    names: dict[str, int] = {}
    for g in hw.gpus:
        names[g.name or "unknown GPU"] = names.get(g.name or "unknown GPU", 0) + 1
    parts = [", ".join(f"{n}x {name}" for name, n in names.items())]
    words = interconnect_words(hw)
    if words:
        parts.append("/".join(words))
    if hw.driver and hw.driver.version:
        parts.append(f"driver {hw.driver.version}")
    return ", ".join(parts)


_FABRIC = {
    frozenset(): "PCIe",
    frozenset({"NVSwitch"}): "NVSwitch",
    frozenset({"GPU"}): "direct NVLink",
}


def gpu_fabric(hardware: Hardware) -> str | None:
    """How the recorded GPUs meet, from hardware.json's NVLink table (what the Hardware page
    lists per GPU): "NVSwitch" (every GPU's active links lead to NVSwitches), "direct NVLink"
    (links lead to other GPUs), "PCIe" (NVLink was read and none is active), "mixed", or None
    (fewer than two GPUs, or NVLink not recorded)."""
    gpus = hardware.gpus
    if len(gpus) < 2 or any(g.nvlinks is None for g in gpus):
        return None
    kinds = set()
    for g in gpus:
        remotes = frozenset(str(n.remote) for n in g.nvlinks or [] if n.active)
        kinds.add(_FABRIC.get(remotes, "mixed"))
    return kinds.pop() if len(kinds) == 1 else "mixed"


def fabric_words(hardware: Hardware) -> str | None:
    """The fabric in a sentence, with the topology matrix's words beside it."""
    fabric = gpu_fabric(hardware)
    if fabric is None:
        return None
    words = interconnect_words(hardware)
    topo = ""
    if len(words) == 1:
        topo = f" (nvidia-smi topo -m: {words[0]} between every pair)"
    elif words:
        topo = f" (nvidia-smi topo -m: {', '.join(words)})"
    return {
        "NVSwitch": f"the GPUs meet through NVSwitch{topo}",
        "direct NVLink": f"the GPUs are joined directly by NVLink, no NVSwitch{topo}",
        "PCIe": f"no active NVLink: the GPUs meet over PCIe{topo}",
        "mixed": f"some GPU pairs meet through NVSwitch or NVLink, others not{topo}",
    }[fabric]
