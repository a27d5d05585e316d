"""What the batch placements (`kit slurm`, `kit k8s`) share: the protocol, the option checks,
the job's fields, the bundle written before the job and each node's inventory gathered into
hardware.json, written once."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from kit.bundle import Bundle
from kit.io.errors import InputError
from kit.model import Hardware, NodeInventory
from kit.recipe import Recipe
from kit.run.plan import RunSpec
from kit.run.results import open_bundle, write_specs
from kit.runtime.base import DEVICES
from kit.shared import files


class BatchRuntime(Protocol):
    """A runtime whose scheduler runs the planned launches later (no `run`, no waiting)."""

    name: str
    placement: str  # where the runs go (environment.json `placement`): "slurm", "k8s"

    def submit(self, recipe: Any, dry_run: bool = False, wait: bool = False) -> str:
        """Write the plan where the job reads it and submit it; what the command prints."""
        ...

    def collect(self, bundle: Path) -> tuple[Any, int]:
        """After the job: results, inventory, environment and report; (bundle, exit code)."""
        ...


BATCH_DEVICES = tuple(d for d in DEVICES if d != "auto")
"""What a batch command's --device may name: the cluster's device is not detected from here."""


def check_batch_options(device: str, nodes: int | None, gpus_per_node: int | None) -> None:
    """The checks `kit slurm` and `kit k8s` share: a device named, counts of at least one."""
    if device not in BATCH_DEVICES:
        raise InputError(f"--device {device!r}: allowed: {', '.join(BATCH_DEVICES)}")
    for name, value in (("--nodes", nodes), ("--gpus-per-node", gpus_per_node)):
        if value is not None and value < 1:
            raise InputError(f"{name} {value}: must be at least 1")


@dataclass
class BatchJob:
    """What a batch job is made of: the recipe, its runs, where they go and how they launch."""

    recipe: Recipe
    runs: list[RunSpec]
    bundle: Path
    nodes: int
    gpus_per_node: int
    rdzv_port: int
    env: dict[str, str]


def write_batch_bundle(
    job: BatchJob,
    device: str,
    runtime: str,
    pinned: bool,
    command: str,
    reproduces: dict[str, Any] | None = None,
    **placed: Any,
) -> Bundle:
    """The bundle before the job is submitted: recipe, results.json with the header read off
    the planned runs (smoke, the repeats, how many: all the driver can count here) and `placed`
    (the placement's own record and fields), and each run's spec."""
    bundle = open_bundle(
        job.bundle,
        job.recipe,
        device,
        runtime,
        pinned,
        job.runs[0].smoke if job.runs else False,
        1 + max((r.repeat for r in job.runs), default=0),
        command,
        len(job.runs),
        reproduces,
    )
    for name, value in placed.items():
        setattr(bundle.results, name, value)
    bundle.save()
    write_specs(bundle, job.runs)
    return bundle


def gather_inventory(bundle: Bundle, folder: Path, source: str) -> None:
    """hardware.json from each node's inventory as its task printed it (`folder`/nodeN.json, the
    last JSON line of kit.worker.nodeinfo's output); a file no reader takes is that node's
    error, never the whole bundle's."""
    inventory = []
    for f in sorted(folder.glob("node*.json")):
        try:
            last = [ln for ln in f.read_text().splitlines() if ln.startswith("{")][-1]
            record = {"node": int(f.stem.removeprefix("node")), **json.loads(last)}
            inventory.append(NodeInventory.model_validate(record))
        except (ValueError, TypeError, IndexError):  # pydantic's ValidationError is a ValueError
            inventory.append(NodeInventory(node=f.stem, error=f"unreadable: {f.name}"))
    hardware = Hardware(nodes=sorted(inventory, key=lambda n: str(n.node)), source=source)
    bundle.write_json(files.HARDWARE, hardware.dump(as_written=True))
