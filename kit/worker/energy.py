"""GPU energy over the timed window from NVML's total-energy counter, read at the window's edges.

NVML's power reading on Hopper is a one-second average, so power sampled every 0.25 s and
integrated over a short window reads low when the window starts from idle: on an H100 with bf16
matmuls after 3 s idle, sampled power integrated over 1.7 s read 0.70 of the counter (777 J
against 1,110 J), 0.94 over 7 s, 0.99 over 30 s. The counter
(`nvmlDeviceGetTotalEnergyConsumption`, millijoules since the driver was loaded) has no such lag:
the energy of a window is its value at the end minus its value at the start.

Each rank reads the counter of the GPU it drives, right after the device is synchronized at the
window's start and right after the window's one synchronize at its end, so the readings bracket
the work that was timed (give or take the counter's own update period). Worker side: the standard
library and nvidia-ml-py, imported lazily; without NVML or the counter, `reason` says why and the
driver falls back to sampled power, saying so.

    counter = EnergyCounter.open(local_rank)
    start = counter.read()
    ...  # the timed window
    record = counter.record(start, counter.read())
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from typing import Any

from kit.worker.telemetry import visible_indices

COUNTER = "nvmlDeviceGetTotalEnergyConsumption"
"""The NVML call whose difference is the window's energy (millijoules)."""


@dataclass
class EnergyCounter:
    """NVML's energy counter of one GPU, or the reason it cannot be read (`handle` None)."""

    nvml: Any
    handle: Any
    index: int | None
    uuid: str | None
    reason: str | None = None

    @classmethod
    def open(
        cls, local_rank: int, nvml: Any = None, env: dict[str, str] | None = None
    ) -> EnergyCounter:
        """The counter of the GPU this rank drives: the `local_rank`-th visible GPU in NVML's
        order (the runtime sets CUDA_DEVICE_ORDER=PCI_BUS_ID, so CUDA's order is NVML's)."""
        if nvml is None:
            try:
                import pynvml as nvml
            except ImportError as exc:
                return cls(None, None, None, None, f"nvidia-ml-py is not installed ({exc})")
        try:
            nvml.nvmlInit()
        except Exception as exc:
            return cls(None, None, None, None, f"NVML did not start: {exc}")
        try:
            indices = visible_indices(nvml, env if env is not None else dict(os.environ))
            if local_rank >= len(indices):
                raise LookupError(f"local rank {local_rank}: only {len(indices)} visible GPU(s)")
            index = indices[local_rank]
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            raw = nvml.nvmlDeviceGetUUID(handle)
            uuid = raw.decode() if isinstance(raw, bytes) else str(raw)
            return cls(nvml, handle, index, uuid)
        except Exception as exc:
            with contextlib.suppress(Exception):
                nvml.nvmlShutdown()
            return cls(None, None, None, None, f"NVML query failed: {type(exc).__name__}: {exc}")

    def read(self) -> float | None:
        """The counter in millijoules, or None (and `reason` set) when it cannot be read."""
        if self.handle is None:
            return None
        try:
            return float(getattr(self.nvml, COUNTER)(self.handle))
        except Exception as exc:
            self.reason = f"{COUNTER} failed: {type(exc).__name__}: {exc}"
            return None

    def close(self) -> None:
        if self.nvml is not None:
            with contextlib.suppress(Exception):
                self.nvml.nvmlShutdown()
            self.nvml = self.handle = None

    def record(self, start_mj: float | None, end_mj: float | None) -> dict[str, Any]:
        """This GPU's entry of the result's `data.energy_counter.gpus`."""
        ok = start_mj is not None and end_mj is not None and end_mj >= start_mj
        reason = self.reason
        if not ok and reason is None:
            reason = "the counter went backwards (driver reloaded?)"
        return {
            "nvml_index": self.index,
            "uuid": self.uuid,
            "start_mj": start_mj,
            "end_mj": end_mj,
            "energy_j": (end_mj - start_mj) / 1000.0 if ok else None,  # type: ignore[operator]
            "reason": None if ok else reason,
        }


def gathered(records: list[dict[str, Any]]) -> dict[str, Any]:
    """`data.energy_counter` from every rank's record (rank order): which counter, its unit, and
    each GPU's readings. `complete` when every rank's GPU gave an energy."""
    complete = bool(records) and all(r.get("energy_j") is not None for r in records)
    return {
        "counter": COUNTER,
        "unit": "mJ",
        "read_at": "the timed window's edges, after a device synchronize, on each rank's GPU",
        "complete": complete,
        "energy_j": sum(r["energy_j"] for r in records) if complete else None,
        "gpus": [{"rank": i, **r} for i, r in enumerate(records)],
    }
