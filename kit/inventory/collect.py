"""One snapshot of this machine (NVML + host + CUDA), and the inventory built from it.

Two steps, so the logic can be tested on recorded answers: `collect_snapshot()` stores the raw
answers in a plain JSON-able dict; `build_inventory(snapshot)` (kit.inventory.topology) turns it
into hardware.json by pure functions. `measure()` is both, read as kit.model's Hardware.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone
from typing import Any

from kit.inventory.host import collect_cuda_peer_access, collect_host_snapshot
from kit.inventory.nvml import collect_nvml_snapshot
from kit.inventory.topology import build_inventory
from kit.model.hardware import Hardware

SNAPSHOT_SCHEMA = 1


def collect_snapshot(
    *, cuda_peer: bool = True, nvml: Any = None, host: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Everything raw, in one JSON-able dict: what a fixture records and what tests replay."""
    started = time.time()
    nvml_snap = collect_nvml_snapshot(nvml)
    if not cuda_peer:
        cuda = {"available": False, "reason": "not asked"}
    elif len(nvml_snap.get("gpus", [])) < 2:
        cuda = {"available": False, "reason": "fewer than 2 GPUs: no peers to ask about"}
    else:
        cuda = collect_cuda_peer_access()
    return {
        "snapshot_schema": SNAPSHOT_SCHEMA,
        "collected_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "collect_s": round(time.time() - started, 3),
        "nvml": nvml_snap,
        "host": host if host is not None else collect_host_snapshot(),
        "cuda": cuda,
    }


def measure(*, cuda_peer: bool = True) -> Hardware:
    """This machine now as the typed model a recorded hardware.json loads as (kit.model), so
    one reader serves both; what the engine writes as hardware.json (the model's dump keeps
    the inventory's field order)."""
    return Hardware.model_validate(build_inventory(collect_snapshot(cuda_peer=cuda_peer)))
