"""A stand-in for the pynvml module that answers from a recorded snapshot.

Only for what cannot exist on a CPU-only machine (a GPU behind NVML). It answers the way
nvidia-ml-py does (bytes for UUID/bus ids, ctypes-like objects, NVMLError on "not supported"),
so the real collection code in kit.inventory runs against it end to end.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, ClassVar


class NVMLError(Exception):
    pass


class NotSupported(NVMLError):
    def __init__(self) -> None:
        super().__init__("Not Supported")


def _nvml_bus(bus: str) -> bytes:
    # NVML writes an 8-digit domain and upper-case hex: 00000000:1B:00.0
    domain, rest = bus.split(":", 1)
    return f"0000{domain}:{rest}".upper().encode()


def _value_or_raise(v: Any) -> Any:
    if v is None:
        raise NotSupported()
    return v


class FakeNvml:
    NVML_NVLINK_MAX_LINKS = 36

    def __init__(self, nvml_snapshot: dict[str, Any]) -> None:
        self.s = nvml_snapshot
        self.g = nvml_snapshot["gpus"]
        self.inits = 0
        self.shutdowns = 0

    # system
    def nvmlInit(self) -> None:
        self.inits += 1

    def nvmlShutdown(self) -> None:
        self.shutdowns += 1

    def nvmlSystemGetDriverVersion(self) -> str:
        return self.s["driver_version"]

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        return self.s["cuda_driver_version"]

    def nvmlSystemGetNVMLVersion(self) -> bytes:
        return self.s["nvml_version"].encode()

    def nvmlDeviceGetCount(self) -> int:
        return len(self.g)

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        return i

    # identity
    def nvmlDeviceGetName(self, h: int) -> str:
        return self.g[h]["name"]

    def nvmlDeviceGetUUID(self, h: int) -> bytes:
        return self.g[h]["uuid"].encode()

    def nvmlDeviceGetPciInfo(self, h: int) -> Any:
        g = self.g[h]
        return SimpleNamespace(busId=_nvml_bus(g["pci_bus_id"]), pciDeviceId=g["pci_device_id"])

    def nvmlDeviceGetMemoryInfo(self, h: int) -> Any:
        g = self.g[h]
        return SimpleNamespace(total=g["memory_total_bytes"], used=g["memory_used_bytes"])

    def nvmlDeviceGetCudaComputeCapability(self, h: int) -> tuple[int, int]:
        return tuple(self.g[h]["compute_capability"])

    def nvmlDeviceGetArchitecture(self, h: int) -> int:
        return self.g[h]["architecture"]

    def nvmlDeviceGetVbiosVersion(self, h: int) -> str:
        return self.g[h]["vbios_version"]

    def nvmlDeviceGetSerial(self, h: int) -> str:
        return _value_or_raise(self.g[h].get("serial"))

    def nvmlDeviceGetPersistenceMode(self, h: int) -> int:
        return self.g[h]["persistence_mode"]

    # clocks, power, pcie
    _CLOCK: ClassVar[dict[int, str]] = {0: "graphics", 1: "sm", 2: "mem"}

    def nvmlDeviceGetMaxClockInfo(self, h: int, t: int) -> int:
        return self.g[h]["clocks_max_mhz"][self._CLOCK[t]]

    def nvmlDeviceGetClockInfo(self, h: int, t: int) -> int:
        return self.g[h]["clocks_mhz"][self._CLOCK[t]]

    def nvmlDeviceGetPowerManagementLimit(self, h: int) -> int:
        return self.g[h]["power_mw"]["limit"]

    def nvmlDeviceGetPowerManagementDefaultLimit(self, h: int) -> int:
        return self.g[h]["power_mw"]["default_limit"]

    def nvmlDeviceGetEnforcedPowerLimit(self, h: int) -> int:
        return self.g[h]["power_mw"]["enforced_limit"]

    def nvmlDeviceGetPowerUsage(self, h: int) -> int:
        return self.g[h]["power_mw"]["usage"]

    def nvmlDeviceGetTotalEnergyConsumption(self, h: int) -> int:
        """Millijoules since the driver loaded: each read is one more second at the snapshot's
        power draw (a GPU without the counter: `total_energy_mj` None, NVML says Not Supported)."""
        base = _value_or_raise(self.g[h].get("total_energy_mj", 10**9 * (h + 1)))
        reads = self.__dict__.setdefault("_energy_reads", {})
        reads[h] = reads.get(h, 0) + 1
        return base + (reads[h] - 1) * self.g[h]["power_mw"]["usage"]

    def nvmlDeviceGetCurrPcieLinkGeneration(self, h: int) -> int:
        return self.g[h]["pcie"]["gen_current"]

    def nvmlDeviceGetMaxPcieLinkGeneration(self, h: int) -> int:
        return self.g[h]["pcie"]["gen_max"]

    def nvmlDeviceGetGpuMaxPcieLinkGeneration(self, h: int) -> int:
        return self.g[h]["pcie"]["gen_gpu_max"]

    def nvmlDeviceGetCurrPcieLinkWidth(self, h: int) -> int:
        return self.g[h]["pcie"]["width_current"]

    def nvmlDeviceGetMaxPcieLinkWidth(self, h: int) -> int:
        return self.g[h]["pcie"]["width_max"]

    # affinity
    def nvmlDeviceGetCpuAffinity(self, h: int, n: int) -> list[int]:
        words = self.g[h]["cpu_affinity_words"]
        return (words + [0] * n)[:n]

    def nvmlDeviceGetMemoryAffinity(self, h: int, n: int, scope: int) -> list[int]:
        words = self.g[h]["memory_affinity_words"]
        return (words + [0] * n)[:n]

    def nvmlDeviceGetNumaNodeId(self, h: int) -> int:
        return _value_or_raise(self.g[h]["gpu_numa_node_id"])

    # health
    def nvmlDeviceGetTemperature(self, h: int, sensor: int) -> int:
        return self.g[h]["temperature_c"]

    def nvmlDeviceGetTemperatureThreshold(self, h: int, kind: int) -> int:
        return _value_or_raise(self.g[h]["temperature_slowdown_c"])

    def nvmlDeviceGetCurrentClocksEventReasons(self, h: int) -> int:
        return self.g[h]["throttle_reasons_mask"]

    def nvmlDeviceGetUtilizationRates(self, h: int) -> Any:
        return SimpleNamespace(**self.g[h]["utilization"])

    def nvmlDeviceGetEccMode(self, h: int) -> list[int]:
        mode = _value_or_raise(self.g[h]["ecc"]["mode_current"])
        return [mode, mode]

    def nvmlDeviceGetTotalEccErrors(self, h: int, err: int, counter: int) -> int:
        key = {(1, 0): "volatile_uncorrected", (1, 1): "aggregate_uncorrected"}.get(
            (err, counter), "volatile_corrected"
        )
        return _value_or_raise(self.g[h]["ecc"][key])

    def nvmlDeviceGetRetiredPages(self, h: int, cause: int) -> list[int]:
        pages = _value_or_raise(self.g[h]["retired_pages"])
        return [0x1000 * (k + 1) for k in range(pages["sbe" if cause == 0 else "dbe"])]

    def nvmlDeviceGetRetiredPagesPendingStatus(self, h: int) -> int:
        return _value_or_raise(self.g[h]["retired_pages"])["pending"]

    def nvmlDeviceGetRemappedRows(self, h: int) -> tuple[int, int, int, int]:
        r = _value_or_raise(self.g[h]["remapped_rows"])
        return (r["correctable"], r["uncorrectable"], r["pending"], r["failure"])

    def nvmlDeviceGetComputeRunningProcesses(self, h: int) -> list[Any]:
        return [
            SimpleNamespace(pid=p["pid"], usedGpuMemory=p["used_memory_bytes"])
            for p in self.g[h]["processes"]
        ]

    # nvlink
    def _link(self, h: int, link: int) -> dict[str, Any]:
        links = self.g[h]["nvlinks"]
        if link >= len(links):
            raise NotSupported()
        return links[link]

    def nvmlDeviceGetNvLinkState(self, h: int, link: int) -> int:
        return self._link(h, link)["state"]

    def nvmlDeviceGetNvLinkVersion(self, h: int, link: int) -> int:
        return self._link(h, link)["version"]

    def nvmlDeviceGetNvLinkRemoteDeviceType(self, h: int, link: int) -> int:
        return self._link(h, link)["remote_device_type"]

    def nvmlDeviceGetNvLinkRemotePciInfo(self, h: int, link: int) -> Any:
        return SimpleNamespace(busId=_nvml_bus(self._link(h, link)["remote_pci_bus_id"]))

    def nvmlDeviceGetFieldValues(self, h: int, ids: list[Any]) -> list[Any]:
        g = self.g[h]
        known = {90: g["nvlink_speed_mbps_common"], 91: g["nvlink_link_count"]}
        out = []
        for fid in ids:
            fid = fid[0] if isinstance(fid, tuple) else fid
            v = known.get(fid)
            out.append(
                SimpleNamespace(
                    fieldId=fid,
                    nvmlReturn=0 if v is not None else 3,
                    valueType=1,
                    value=SimpleNamespace(uiVal=v or 0),
                )
            )
        return out

    # pairs
    def nvmlDeviceGetTopologyCommonAncestor(self, a: int, b: int) -> int:
        return self.s["common_ancestor"][a][b]

    def nvmlDeviceGetP2PStatus(self, a: int, b: int, cap: int) -> int:
        key = {0: "read", 1: "write", 2: "nvlink", 3: "atomics"}[cap]
        return self.s["p2p_status"][key][a][b]
