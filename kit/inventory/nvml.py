"""NVML's raw answers about the GPUs, recorded into a JSON-able snapshot (nothing interpreted here).

nvidia-smi's text is never parsed: its layout changes between drivers, NVML's answers do not.
"""

from __future__ import annotations

import contextlib
import math
import os
from itertools import combinations
from pathlib import Path
from typing import Any

from kit.inventory.host import count_numa_nodes, is_int, read_file

# NVML constants used below (numeric, so older nvidia-ml-py builds work too).
_FI_NVLINK_SPEED_MBPS_COMMON = 90
_FI_NVLINK_LINK_COUNT = 91
_NVLINK_MAX_LINKS = 36
_P2P_CAPS = {"read": 0, "write": 1, "nvlink": 2, "atomics": 3}


# --------------------------------------------------------------------------------------------
# Collection: raw answers into a snapshot
# --------------------------------------------------------------------------------------------


def _text(value: Any) -> Any:
    return value.decode(errors="replace") if isinstance(value, bytes) else value


def _bus_id(nvml_bus_id: Any) -> str:
    """NVML's "00000000:18:00.0" -> sysfs's "0000:18:00.0" (lower case, 4-digit domain)."""
    text = str(_text(nvml_bus_id)).strip().lower()
    domain, _, rest = text.partition(":")
    return f"{domain[-4:].rjust(4, '0')}:{rest}" if rest else text


class _Recorder:
    """Calls NVML functions, keeping answers and the error of each failed query by name."""

    def __init__(self, nvml: Any, errors: dict[str, str]) -> None:
        self.nvml = nvml
        self.errors = errors

    def __call__(self, key: str, fn_name: str, *args: Any) -> Any:
        fn = getattr(self.nvml, fn_name, None)
        if fn is None:
            self.errors[key] = f"{fn_name} not in this nvidia-ml-py"
            return None
        try:
            return fn(*args)
        except Exception as exc:  # NVMLError_NotSupported and friends: keep going
            self.errors[key] = f"{type(exc).__name__}: {exc}"
            return None


# nvmlValueType_t -> the member of the nvmlValue_t union that holds it
_VALUE_MEMBERS = {
    0: "dVal",
    1: "uiVal",
    2: "ulVal",
    3: "ullVal",
    4: "sllVal",
    5: "siVal",
    6: "usVal",
}


def _field_values(nvml: Any, handle: Any, fields: list[int]) -> dict[int, Any]:
    """Read NVML field values; returns {field_id: value} for those that answered."""
    out: dict[int, Any] = {}
    try:
        values = nvml.nvmlDeviceGetFieldValues(handle, fields)
    except Exception:
        return out
    for v in values:
        if v.nvmlReturn != 0:
            continue
        member = _VALUE_MEMBERS.get(int(v.valueType))
        if member is not None:
            out[int(v.fieldId)] = getattr(v.value, member)
    return out


def _gpu_snapshot(nvml: Any, index: int, handle: Any, cpu_words: int) -> dict[str, Any]:
    errors: dict[str, str] = {}
    q = _Recorder(nvml, errors)
    g: dict[str, Any] = {"index": index, "errors": errors}
    g["name"] = _text(q("name", "nvmlDeviceGetName", handle))
    g["uuid"] = _text(q("uuid", "nvmlDeviceGetUUID", handle))
    pci = q("pci", "nvmlDeviceGetPciInfo", handle)
    g["pci_bus_id"] = _bus_id(pci.busId) if pci is not None else None
    g["pci_device_id"] = int(pci.pciDeviceId) if pci is not None else None
    mem = q("memory", "nvmlDeviceGetMemoryInfo", handle)
    g["memory_total_bytes"] = int(mem.total) if mem is not None else None
    g["memory_used_bytes"] = int(mem.used) if mem is not None else None
    cc = q("compute_capability", "nvmlDeviceGetCudaComputeCapability", handle)
    g["compute_capability"] = list(cc) if cc is not None else None
    g["architecture"] = q("architecture", "nvmlDeviceGetArchitecture", handle)
    g["vbios_version"] = _text(q("vbios", "nvmlDeviceGetVbiosVersion", handle))
    # the board's serial, what an asset register and an RMA know the GPU by; absent where NVML
    # does not answer (errors says why), as on boards that do not expose it
    serial = _text(q("serial", "nvmlDeviceGetSerial", handle))
    if serial:
        g["serial"] = serial
    g["persistence_mode"] = q("persistence_mode", "nvmlDeviceGetPersistenceMode", handle)
    clocks = {"graphics": 0, "sm": 1, "mem": 2}
    g["clocks_max_mhz"] = {
        k: q(f"max_clock_{k}", "nvmlDeviceGetMaxClockInfo", handle, v) for k, v in clocks.items()
    }
    g["clocks_mhz"] = {
        k: q(f"clock_{k}", "nvmlDeviceGetClockInfo", handle, v) for k, v in clocks.items()
    }
    g["power_mw"] = {
        "limit": q("power_limit", "nvmlDeviceGetPowerManagementLimit", handle),
        "default_limit": q("power_default", "nvmlDeviceGetPowerManagementDefaultLimit", handle),
        "enforced_limit": q("power_enforced", "nvmlDeviceGetEnforcedPowerLimit", handle),
        "usage": q("power_usage", "nvmlDeviceGetPowerUsage", handle),
    }
    g["pcie"] = {
        "gen_current": q("pcie_gen", "nvmlDeviceGetCurrPcieLinkGeneration", handle),
        "gen_max": q("pcie_gen_max", "nvmlDeviceGetMaxPcieLinkGeneration", handle),
        "gen_gpu_max": q("pcie_gen_gpu_max", "nvmlDeviceGetGpuMaxPcieLinkGeneration", handle),
        "width_current": q("pcie_width", "nvmlDeviceGetCurrPcieLinkWidth", handle),
        "width_max": q("pcie_width_max", "nvmlDeviceGetMaxPcieLinkWidth", handle),
    }
    aff = q("cpu_affinity", "nvmlDeviceGetCpuAffinity", handle, cpu_words)
    g["cpu_affinity_words"] = [int(w) for w in aff] if aff is not None else None
    node_words = max(1, math.ceil(count_numa_nodes() / 64))
    maff = q("memory_affinity", "nvmlDeviceGetMemoryAffinity", handle, node_words, 0)
    g["memory_affinity_words"] = [int(w) for w in maff] if maff is not None else None
    g["gpu_numa_node_id"] = q("gpu_numa_node_id", "nvmlDeviceGetNumaNodeId", handle)
    g["sysfs"] = _pci_sysfs(g["pci_bus_id"])
    g["temperature_c"] = q("temperature", "nvmlDeviceGetTemperature", handle, 0)
    g["temperature_slowdown_c"] = q(
        "temperature_slowdown", "nvmlDeviceGetTemperatureThreshold", handle, 1
    )
    reasons = q("throttle", "nvmlDeviceGetCurrentClocksEventReasons", handle)
    if reasons is None:
        reasons = q("throttle", "nvmlDeviceGetCurrentClocksThrottleReasons", handle)
    g["throttle_reasons_mask"] = reasons
    util = q("utilization", "nvmlDeviceGetUtilizationRates", handle)
    g["utilization"] = {"gpu": util.gpu, "memory": util.memory} if util is not None else None
    g["ecc"] = {
        "mode_current": (q("ecc_mode", "nvmlDeviceGetEccMode", handle) or [None])[0],
        "volatile_uncorrected": q("ecc_vol_unc", "nvmlDeviceGetTotalEccErrors", handle, 1, 0),
        "aggregate_uncorrected": q("ecc_agg_unc", "nvmlDeviceGetTotalEccErrors", handle, 1, 1),
        "volatile_corrected": q("ecc_vol_cor", "nvmlDeviceGetTotalEccErrors", handle, 0, 0),
    }
    sbe = q("retired_sbe", "nvmlDeviceGetRetiredPages", handle, 0)
    dbe = q("retired_dbe", "nvmlDeviceGetRetiredPages", handle, 1)
    pending = q("retired_pending", "nvmlDeviceGetRetiredPagesPendingStatus", handle)
    g["retired_pages"] = (
        None
        if sbe is None and dbe is None
        else {"sbe": len(sbe or []), "dbe": len(dbe or []), "pending": pending}
    )
    rows = q("remapped_rows", "nvmlDeviceGetRemappedRows", handle)
    g["remapped_rows"] = (
        None
        if rows is None
        else dict(zip(["correctable", "uncorrectable", "pending", "failure"], rows, strict=True))
    )
    procs = q("processes", "nvmlDeviceGetComputeRunningProcesses", handle)
    g["processes"] = (
        None
        if procs is None
        else [{"pid": int(p.pid), "used_memory_bytes": p.usedGpuMemory} for p in procs]
    )
    g["nvlinks"] = _nvlinks_snapshot(nvml, handle)
    fields = _field_values(nvml, handle, [_FI_NVLINK_SPEED_MBPS_COMMON, _FI_NVLINK_LINK_COUNT])
    g["nvlink_speed_mbps_common"] = fields.get(_FI_NVLINK_SPEED_MBPS_COMMON)
    g["nvlink_link_count"] = fields.get(_FI_NVLINK_LINK_COUNT)
    return g


def _nvlinks_snapshot(nvml: Any, handle: Any) -> list[dict[str, Any]]:
    links = []
    max_links = getattr(nvml, "NVML_NVLINK_MAX_LINKS", _NVLINK_MAX_LINKS)
    for link in range(max_links):
        try:
            state = nvml.nvmlDeviceGetNvLinkState(handle, link)
        except Exception:
            continue  # this link does not exist (or the GPU has no NVLink at all)
        entry: dict[str, Any] = {"link": link, "state": int(state)}
        for key, fn in (
            ("version", "nvmlDeviceGetNvLinkVersion"),
            ("remote_device_type", "nvmlDeviceGetNvLinkRemoteDeviceType"),
        ):
            try:
                entry[key] = int(getattr(nvml, fn)(handle, link))
            except Exception:
                entry[key] = None
        try:
            entry["remote_pci_bus_id"] = _bus_id(
                nvml.nvmlDeviceGetNvLinkRemotePciInfo(handle, link).busId
            )
        except Exception:
            entry["remote_pci_bus_id"] = None
        links.append(entry)
    return links


def _pci_sysfs(bus_id: str | None) -> dict[str, Any]:
    if not bus_id:
        return {}
    base = Path("/sys/bus/pci/devices") / bus_id
    out: dict[str, Any] = {}
    for name in ("numa_node", "local_cpulist", "current_link_speed", "max_link_speed"):
        text = read_file(base / name)
        if text is not None:
            out[name] = int(text) if name == "numa_node" and is_int(text) else text
    return out


def collect_nvml_snapshot(nvml: Any = None) -> dict[str, Any]:
    """Ask NVML everything the inventory needs; never raises (errors go into the snapshot)."""
    if nvml is None:
        try:
            import pynvml as nvml  # nvidia-ml-py
        except ImportError as exc:
            return {"error": f"nvidia-ml-py is not installed ({exc})", "gpus": []}
    try:
        nvml.nvmlInit()
    except Exception as exc:
        return {"error": f"NVML did not start: {exc}", "gpus": []}
    try:
        errors: dict[str, str] = {}
        q = _Recorder(nvml, errors)
        snap: dict[str, Any] = {"error": None, "errors": errors}
        snap["driver_version"] = _text(q("driver", "nvmlSystemGetDriverVersion"))
        snap["cuda_driver_version"] = q("cuda_driver", "nvmlSystemGetCudaDriverVersion")
        snap["nvml_version"] = _text(q("nvml_version", "nvmlSystemGetNVMLVersion"))
        count = q("count", "nvmlDeviceGetCount") or 0
        handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        cpu_words = max(1, math.ceil((os.cpu_count() or 1) / 64))
        snap["gpus"] = [_gpu_snapshot(nvml, i, h, cpu_words) for i, h in enumerate(handles)]
        ancestor: list[list[int | None]] = [[None] * count for _ in range(count)]
        p2p: dict[str, list[list[int | None]]] = {
            k: [[None] * count for _ in range(count)] for k in _P2P_CAPS
        }
        for i, j in combinations(range(count), 2):
            ancestor[i][j] = ancestor[j][i] = q(
                f"topology_{i}_{j}", "nvmlDeviceGetTopologyCommonAncestor", handles[i], handles[j]
            )
            for k, cap in _P2P_CAPS.items():
                for a, b in ((i, j), (j, i)):
                    p2p[k][a][b] = q(
                        f"p2p_{k}_{a}_{b}", "nvmlDeviceGetP2PStatus", handles[a], handles[b], cap
                    )
        snap["common_ancestor"] = ancestor
        snap["p2p_status"] = p2p
        return snap
    except Exception as exc:
        return {"error": f"NVML query failed: {type(exc).__name__}: {exc}", "gpus": []}
    finally:
        with contextlib.suppress(Exception):
            nvml.nvmlShutdown()
