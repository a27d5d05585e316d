"""What every worker shares: the run spec and result files, the process group, versions, clocks.

The worker talks to the driver only through files in the run directory: it reads spec.json and
rank 0 writes result.json. Standard library and torch only: this runs inside the container.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import platform
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kit.shared.atomic import write_atomic
from kit.shared.files import SPEC_SCHEMA
from kit.shared.jsonio import dumps


def write_json(path: Path, data: Any) -> None:
    """Write JSON atomically (kit.shared.atomic), so a reader never sees half. Strict JSON
    (`dumps`): the kit never writes a file its own loader refuses."""
    write_atomic(path, dumps(data).encode("utf-8"))


@dataclass
class Context:
    """One rank's view of the run: the spec, the process group and the device it drives."""

    spec: dict[str, Any]
    run_dir: Path
    rank: int
    local_rank: int
    world_size: int
    device: Any  # torch.device
    backend: str
    notes: list[str] = field(default_factory=list)

    @property
    def is_cuda(self) -> bool:
        return self.device.type == "cuda"

    def log(self, message: str) -> None:
        """Print from rank 0 only, flushed, so the log reads like one program."""
        if self.rank == 0:
            print(f"[kit.worker] {message}", flush=True)

    def synchronize(self) -> None:
        import torch

        if self.is_cuda:
            torch.cuda.synchronize(self.device)


def init(spec_path: Path) -> Context:
    """Read the spec, start the process group (nccl on CUDA, gloo on CPU) and pick the device."""
    import torch
    import torch.distributed as dist

    spec = json.loads(spec_path.read_text())
    if spec.get("schema") != SPEC_SCHEMA:
        raise RuntimeError(
            f"run spec schema {spec.get('schema')!r}; this worker reads {SPEC_SCHEMA}"
        )
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if spec["device"] == "cuda":
        if not torch.cuda.is_available():
            raise RuntimeError("the run asks for CUDA but torch sees no GPU in this process")
        torch.cuda.set_device(local_rank)
        device, backend = torch.device("cuda", local_rank), "nccl"
    else:
        device, backend = torch.device("cpu"), "gloo"
    kwargs: dict[str, Any] = {"backend": backend}
    if backend == "nccl":
        kwargs["device_id"] = (
            device  # binds the communicator eagerly: init cost stays out of timings
        )
    dist.init_process_group(**kwargs)
    return Context(spec, spec_path.parent, rank, local_rank, world_size, device, backend)


def dist_call(name: str, before: str) -> Any:
    """torch.distributed's collective `name`, or its older name `before` on a torch without it.

    Torch 2.13 and 2.14 (checked) hold all_gather_single and reduce_scatter_single and keep
    all_gather_into_tensor and reduce_scatter_tensor as wrappers that warn at every call: host
    time inside a one-call latency (host launch included) and a FutureWarning in every run's
    log. The call a run made is recorded by its name (the sweep's `call`)."""
    import torch.distributed as dist

    return getattr(dist, name, None) or getattr(dist, before)


def versions() -> dict[str, str | None]:
    """What this process runs on, read from inside (the container), not assumed."""
    import torch

    out: dict[str, str | None] = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": None,
        "nccl": None,
        "gpu": None,
    }
    if torch.cuda.is_available():
        out["cudnn"] = str(torch.backends.cudnn.version())
        nccl = torch.cuda.nccl.version()
        out["nccl"] = ".".join(map(str, nccl)) if isinstance(nccl, tuple) else str(nccl)
        out["gpu"] = torch.cuda.get_device_name()
    for name in ("transformers", "peft", "accelerate", "torchvision"):
        module = sys.modules.get(name)
        if module is not None:
            out[name] = getattr(module, "__version__", None)
    return out


class FrozenHeap:
    """Python's garbage collector kept out of the timed window, and its cost inside it measured.

    On entry the heap is collected and frozen (`gc.freeze`): the objects made so far (the model,
    the libraries' modules) move to a generation no collection scans, so the collections inside
    the window go through only what the window made. Left alone, a full collection walks the
    whole heap: on the Llama-8B LoRA shape on one H100, 0.25-0.35 s with the GIL held, two or
    three times in a 30 s window, each stalling the GPU for as long; whether two or three fell in
    a window moved a run's throughput by about 1%
    (reports/measurements/2026-11-24-h100x1-llama-container-gc). Training frameworks manage the
    collector for the same reason (torchtitan's gc_freq, Megatron-LM's --manual-gc).
    Collection stays on: objects made inside the window are still collected. On exit the heap
    is unfrozen. `seconds` and `collections` (per generation) are the window's collections."""

    NOTE = (
        "Python's garbage collector was run and its objects frozen (gc.freeze) before the timed "
        "window, so collections inside the window scan only objects made in it; gc_window_s is "
        "the time those collections took (the slowest rank's)"
    )

    def __init__(self) -> None:
        self.seconds = 0.0
        self.collections = [0, 0, 0]
        self._t0 = 0.0

    def _clock(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._t0 = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self._t0
            self.collections[info.get("generation", 2)] += 1

    def __enter__(self) -> FrozenHeap:
        gc.collect()
        gc.freeze()
        gc.callbacks.append(self._clock)
        return self

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(ValueError):
            gc.callbacks.remove(self._clock)
        gc.unfreeze()
