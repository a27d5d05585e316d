"""What a run is on: the device (cuda or cpu) and, for a recipe that says `gpus: all`, how many
GPUs that is on this machine. Resolved once, before the plan: every later step (the runtime's
request, the plan, the preflight, recipe.yaml in the bundle) sees a count."""

from __future__ import annotations

from kit.io.errors import InputError
from kit.recipe import Recipe
from kit.recipe import gpus as recipe_gpus
from kit.runtime.base import check_device


def detect_gpus() -> int:
    """How many NVIDIA GPUs the driver sees (NVML), 0 when there is no driver or no GPU."""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            return int(pynvml.nvmlDeviceGetCount())
        finally:
            pynvml.nvmlShutdown()
    except Exception:
        return 0


def resolve_device(requested: str) -> str:
    check_device(requested)
    if requested == "auto":
        return "cuda" if detect_gpus() > 0 else "cpu"
    if requested == "cuda" and detect_gpus() == 0:
        raise InputError(
            "--device cuda: no NVIDIA GPU is visible (NVML found none); use --device cpu"
        )
    return requested


def every_gpu(recipe: Recipe, device: str, several_nodes: bool) -> Recipe:
    """The recipe with `gpus: all` counted on this machine: NVML's GPU count on cuda (the
    GPUs the driver sees: a container then gets every one), CPU_RANKS gloo processes on the
    CPU. Over several nodes the driver sees none of theirs: refused, name the count."""
    if several_nodes:
        return recipe_gpus.resolve(
            recipe,
            None,
            "a run over several nodes cannot count their GPUs from here; give "
            "the recipe a count (gpus: N, or nodes.gpus_per_node)",
        )
    count = recipe_gpus.CPU_RANKS if device == "cpu" else detect_gpus()
    return recipe_gpus.resolve(recipe, count, "NVML found no GPU to count")
