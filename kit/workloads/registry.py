"""The workload registry: every kind the kit runs, found by its folder, and what the rest may ask.

The worker's dispatcher, the recipe loader, the report, compare and adaptive repeats all ask
here; nothing outside a workload's folder names a kind. Standard library only, so the worker
imports it inside the container. A new workload is a folder kit/workloads/<kind>/ with
params.py, worker.py and spec.py (SPEC): the folder registers it, no list names it.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from kit.workloads.base import SpecError, WorkloadSpec


def discover(folder: Path) -> tuple[str, ...]:
    """The kinds under a workloads folder: every subfolder that holds a spec.py, sorted."""
    return tuple(sorted(p.parent.name for p in folder.glob("*/spec.py")))


KINDS = discover(Path(__file__).resolve().parent)


SPECS: dict[str, WorkloadSpec] = {}
BROKEN: dict[str, str] = {}
"""The kinds whose spec.py cannot be built (SpecError), with the one line why: one broken
folder must not stop `kit --help` or any command that never runs it; a recipe naming it fails
validation with that line."""
for _kind in KINDS:
    try:
        SPECS[_kind] = importlib.import_module(f"kit.workloads.{_kind}.spec").SPEC
    except SpecError as _exc:
        BROKEN[_kind] = str(_exc)


def spec(kind: str) -> WorkloadSpec | None:
    """The kind's spec, None for a kind this kit does not know (a bundle from another kit)."""
    return SPECS.get(kind)


def headline_metric(kind: str) -> str:
    """The one metric a kind is judged by (adaptive repeats, verdicts, compare's headline)."""
    s = SPECS.get(kind)
    return s.headline if s else "throughput"


def label(kind: str) -> str:
    s = SPECS.get(kind)
    return s.label if s else kind


def params_class(kind: str) -> type:
    return SPECS[kind].params


def same_figure(kind: str) -> frozenset[str]:
    """The parameters its params class declares (SAME_FIGURE) to change how long or how often a
    figure is measured, not the figure; none for a kind this kit does not know (every
    parameter then counts)."""
    s = SPECS.get(kind)
    return frozenset(getattr(s.params, "SAME_FIGURE", ())) if s else frozenset()


def worker_module(kind: str) -> str:
    return SPECS[kind].worker
