"""The workload registry: every kind the kit runs, found by its folder, and what the rest may ask.

The worker's dispatcher, the recipe loader, the report, compare and adaptive repeats all ask
here; nothing outside a workload's folder names a kind. Standard library only, so the worker
imports it inside the container. A new workload is a folder kit/workloads/<kind>/ with
params.py, worker.py and spec.py (SPEC): the folder registers it, no list names it.
"""

from __future__ import annotations

import dataclasses
import importlib
from pathlib import Path
from typing import Any

from kit.workloads.base import SpecError, WorkloadSpec


def discover(folder: Path) -> tuple[str, ...]:
    """The kinds under a workloads folder: every subfolder that holds a spec.py, sorted."""
    return tuple(sorted(p.parent.name for p in folder.glob("*/spec.py")))


KINDS = discover(Path(__file__).resolve().parent)


_SPECS: dict[str, WorkloadSpec] = {}
_BROKEN: dict[str, str] = {}


def _load(kind: str) -> None:
    """Import the kind's spec.py the first time it is asked for: a command that runs one
    workload builds one spec (`kit recipes validate` starts faster), and a folder whose spec
    cannot be built (SpecError) is recorded with the one line why, so that a broken folder
    never stops `kit --help` or a command that never runs it."""
    if kind in _SPECS or kind in _BROKEN or kind not in KINDS:
        return
    try:
        _SPECS[kind] = importlib.import_module(f"kit.workloads.{kind}.spec").SPEC
    except SpecError as exc:
        _BROKEN[kind] = str(exc)


def broken(kind: str) -> str | None:
    """Why the kind's spec cannot be built; None when it can (or the kind is unknown)."""
    _load(kind)
    return _BROKEN.get(kind)


def spec(kind: str) -> WorkloadSpec | None:
    """The kind's spec, None for a kind this kit does not know (a bundle from another kit) or
    one whose spec cannot be built (`broken` says why)."""
    _load(kind)
    return _SPECS.get(kind)


def headline_metric(kind: str) -> str:
    """The one metric a kind is judged by (adaptive repeats, verdicts, compare's headline)."""
    s = spec(kind)
    return s.headline if s else "throughput"


def label(kind: str) -> str:
    s = spec(kind)
    return s.label if s else kind


def params_class(kind: str) -> type:
    return _known(kind).params


def same_figure(kind: str) -> frozenset[str]:
    """The parameters its params class declares (SAME_FIGURE) to change how long or how often a
    figure is measured, not the figure; none for a kind this kit does not know (every
    parameter then counts)."""
    s = spec(kind)
    return frozenset(getattr(s.params, "SAME_FIGURE", ())) if s else frozenset()


def added_defaults(kind: str) -> dict[str, Any]:
    """The defaults of its parameters that change the figure (all but SAME_FIGURE), for a result
    recorded before one of them existed: such a parameter is added with the kit's behaviour
    before it as its default, so a result that lacks it ran that default."""
    s = spec(kind)
    if s is None:
        return {}
    out: dict[str, Any] = {}
    same = same_figure(kind)
    for f in dataclasses.fields(s.params):
        if f.name in same:
            continue
        if f.default is not dataclasses.MISSING:
            out[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            out[f.name] = f.default_factory()
    return out


def worker_module(kind: str) -> str:
    return _known(kind).worker


def _known(kind: str) -> WorkloadSpec:
    """The spec of a kind the caller has checked (a validated recipe's, a planned run's)."""
    s = spec(kind)
    if s is None:
        raise KeyError(kind)
    return s
