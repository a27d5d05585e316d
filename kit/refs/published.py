"""Published figures (kit/refs/published.json) and where a run stands against them.

Each figure carries its source, date, the conditions it was measured under and how far it
compares with a kit run; none was measured by kit. `place` sets a run's figure beside each
published one of the same workload and says in words which conditions differ (GPU count, GPU
model, NVLink SHARP, message size, the task), so that a ratio is never read as like-for-like
when it is not.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from functools import cache
from importlib import resources
from typing import Any

from kit.inventory.topology import fabric_words, gpu_fabric
from kit.io.errors import InputError
from kit.model import Hardware, RunResult
from kit.refs.nccl_tests import size_words


@dataclass(frozen=True)
class Figure:
    """One published figure (see published.json for the meaning of each field)."""

    id: str
    title: str
    kind: str
    metric: str
    value: float
    approximate: bool
    unit: str
    per_gpu: bool
    floor: bool
    gpus: int
    gpu: str
    nvls: bool | None
    size_bytes: int | None
    conditions: str
    comparability: str
    source: str
    url: str
    date: str
    seq_len: int | None = None
    always_differs: tuple[str, ...] = ()
    fabric: str | None = None  # how its GPUs met: "NVSwitch", "direct NVLink", "PCIe"
    # conditions (CONDITION_KEYS) that must match for `kit accept` to judge against it at all
    requires: tuple[str, ...] = ()

    @property
    def value_words(self) -> str:
        v = f"{self.value:,.0f}" if self.value >= 100 else f"{self.value:g}"
        per = " per GPU" if self.per_gpu else ""
        return f"{'about ' if self.approximate else ''}{v} {self.unit}{per}"

    @property
    def cited(self) -> str:
        """ "NVIDIA/nccl-tests issue 212, ... (2024-05-06)"."""
        return f"{self.source} ({self.date})"

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "value_words": self.value_words, "cited": self.cited}


@cache
def figures() -> tuple[Figure, ...]:
    """Every shipped published figure."""
    text = resources.files("kit.refs").joinpath("published.json").read_text()
    return tuple(
        Figure(
            **{
                **f,
                "always_differs": tuple(f.get("always_differs") or ()),
                "requires": tuple(f.get("requires") or ()),
            }
        )
        for f in json.loads(text)["figures"]
    )


def by_id(figure_id: str) -> Figure:
    """The figure with this id; an InputError naming the ids there are."""
    for f in figures():
        if f.id == figure_id:
            return f
    known = ", ".join(f.id for f in figures())
    raise InputError(f"no published figure {figure_id!r}; known: {known}")


def for_kind(kind: str) -> list[Figure]:
    return [f for f in figures() if f.kind == kind]


@dataclass(frozen=True)
class Conditions:
    """What a run's conditions were, as the comparison needs them."""

    gpus: int | None
    gpu: str | None
    nvls: bool | None  # None: not known from the run's environment
    size_bytes: int | None  # the size the headline was taken at (sweeps)
    seq_len: int | None = None  # training: the sequence length the runs used
    fabric: str | None = None  # kit.inventory.topology.gpu_fabric of the recorded hardware
    fabric_words: str | None = None  # the same, in a sentence with the topology's words


def run_conditions(runs: list[RunResult], hardware: Hardware) -> Conditions:
    """A variant's conditions from its finished runs (results.json entries) and hardware.json:
    GPU count and model, NVLS (off when every run set NCCL_NVLS_ENABLE=0, else unknown), the
    largest message size of a sweep, and how the GPUs meet (the recorded NVLink table, never
    assumed)."""
    names = sorted({g.name for g in hardware.gpus if g.name})
    envs = [r.env for r in runs]
    off = bool(envs) and all(e.get("NCCL_NVLS_ENABLE", "").strip() == "0" for e in envs)
    sizes = [s.bytes for r in runs for s in r.data.sizes or []]
    gpus = next((r.world_size for r in runs if r.world_size), None)
    seq = next(
        (p["seq_len"] for r in runs if (p := r.data.params) and isinstance(p.get("seq_len"), int)),
        None,
    )
    return Conditions(
        seq_len=seq,
        gpus=gpus,
        gpu=names[0] if len(names) == 1 else None,
        nvls=False if off else None,
        size_bytes=max(sizes) if sizes and max(sizes) > 0 else None,
        fabric=gpu_fabric(hardware),
        fabric_words=fabric_words(hardware),
    )


CONDITION_KEYS = ("gpus", "gpu", "nvls", "fabric", "size", "seq_len")
"""The conditions a figure and a run are compared on; a figure's `requires` names some of them."""


def differing(figure: Figure, mine: Conditions) -> list[tuple[str, str]]:
    """(condition key, words) for each condition that differs between a figure and this run;
    a condition this run did not record (NVLS left at NCCL's default, say) is not a difference."""
    out = []
    if mine.gpus and figure.gpus != mine.gpus:
        out.append(("gpus", f"{figure.gpus} GPUs there, {mine.gpus} here"))
    if mine.gpu and not _same_gpu(figure.gpu, mine.gpu):
        out.append(("gpu", f"{figure.gpu} there, {mine.gpu} here"))
    if figure.nvls is not None and mine.nvls is not None and figure.nvls != mine.nvls:
        there = "on" if figure.nvls else "off"
        here = "on" if mine.nvls else "off (NCCL_NVLS_ENABLE=0)"
        out.append(("nvls", f"NVLink SHARP (NVLS) {there} there, {here} here"))
    if figure.fabric and mine.fabric and figure.fabric != mine.fabric:
        out.append(("fabric", f"GPUs joined by {figure.fabric} there, by {mine.fabric} here"))
    if figure.size_bytes and mine.size_bytes and figure.size_bytes != mine.size_bytes:
        words = (
            f"taken at {size_words(figure.size_bytes)} there, {size_words(mine.size_bytes)} here"
        )
        out.append(("size", words))
    if figure.seq_len and mine.seq_len and figure.seq_len != mine.seq_len:
        out.append(("seq_len", f"sequence {figure.seq_len} there, {mine.seq_len} here"))
    return out


def differences(figure: Figure, mine: Conditions) -> list[str]:
    """The conditions that differ between a published figure and this run, in words."""
    return [words for _, words in differing(figure, mine)] + list(figure.always_differs)


def unmet(figure: Figure, mine: Conditions) -> list[str]:
    """The differing conditions the figure requires to match (its `requires`): where any is,
    the figure is no acceptance reference for this run (`kit accept`: NOT COMPARABLE)."""
    return [words for key, words in differing(figure, mine) if key in figure.requires]


def place(figure: Figure, median: float, gpus: int | None, mine: Conditions) -> dict[str, Any]:
    """A run's median against one published figure: both, the ratio (per GPU where the figure
    is), and the conditions that differ. `median` is the run's figure in the figure's metric."""
    value = median / gpus if figure.per_gpu and gpus else median
    diff = differences(figure, mine)
    return {
        "figure": figure.to_dict(),
        "value": value,
        "unit": figure.unit + (" per GPU" if figure.per_gpu else ""),
        "ratio": value / figure.value if figure.value else None,
        "differences": diff,
        "like_for_like": not diff,
        "fabric_here": mine.fabric_words,  # from the bundle's recorded topology, or None
    }


def _same_gpu(published: str, recorded: str) -> bool:
    """ "H100 SXM" vs "NVIDIA H100 80GB HBM3": the same model when the model number matches."""

    def model(name: str) -> str:
        words = name.upper().replace("NVIDIA", "").split()
        return words[0] if words else ""

    return any(model(p) == model(recorded) for p in published.split("/"))
