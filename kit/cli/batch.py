"""What `kit slurm` and `kit k8s` share: their common options (each words --nodes,
--gpus-per-node and --dry-run for its own cluster), the fields both runtimes' options take
alike, and how a submission ends."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

from kit.cli.options import repeats_option, smoke_option
from kit.shared.limits import MAX_GPUS, MAX_NODES

# the cluster's device is named, never detected here
Device = Annotated[str, typer.Option(help="cuda | cpu (gloo).")]
Smoke = smoke_option("Smoke scale (default: on CPU).")
Repeats = repeats_option("Override the recipe's.")


def nodes(words: str) -> Any:
    """--nodes: how many nodes, bounded as every plan is."""
    return Annotated[int | None, typer.Option(min=1, max=MAX_NODES, help=words)]


def gpus_per_node(words: str) -> Any:
    """--gpus-per-node: processes on each node, bounded as every plan is."""
    return Annotated[int | None, typer.Option(min=1, max=MAX_GPUS, help=words)]


def dry_run(words: str) -> Any:
    """--dry-run: print what would be submitted."""
    return Annotated[bool, typer.Option("--dry-run", help=words)]


def fields(
    device: str, smoke: bool | None, repeats: int | None, out: Path | None
) -> dict[str, Any]:
    """SlurmOptions' and K8sOptions' common fields (they mean the same in both), with the
    command line the bundle records."""
    from kit.run.slurm.runtime import command_line

    return {
        "device": device,
        "smoke": smoke,
        "repeats": repeats,
        "out": out,
        "command": command_line(),
    }


def submit(runtime: Any, recipe: Any, dry_run: bool, wait: bool) -> NoReturn:
    """Submit `recipe` through a batch runtime (kit.run.batch.BatchRuntime) and print what it
    says: a dry run's script or manifests as they are (they end in a newline), otherwise its one
    line. The exit code is the runtime's (k8s: 1 when a run it waited for failed); a runtime
    that keeps none (slurm: the job's outcome is collected later) exits 0."""
    printed = runtime.submit(recipe, dry_run=dry_run, wait=wait)
    print(printed, end="" if dry_run else "\n")
    raise typer.Exit(getattr(runtime, "code", 0))
