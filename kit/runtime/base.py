"""What every runtime offers the run engine: the protocol, and what a launch reports.

A runtime launches one run: `torchrun -m kit.worker RUN_DIR/spec.json` with N processes, in
some environment, and reports how the launch ended. The worker writes RUN_DIR/result.json; the
driver reads it (the runtime does not interpret results).

Two kinds, both registered by name in kit.run.registry:

- an interactive `Runtime` (host, docker, multinode) is prepared once, then the engine calls
  `run` for each planned launch and waits for it, and `close` at the end;
- a `BatchRuntime` (slurm, k8s; kit.run.batch) hands the whole plan to a scheduler that runs it later: it has no
  `run`; `submit` writes the plan where the job reads it, and `collect`, after the job, turns
  what the job left into results through the same code as the engine (kit.run.results).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from kit.io.errors import InputError
from kit.model.files import CONTROL
from kit.model.hardware import NodeInventory
from kit.model.run import NodeRecord

LOG_TAIL_LINES = 40

DEVICES = ("auto", "cuda", "cpu")
"""What --device (or a rerun's recorded device) may ask; auto: cuda where a GPU answers."""


def check_device(requested: str, where: str = "--device") -> None:
    """The one check of an asked device: the engine, a rerun's recorded one, multi-node."""
    if requested not in DEVICES:
        raise InputError(f"{where} {requested!r}: allowed: {', '.join(DEVICES)}")


def check_no_control(name: str, value: str) -> None:
    """A value refused if it holds a control character (kit.model.files.CONTROL): none belongs in
    a value that becomes one line of a script or a name a terminal shows."""
    if CONTROL.search(value):
        raise InputError(
            f"{name} {value!r}: control characters (line breaks, NUL, ESC, tab) are not allowed"
        )


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
    nodes: list[NodeRecord] | None = None  # multi-node runs: each node's status and log


@dataclass(frozen=True)
class RuntimeRequest:
    """What the engine asks a runtime to prepare, from the recipe and the command line."""

    environment: str  # the environment's name (docker/<name>): the recipe's, or --env
    device: str  # "cuda" | "cpu", already resolved
    gpus: int = 1  # processes per launch the recipe plans (multinode: per node by default)
    base_image: str | None = None  # --base-image: overrides the Dockerfile's BASE_IMAGE
    image_archive: Path | None = None  # --image-archive: run the image of a `kit export`
    nodes: Any = None  # kit.run.multinode.config.NodeConfig when several nodes are asked
    apptainer: Path | None = None  # --apptainer: the SIF the apptainer runtime runs (no build)


@dataclass(frozen=True)
class LaunchRequest:
    """What the engine asks a runtime to run: the worker on RUN_DIR/spec.json with `nproc`
    processes, waited for at most `timeout_s`.

    `env` holds the variant's variables (e.g. NCCL_P2P_DISABLE=1) to add to the launch (a
    container gets the whole launch environment there instead: LocalRuntime.run);
    `gpu_ids` restricts the visible GPUs (CUDA_VISIBLE_DEVICES, or docker device requests),
    None for all; stdout and stderr of all ranks go to `log_path` (and are echoed when verbose).
    """

    run_dir: Path
    nproc: int
    env: dict[str, str]
    log_path: Path
    timeout_s: float
    gpu_ids: list[int] | None
    device: str


class Runtime(Protocol):
    """An interactive runtime: prepare, describe the environment, run each launch, clean up."""

    name: str  # what environment.json and results.json record: its name in the registry
    placement: str  # where the runs go: "local", "multinode", ... (environment.json `placement`)
    engine: str  # what they run in: "none" | "docker" | "podman" | ... (environment.json)
    pinned: bool  # True when the environment is a pinned image
    # environment.json: the fingerprint of what the runs will find (set by prepare)
    environment: dict[str, Any]
    # hardware.json's `nodes` (multi-node runtimes: each node's inventory), else None
    inventory: list[NodeInventory] | None

    @classmethod
    def prepare(cls, request: RuntimeRequest) -> Runtime:
        """Make the environment ready (build or load an image, reach the nodes) and describe it."""
        ...

    def run(self, req: LaunchRequest) -> RunOutcome:
        """Launch the worker as `req` says and wait for it."""
        ...

    def known_environment(self) -> dict[str, Any] | None:
        """environment.json as far as known before the first run, with the versions inside
        (what a rerun compares with the bundle's); None when only the runs can tell."""
        ...

    def close(self) -> None:
        """Remove what this runtime left (containers, networks); called once, after the runs."""
        ...


# NVLink multicast (NVLS) can take a shared host's GPUs out of service on some lent machines, and
# a benchmark of point-to-point paths does not want it either: off unless a recipe turns it on.
SAFE_ENV = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}
