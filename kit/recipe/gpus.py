"""A recipe's GPU count: a number, or `all` (every GPU of the machine the run lands on).

A buyer accepts a machine, not two of its GPUs: a box-acceptance recipe says `gpus: all`, and
the run takes every GPU it finds. The word never reaches a bundle: it is resolved when the run
starts (kit.run.devices.every_gpu: NVML's count on a GPU machine, CPU_RANKS gloo processes on
the CPU, the scheduler's --gpus-per-node on Slurm or Kubernetes), and recipe.yaml in the bundle
records the count the runs used.
"""

from __future__ import annotations

from typing import Any, Literal, Protocol, TypeVar

from kit.io.errors import InputError
from kit.shared.limits import MAX_GPUS

ALL: Literal["all"] = "all"
CPU_RANKS = 2
"""`gpus: all` on the CPU (--device cpu): two gloo processes stand in for the GPUs, the fewest
that still make a box with a median and a sibling to compare (the smoke test of the method)."""


class _Recipe(Protocol):
    """What these functions read of kit.recipe.Recipe (which imports this module)."""

    name: str
    gpus: int | str

    def model_copy(self: R, *, update: dict[str, Any] | None = None) -> R: ...


R = TypeVar("R", bound=_Recipe)


def check_gpus(value: Any) -> int | str:
    """A count from 1 to MAX_GPUS (a true integer: YAML's true is no count) or the word all."""
    if value == ALL and isinstance(value, str):
        return ALL
    if type(value) is int and 1 <= value <= MAX_GPUS:
        return value
    raise ValueError(f"must be a GPU count from 1 to {MAX_GPUS}, or all")


def is_all(recipe: _Recipe) -> bool:
    return recipe.gpus == ALL


def resolve(recipe: R, count: int | None, why_unknown: str) -> R:
    """The recipe with `gpus: all` replaced by `count` (the GPUs found where it runs); a
    counted recipe as it is. `count` None: this place cannot count them (why_unknown says what
    to name instead), refused with one line before any work."""
    if not is_all(recipe):
        return recipe
    if count is None or count < 1:
        raise InputError(f"recipe {recipe.name}: gpus: all: {why_unknown}")
    n = min(count, MAX_GPUS)
    # the recipe was verified as `gpus: all` on some machine, not at this count: say so, so a
    # bundle's recipe.yaml never reads "gpus: 4" beside another count's verified_on text
    verified = recipe.verified_on and f"as gpus: all (here {n} GPUs), on {recipe.verified_on}"
    return recipe.model_copy(update={"gpus": n, "verified_on": verified})


def words(recipe: _Recipe) -> str:
    """ "8 GPU" (a column of `kit recipes list`), "all GPUs"."""
    return "all GPUs" if is_all(recipe) else f"{recipe.gpus} GPU"


def counted(recipe: _Recipe) -> int:
    """The GPU count of a resolved recipe (what the plan starts per run)."""
    if isinstance(recipe.gpus, int):
        return recipe.gpus
    raise InputError(f"recipe {recipe.name}: gpus: all was not resolved to a count before planning")
