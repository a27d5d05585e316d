"""What every runtime (host, docker, later slurm) offers the driver.

A runtime launches one run: `torchrun -m kit.worker RUN_DIR/spec.json` with N processes, in
some environment, and reports how the launch ended. The worker writes RUN_DIR/result.json; the
driver reads it (the runtime does not interpret results).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

LOG_TAIL_LINES = 40


def tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    """The last lines of a run's log, kept with a failed run's result."""
    if not path.is_file():
        return ""
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


@dataclass
class RunOutcome:
    """How a launch ended, from the outside."""

    exit_code: int | None  # None when the process never started or was killed by us
    timed_out: bool
    interrupted: bool  # Ctrl-C / SIGTERM reached the driver while this run was going
    wall_s: float
    command: list[str]
    error: str | None = None  # one line, when the launch itself failed (e.g. no torchrun)
    nodes: list[dict[str, Any]] | None = None  # multi-node runs: each node's status and log


class Runtime(Protocol):
    name: str  # "host" | "docker"
    pinned: bool  # True when the environment is a pinned image

    def run(
        self,
        run_dir: Path,
        nproc: int,
        env: dict[str, str],
        log_path: Path,
        timeout_s: float,
        gpu_ids: list[int] | None,
        device: str,
    ) -> RunOutcome:
        """Launch the worker on RUN_DIR/spec.json with `nproc` processes and wait for it.

        `env` holds the variant's variables (e.g. NCCL_P2P_DISABLE=1) to add to the launch;
        `gpu_ids` restricts the visible GPUs (CUDA_VISIBLE_DEVICES, or docker device requests);
        stdout and stderr of all ranks go to `log_path` (and are echoed when verbose).
        """
        ...


# NVLink multicast (NVLS) can take a shared host's GPUs out of service on some lent machines, and
# a benchmark of point-to-point paths does not want it either: off unless a recipe turns it on.
SAFE_ENV = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}
