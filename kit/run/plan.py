"""Turn a recipe into the list of runs: benchmark x repeat x variant, each a fresh launch.

Variants are interleaved inside each repeat (r0: p2p, no-p2p; r1: p2p, no-p2p; ...), so repeat i
of every variant ran close together in time: the pairs behind the paired P2P ratio, and a slow
drift of the machine (heat, a neighbour) touches all variants alike.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from kit.model import RunSpec as SpecFile
from kit.recipe import Recipe
from kit.recipe.gpus import counted
from kit.report.kinds import check_workloads
from kit.runtime.base import SAFE_ENV
from kit.shared.files import SPEC_SCHEMA

# NCCL_DEBUG=INFO makes NCCL name the transport of every channel (P2P, SHM, NET): the report's
# proof that a variant did what it claims. PCI bus order makes CUDA's GPU numbers match NVML's
# (telemetry, inventory, gpu_ids in recipes).
CUDA_ENV = {"NCCL_DEBUG": "INFO", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}


class RunSpec(SpecFile):
    """A planned run: the bundle model's run spec (runs/<id>/spec.json, what the worker reads),
    plus what only the driver needs, never written to the file."""

    timeout_s: float = Field(exclude=True)
    gpu_ids: list[int] | None = Field(default=None, exclude=True)  # the variant's, if it names any

    def to_json(self) -> dict[str, Any]:
        """The spec file the worker reads (kit.worker.records.SpecRecord)."""
        return self.dump()


def plan(
    recipe: Recipe,
    device: str,
    smoke: bool,
    repeats: int | None = None,
    per_node: int | None = None,
) -> list[RunSpec]:
    """Every run of the recipe, in the order they execute (a workload the report cannot draw
    is refused here, before anything runs). `per_node`: the processes each node starts where a
    batch placement spreads the run over nodes (Slurm, Kubernetes); spec.json's nproc says so."""
    check_workloads(b.kind for b in recipe.benchmarks)
    return [
        spec.model_copy(update={"nproc": per_node}) if per_node else spec
        for bench in recipe.benchmarks
        for repeat in range(repeats or recipe.repeats)
        for spec in plan_repeat(recipe, bench.label, repeat, device, smoke)
    ]


def plan_repeat(
    recipe: Recipe, benchmark: str, repeat: int, device: str, smoke: bool
) -> list[RunSpec]:
    """Repeat `repeat` of one benchmark: one run per variant it runs (the unit adaptive repeats
    add)."""
    bench = next(b for b in recipe.benchmarks if b.label == benchmark)
    params = bench.resolved_params(smoke=smoke)
    runs = []
    for variant in recipe.variants_of(bench.label):
        nproc = len(variant.gpu_ids) if variant.gpu_ids else counted(recipe)
        runs.append(
            RunSpec(
                schema=SPEC_SCHEMA,
                run_id=f"{bench.label}.{variant.name}.r{repeat}",
                benchmark=bench.label,
                kind=bench.kind,
                variant=variant.name,
                gpu_ids=variant.gpu_ids,
                repeat=repeat,
                device=device,
                nproc=nproc,
                smoke=smoke,
                params=params,
                timeout_s=recipe.timeout_s,
                env={**SAFE_ENV, **(CUDA_ENV if device == "cuda" else {}), **variant.env},
            )
        )
    return runs
