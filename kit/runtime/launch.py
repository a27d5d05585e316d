"""How a run is launched, written once: the torchrun command line and the variables it gets.

Every placement (this machine, several Docker daemons, a Slurm allocation) and every container
(none, Docker, Apptainer, pyxis) launches the same thing:

    torchrun --standalone --nproc-per-node=G -m kit.worker RUN/spec.json           (one node)
    torchrun --nnodes=N --nproc-per-node=G --rdzv-backend=c10d --rdzv-endpoint=HOST:PORT
             --rdzv-id=ID [--rdzv-conf=is_host=0|1] --max-restarts=0 -m kit.worker RUN/spec.json

with the variant's variables, unbuffered output, the heartbeat the ranks watch, and one OpenMP
thread per rank on CPU runs (two gloo ranks on a 2-core machine otherwise fight over cores).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from kit.runtime.heartbeat import worker_env

MOUNT = "/kit/run"  # where a container sees the run directory
WORKER = ["-m", "kit.worker"]
KIT_ROOT = Path(__file__).resolve().parents[2]
"""The folder that holds this kit's package: first on a child Python's path (with_kit)."""


def with_kit(env: Mapping[str, str]) -> dict[str, str]:
    """`env` with this kit first on PYTHONPATH: a child Python on this machine (torchrun's ranks,
    the reaper, a probe of the host's Python) imports the same kit as the driver, wherever that
    is installed, ahead of any other on the path."""
    path = os.pathsep.join(p for p in (str(KIT_ROOT), env.get("PYTHONPATH")) if p)
    return {**env, "PYTHONPATH": path}


@dataclass(frozen=True)
class Rendezvous:
    """A run across several nodes: torchrun's c10d rendezvous on the first one."""

    nnodes: int
    endpoint: str  # HOST:PORT (a shell expression in a batch script)
    run_id: str
    is_host: bool | None = None  # the first node hosts the store, whatever its name resolves to


def torchrun(
    nproc: int, spec: str, python: str | None = None, rendezvous: Rendezvous | None = None
) -> list[str]:
    """The launch command; `python` runs torchrun as a module of that interpreter (host runs)."""
    head = [python, "-m", "torch.distributed.run"] if python else ["torchrun"]
    if rendezvous is None:
        return [*head, "--standalone", f"--nproc-per-node={nproc}", *WORKER, spec]
    r = rendezvous
    args = [
        *head,
        f"--nnodes={r.nnodes}",
        f"--nproc-per-node={nproc}",
        "--rdzv-backend=c10d",
        f"--rdzv-endpoint={r.endpoint}",
        f"--rdzv-id={r.run_id}",
    ]
    if r.is_host is not None:
        args.append(f"--rdzv-conf=is_host={1 if r.is_host else 0}")
    return [*args, "--max-restarts=0", *WORKER, spec]


def environment(
    variant_env: dict[str, str],
    device: str,
    heartbeat: str | None = None,
    container: bool = False,
    extra: dict[str, str] | None = None,
) -> dict[str, str]:
    """The variables a launch adds to what its container or host already has.

    `heartbeat` is the heartbeat file as the ranks see it (None where no filesystem is shared
    with the driver: multi-node and batch runs); `container` runs get a writable HOME (the image
    user may have none); `extra` holds placement settings (a node section's env, the socket
    interface) that the variant's own variables override.
    """
    env = {"PYTHONUNBUFFERED": "1"}
    if container:
        env["HOME"] = "/tmp"
    env.update(extra or {})
    env.update(variant_env)
    if heartbeat is not None:
        env.update(worker_env(heartbeat))
    if device == "cpu":
        env.setdefault("OMP_NUM_THREADS", "1")
    return env
