"""Worker entry point: `torchrun --nproc-per-node N -m kit.worker RUN_DIR/spec.json`.

Every rank runs the benchmark named in the spec; rank 0 writes result.json. A failure on rank 0
is written as a failed result with the error before the process exits non-zero; a failure on
another rank makes torchrun stop the group, and the driver records it from the exit status.
"""

from __future__ import annotations

import gc
import importlib
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from kit.shared import files
from kit.shared.files import RESULT_SCHEMA
from kit.shared.jsonio import now_iso
from kit.worker import loaded
from kit.worker.common import init, versions, write_json
from kit.worker.telemetry import GpuTelemetry
from kit.worker.watchdog import start_from_env
from kit.workloads.registry import worker_module


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m kit.worker RUN_DIR/spec.json", file=sys.stderr)
        return 2
    spec_path = Path(argv[0])
    start_from_env()  # ends this rank when the driver's heartbeat stops (the driver was killed)
    started, t0 = now_iso(), time.perf_counter()
    ctx = init(spec_path)
    spec = ctx.spec
    result = {
        "schema": RESULT_SCHEMA,
        "run_id": spec["run_id"],
        "benchmark": spec["benchmark"],
        "kind": spec["kind"],
        "variant": spec["variant"],
        "repeat": spec["repeat"],
        "status": "ok",
        "error": None,
        "started_at": started,
        "world_size": ctx.world_size,
        "device": ctx.device.type,
        "backend": ctx.backend,
        "env": spec.get("env", {}),
        "versions": {},
        "metrics": {},
        "data": {},
        "notes": ctx.notes,
        "telemetry": None,
    }
    code = 0
    try:
        module = importlib.import_module(worker_module(spec["kind"]))
        telemetry = GpuTelemetry(interval_s=0.25, max_samples=1200)
        sample = ctx.is_cuda and ctx.local_rank == 0
        if sample:
            telemetry.start()
        try:
            outcome = module.run(ctx, spec["params"])
        finally:
            if sample:
                telemetry.stop()
                result["telemetry"] = telemetry.result()
        result["metrics"], result["data"] = outcome["metrics"], outcome["data"]
    except Exception as exc:  # recorded in the result, then the process fails
        code = 1
        result["status"] = "failed"
        result["error"] = f"{type(exc).__name__}: {exc}".splitlines()[0][:500]
        traceback.print_exc()
    if ctx.rank == 0:  # after the workload returned: no timed window is open
        result["loaded"] = loaded_record(ctx.run_dir)
    # Free the benchmark's objects now: a DDP/FSDP model sits in reference cycles that would
    # otherwise outlive destroy_process_group and be torn down during interpreter exit, where
    # gloo's threads abort the process ("terminate called without an active exception").
    gc.collect()
    result["versions"] = versions()
    result["finished_at"] = now_iso()
    result["wall_s"] = time.perf_counter() - t0
    if ctx.rank == 0:
        write_json(ctx.run_dir / spec.get("result_path", files.RESULT), result)
    import torch.distributed as dist

    if code == 0:
        dist.barrier()
    dist.destroy_process_group()
    return code


def loaded_record(run_dir: Path) -> dict[str, Any] | None:
    """What this rank loaded (kit.worker.loaded); a failure to read it never fails the run."""
    try:
        return loaded.record(run_dir)
    except Exception as exc:
        print(f"[kit.worker] loaded libraries not recorded: {type(exc).__name__}: {exc}")
        return None


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
