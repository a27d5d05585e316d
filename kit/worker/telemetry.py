"""GPU telemetry during a run: a background thread samples NVML every few hundred ms.

Worker side: stdlib and nvidia-ml-py only, imported lazily. Without NVML (no library, no GPU,
no permission) the sampler records `available: false` and the reason, and the run goes on.

Samples are stored column-wise per GPU (a list per quantity) to keep result.json small; when a
run outlasts `max_samples`, every other sample is dropped and the interval doubles, so a long
run keeps an even (coarser) record instead of only its beginning.

    with GpuTelemetry(interval_s=0.2) as tel:
        train()
    result["telemetry"] = tel.result()
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from typing import Any

from kit.shared.throttle import SLOWDOWN_MASK, THERMAL_MASK, decode_reasons

# Field ids (numeric: older nvidia-ml-py lacks some names). Cumulative counters.
FI_NVLINK_TX_KIB = 138  # NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX
FI_NVLINK_RX_KIB = 139  # NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX
FI_PCIE_TX_BYTES = 197  # NVML_FI_DEV_PCIE_COUNT_TX_BYTES
FI_PCIE_RX_BYTES = 198  # NVML_FI_DEV_PCIE_COUNT_RX_BYTES
ALL_LINKS = 0xFFFFFFFF  # scopeId: the sum over all NVLink links

COLUMNS = (
    "t_s",
    "sm_clock_mhz",
    "mem_clock_mhz",
    "power_w",
    "temp_c",
    "util_gpu",
    "util_mem",
    "throttle_mask",
    "pcie_tx_bytes",
    "pcie_rx_bytes",
    "pcie_tx_kbs",
    "pcie_rx_kbs",
    "nvlink_tx_kib",
    "nvlink_rx_kib",
)


def visible_indices(nvml: Any, env: dict[str, str] | None = None) -> list[int]:
    """NVML indices of the GPUs this process may use (CUDA_VISIBLE_DEVICES: ids or UUIDs).

    Integer ids assume CUDA's order equals NVML's (PCI bus order): the runtime sets
    CUDA_DEVICE_ORDER=PCI_BUS_ID so that holds.
    """
    env = os.environ if env is None else env
    count = nvml.nvmlDeviceGetCount()
    spec = env.get("CUDA_VISIBLE_DEVICES")
    if spec is None or spec.strip() == "":
        return list(range(count)) if spec is None else []
    out: list[int] = []
    uuids: dict[str, int] | None = None
    for item in (s.strip() for s in spec.split(",")):
        if item.isdigit():
            if int(item) < count:
                out.append(int(item))
            continue
        if uuids is None:
            uuids = {}
            for i in range(count):
                raw = nvml.nvmlDeviceGetUUID(nvml.nvmlDeviceGetHandleByIndex(i))
                uuids[raw.decode() if isinstance(raw, bytes) else raw] = i
        match = [i for u, i in uuids.items() if u.startswith(item)]
        if len(match) == 1:
            out.append(match[0])
    return out


class _Gpu:
    """One GPU's handle, identity and its columns of samples."""

    def __init__(self, nvml: Any, index: int) -> None:
        self.index = index
        self.handle = nvml.nvmlDeviceGetHandleByIndex(index)
        name, uuid = nvml.nvmlDeviceGetName(self.handle), nvml.nvmlDeviceGetUUID(self.handle)
        self.name = name.decode() if isinstance(name, bytes) else name
        self.uuid = uuid.decode() if isinstance(uuid, bytes) else uuid
        self.cols: dict[str, list[Any]] = {c: [] for c in COLUMNS}
        self.nvlink_ok = True
        self.pcie_fields_ok = True
        self.errors: dict[str, str] = {}


class GpuTelemetry:
    """Context manager: samples every visible GPU in a daemon thread while the block runs."""

    def __init__(
        self,
        interval_s: float = 0.5,
        max_samples: int = 2000,
        nvml: Any = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.interval_s = interval_s
        self.max_samples = max_samples
        self._nvml = nvml
        self._env = env
        self._gpus: list[_Gpu] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = 0.0
        self._started_at = None
        self.available = False
        self.reason: str | None = None

    # -- lifecycle --------------------------------------------------------------------------
    def __enter__(self) -> GpuTelemetry:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        self._started_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        nvml = self._nvml
        if nvml is None:
            try:
                import pynvml as nvml
            except ImportError as exc:
                self.reason = f"nvidia-ml-py is not installed ({exc})"
                return
        try:
            nvml.nvmlInit()
        except Exception as exc:
            self.reason = f"NVML did not start: {exc}"
            return
        self._nvml = nvml
        try:
            indices = visible_indices(nvml, self._env)
            self._gpus = [_Gpu(nvml, i) for i in indices]
        except Exception as exc:
            self.reason = f"NVML query failed: {type(exc).__name__}: {exc}"
            self._shutdown()
            return
        if not self._gpus:
            self.reason = "no visible GPU"
            self._shutdown()
            return
        self.available = True
        self._t0 = time.monotonic()
        self._sample_all()
        self._thread = threading.Thread(target=self._loop, name="kit-telemetry", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join(timeout=10)
            self._thread = None
            self._sample_all()  # the state at the end, whatever the interval
            self._shutdown()

    def _shutdown(self) -> None:
        with contextlib.suppress(Exception):
            self._nvml.nvmlShutdown()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._sample_all()
            if self._gpus and len(self._gpus[0].cols["t_s"]) >= self.max_samples:
                for g in self._gpus:
                    for col in g.cols.values():
                        del col[1::2]
                self.interval_s *= 2

    # -- sampling ---------------------------------------------------------------------------
    def _q(self, g: _Gpu, key: str, fn: str, *args: Any) -> Any:
        try:
            return getattr(self._nvml, fn)(g.handle, *args)
        except Exception as exc:
            g.errors.setdefault(key, f"{type(exc).__name__}: {exc}")
            return None

    def _fields(self, g: _Gpu, ids: list[tuple[int, int] | int]) -> list[Any] | None:
        try:
            values = self._nvml.nvmlDeviceGetFieldValues(g.handle, ids)
        except Exception as exc:
            g.errors.setdefault("field_values", f"{type(exc).__name__}: {exc}")
            return None
        out = []
        for v in values:
            if v.nvmlReturn != 0:
                out.append(None)
            elif v.valueType == 0:
                out.append(v.value.dVal)
            elif v.valueType == 1:
                out.append(v.value.uiVal)
            elif v.valueType == 2:
                out.append(v.value.ulVal)
            else:
                out.append(v.value.ullVal)
        return out

    def _sample_all(self) -> None:
        for g in self._gpus:
            self._sample(g)

    def _sample(self, g: _Gpu) -> None:
        c = g.cols
        c["t_s"].append(round(time.monotonic() - self._t0, 3))
        c["sm_clock_mhz"].append(self._q(g, "sm_clock", "nvmlDeviceGetClockInfo", 1))
        c["mem_clock_mhz"].append(self._q(g, "mem_clock", "nvmlDeviceGetClockInfo", 2))
        mw = self._q(g, "power", "nvmlDeviceGetPowerUsage")
        c["power_w"].append(None if mw is None else round(mw / 1000, 1))
        c["temp_c"].append(self._q(g, "temperature", "nvmlDeviceGetTemperature", 0))
        util = self._q(g, "utilization", "nvmlDeviceGetUtilizationRates")
        c["util_gpu"].append(None if util is None else util.gpu)
        c["util_mem"].append(None if util is None else util.memory)
        mask = self._q(g, "throttle", "nvmlDeviceGetCurrentClocksEventReasons")
        if mask is None:
            mask = self._q(g, "throttle", "nvmlDeviceGetCurrentClocksThrottleReasons")
        c["throttle_mask"].append(mask)
        pcie = self._fields(g, [FI_PCIE_TX_BYTES, FI_PCIE_RX_BYTES]) if g.pcie_fields_ok else None
        if pcie is None or pcie[0] is None:
            g.pcie_fields_ok = False
            pcie = [None, None]
        c["pcie_tx_bytes"].append(pcie[0])
        c["pcie_rx_bytes"].append(pcie[1])
        # Older drivers lack the byte counters; nvmlDeviceGetPcieThroughput answers instead, but
        # each call waits ~20 ms in the driver, so only at relaxed intervals.
        slow_ok = not g.pcie_fields_ok and self.interval_s >= 0.2
        c["pcie_tx_kbs"].append(
            self._q(g, "pcie_tx", "nvmlDeviceGetPcieThroughput", 0) if slow_ok else None
        )
        c["pcie_rx_kbs"].append(
            self._q(g, "pcie_rx", "nvmlDeviceGetPcieThroughput", 1) if slow_ok else None
        )
        nv = (
            self._fields(g, [(FI_NVLINK_TX_KIB, ALL_LINKS), (FI_NVLINK_RX_KIB, ALL_LINKS)])
            if g.nvlink_ok
            else None
        )
        if nv is None or nv[0] is None:
            g.nvlink_ok = False
            nv = [None, None]
        c["nvlink_tx_kib"].append(nv[0])
        c["nvlink_rx_kib"].append(nv[1])

    # -- result -----------------------------------------------------------------------------
    def result(self) -> dict[str, Any]:
        """JSON-able: identity, every sample, and a summary with the `throttled` flag."""
        if not self.available:
            return {"available": False, "reason": self.reason, "started_at": self._started_at}
        gpus = []
        for g in self._gpus:
            gpus.append(
                {
                    "index": g.index,
                    "name": g.name,
                    "uuid": g.uuid,
                    "samples": g.cols,
                    "summary": summarize(g.cols),
                    "errors": g.errors,
                }
            )
        return {
            "available": True,
            "reason": None,
            "started_at": self._started_at,
            "interval_s": self.interval_s,
            "t0_monotonic_s": self._t0,  # t_s = time.monotonic() - this: marks windows on t_s
            "columns": list(COLUMNS),
            "gpus": gpus,
            "throttled": any(g["summary"]["throttled"] for g in gpus),
            "throttle_reasons_seen": sorted(
                {r for g in gpus for r in g["summary"]["throttle_reasons_busy"]}
            ),
        }


def _nums(xs: list[Any]) -> list[float]:
    return [x for x in xs if x is not None]


def _rate(values: list[Any], times: list[float], scale: float) -> float | None:
    """Average rate of a cumulative counter over the samples that have it (per second)."""
    pairs = [(t, v) for t, v in zip(times, values, strict=True) if v is not None]
    if len(pairs) < 2 or pairs[-1][0] <= pairs[0][0]:
        return None
    (t0, v0), (t1, v1) = pairs[0], pairs[-1]
    if v1 < v0:
        return None  # the counter wrapped
    return round((v1 - v0) * scale / (t1 - t0), 3)


def _counter_rate(values: list[Any], times: list[float]) -> float | None:
    """GB/s from NVML's PCIe byte counter, or None when the counter cannot be trusted.

    Seen on 2x H200 (driver 580.159): the counter is 32 bits wide and, at the ~28 GB/s an
    all-reduce without P2P moves, wraps more than once between 0.25 s samples, so neither the
    end-to-end difference nor the per-interval differences mean anything. Only a counter that
    is wider than 32 bits is used.
    """
    known = [v for v in values if v is not None]
    if not known or max(known) < 2**32:
        return None
    return _rate(values, times, 1e-9)


def _mean_gbs(kbs: list[Any]) -> float | None:
    xs = _nums(kbs)
    return round(sum(xs) / len(xs) * 1e-6, 3) if xs else None


def summarize(cols: dict[str, list[Any]]) -> dict[str, Any]:
    """Per-GPU summary. Busy = GPU utilisation above 0; `throttled` = a slowdown reason
    (power cap, thermal or hardware slowdown, power brake) seen in a busy sample."""
    busy = [i for i, u in enumerate(cols["util_gpu"]) if u]
    reasons: dict[str, int] = {}
    for i in busy:
        mask = cols["throttle_mask"][i] or 0
        for name in decode_reasons(mask & SLOWDOWN_MASK):
            reasons[name] = reasons.get(name, 0) + 1
    thermal = any((cols["throttle_mask"][i] or 0) & THERMAL_MASK for i in busy)

    def stat(col: str, idx: list[int] | None = None) -> dict[str, float] | None:
        xs = _nums([cols[col][i] for i in (idx if idx is not None else range(len(cols[col])))])
        if not xs:
            return None
        return {"min": min(xs), "mean": round(sum(xs) / len(xs), 2), "max": max(xs)}

    t = cols["t_s"]
    return {
        "samples": len(t),
        "busy_samples": len(busy),
        "sm_clock_mhz_busy": stat("sm_clock_mhz", busy),
        "power_w": stat("power_w"),
        "temp_c": stat("temp_c"),
        "util_gpu": stat("util_gpu"),
        "throttled": bool(reasons),
        "thermal_or_hw_slowdown": thermal,
        "throttle_reasons_busy": {k: round(v / len(busy), 3) for k, v in reasons.items()},
        "pcie_tx_gbs": _counter_rate(cols["pcie_tx_bytes"], t),
        "pcie_rx_gbs": _counter_rate(cols["pcie_rx_bytes"], t),
        "pcie_tx_gbs_sampled": _mean_gbs(cols["pcie_tx_kbs"]),
        "pcie_rx_gbs_sampled": _mean_gbs(cols["pcie_rx_kbs"]),
        "nvlink_tx_gbs": _rate(cols["nvlink_tx_kib"], t, 1024e-9),
        "nvlink_rx_gbs": _rate(cols["nvlink_rx_kib"], t, 1024e-9),
    }
