"""Per-GPU reference figures (kit/refs/per_gpu.json) and one GPU's standing against them.

A buyer accepts each GPU of a box against what a GPU of its model measures. The table holds
kit measurements of single GPUs (HBM copy, matmul ceilings), each with its source, the
conditions it was measured under, and a tolerance. `judge` gives one GPU's figure over the
repeats a verdict by kit.stats.acceptance's rule (decided by the interval, never the median alone;
fewer than 3 repeats: UNDECIDED), or NOT COMPARABLE with the reason: another model (by the
NVML name, exactly: "H100 PCIe" and "H100 80GB HBM3" are different parts), a CPU or smoke run
(kit.stats.acceptance's device and scale rules), a condition that differs, or no figure for the model.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from kit.stats.acceptance import NOT_COMPARABLE, Decision, decide, device_mismatch, scale_mismatch


@dataclass(frozen=True)
class GpuReference:
    """One shipped per-GPU figure (per_gpu.json's note says what each field means)."""

    id: str
    gpu_model: str
    figure: str
    value: float
    unit: str
    tolerance: float
    conditions: dict[str, Any]
    n: int
    date: str
    source: str


@dataclass(frozen=True)
class Standing:
    """One GPU's figure against its model's reference: the verdict and why."""

    verdict: str
    reason: str
    reference: GpuReference | None = None
    decision: Decision | None = None


@cache
def references() -> tuple[GpuReference, ...]:
    """Every shipped per-GPU figure."""
    text = resources.files("kit.refs").joinpath("per_gpu.json").read_text()
    return tuple(GpuReference(**f) for f in json.loads(text)["figures"])


def _words(value: Any) -> str:
    return "x".join(map(str, value)) if isinstance(value, list | tuple) else str(value)


def differences(
    ref: GpuReference, model: str | None, on_cpu: bool, smoke: bool, conditions: dict[str, Any]
) -> list[str]:
    """Why `ref` cannot judge this GPU's figure, in words ([] when it can)."""
    out = []
    device = device_mismatch("GPU", "CPU" if on_cpu else "GPU")
    if device:
        out.append(device)
    elif model != ref.gpu_model:
        out.append(f"{ref.gpu_model} there, {model or 'a GPU model not recorded'} here")
    scale = scale_mismatch("full", "smoke" if smoke else "full")
    if scale:
        out.append(scale)
    for key, want in ref.conditions.items():
        have = conditions.get(key)
        if have != want and not (isinstance(have, list | tuple) and list(have) == want):
            shown = "not recorded" if have is None else _words(have)
            out.append(f"{key} {_words(want)} there, {shown} here")
    return out


def judge(
    model: str | None,
    figure: str,
    values: list[float],
    conditions: dict[str, Any],
    on_cpu: bool = False,
    smoke: bool = False,
    unit: str = "",
) -> Standing:
    """`values` (this GPU's figure, one per finished repeat) against the shipped figure for its
    model and conditions. Higher is better for every figure the table holds."""
    listed = [r for r in references() if r.figure == figure]
    if not listed:
        return Standing(NOT_COMPARABLE, "kit/refs/per_gpu.json has no figure of this kind")
    mine = [r for r in listed if r.gpu_model == model] or listed
    found = [(r, differences(r, model, on_cpu, smoke, conditions)) for r in mine]
    ref, why = next(((r, w) for r, w in found if not w), found[0])
    if why:
        return Standing(NOT_COMPARABLE, "; ".join(why), ref)
    if not values:
        return Standing("failed", "no finished run measured it", ref)
    decision = decide(values, ref.value, ref.tolerance, True, figure, unit or ref.unit)
    return Standing(decision.verdict, decision.reason, ref, decision)
