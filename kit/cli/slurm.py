"""`kit slurm`: a recipe as one Slurm job, and `kit slurm collect` (kit.run.slurm); registered
in kit.cli."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kit.cli import batch
from kit.cli.options import Apptainer
from kit.io.errors import InputError

# the batch options as `kit slurm` words them
Nodes = batch.nodes("Nodes (default: the recipe's nodes.hosts count, or 1).")
GpusPerNode = batch.gpus_per_node("Processes per node (default: the recipe's).")
DryRun = batch.dry_run("Print the sbatch script; write and submit nothing.")


def slurm(
    target: Annotated[
        str, typer.Argument(help="A recipe YAML file, or `collect` to gather a finished job.")
    ],
    bundle: Annotated[
        Path | None, typer.Argument(help="With `collect`: the bundle the job wrote into.")
    ] = None,
    nodes: Nodes = None,
    gpus_per_node: GpusPerNode = None,
    partition: Annotated[str | None, typer.Option(help="sbatch --partition.")] = None,
    time: Annotated[str | None, typer.Option(help="sbatch --time, e.g. 01:00:00.")] = None,
    container_image: Annotated[
        str | None,
        typer.Option(help="enroot/pyxis: srun --container-image (a .sqsh file or docker://...)."),
    ] = None,
    apptainer: Apptainer = None,
    host_python: Annotated[
        str | None,
        typer.Option(help="No container: run the worker with this Python on the nodes."),
    ] = None,
    device: batch.Device = "cuda",
    smoke: batch.Smoke = None,
    repeats: batch.Repeats = None,
    out: Annotated[
        Path | None, typer.Option(help="Bundle directory, on a filesystem the nodes share.")
    ] = None,
    sbatch_arg: Annotated[
        list[str] | None,
        typer.Option(help="Another #SBATCH option, e.g. --sbatch-arg=--account=lab (repeatable)."),
    ] = None,
    dry_run: DryRun = False,
    wait: Annotated[
        bool, typer.Option("--wait", help="sbatch --wait, then collect the results at once.")
    ] = False,
) -> None:
    """Run a recipe on a Slurm cluster (enroot/pyxis or Apptainer), or collect a finished job.

    Writes the bundle's run specs and slurm/job.sbatch, submits it with sbatch when sbatch is on
    PATH, and `kit slurm collect BUNDLE` gathers results, logs and each node's inventory into the
    bundle and renders its report.

    Example: kit slurm recipes/allreduce.yaml --nodes 2 --gpus-per-node 8 --container-image ~/kit-cuda13.sqsh --dry-run

    Example: kit slurm collect reports/allreduce-20261121-120000
    """
    from kit.run import registry
    from kit.run.slurm import runtime as slurm_mod

    slurm_runtime = registry.batch("slurm")  # a batch runtime: the scheduler runs the plan later
    if target == "collect":
        if bundle is None:
            raise InputError("kit slurm collect BUNDLE: name the bundle the job wrote into")
        b, code = slurm_runtime.collect(bundle)
        print(b.path)
        raise typer.Exit(code)
    if bundle is not None:
        raise InputError(f"kit slurm {target}: unexpected argument {str(bundle)!r}")
    if wait and dry_run:
        raise InputError("--wait: --dry-run submits nothing to wait for; give one of them")
    opts = slurm_mod.SlurmOptions(
        nodes=nodes,
        gpus_per_node=gpus_per_node,
        partition=partition,
        time=time,
        container_image=container_image,
        apptainer=str(apptainer) if apptainer else None,
        host_python=host_python,
        extra=list(sbatch_arg or []),
        **batch.fields(device, smoke, repeats, out),
    )
    batch.submit(slurm_runtime(opts), slurm_mod.load(Path(target)), dry_run, wait)
