"""Whether a known machine's result measured the same workload as a bundle's: the same kind and
every parameter that changes the figure equal. Each workload declares the parameters that only
change how long or how often a figure is measured (its params class's SAME_FIGURE, read through
kit.workloads.registry.same_figure); those may differ, and are named where the reference is
shown. A reference stored without its parameters (before references kept them) is matched as it
was, by the hash of all of them (kit.refs.store.signature). A parameter that changes the figure,
added to a kind after a reference was recorded, is compared where the reference lacks it as its
default: the kit adds one with its behaviour before it as the default
(kit.workloads.registry.added_defaults)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from kit.workloads.registry import added_defaults, same_figure

WINDOW_ONLY = ("min_window_s",)
"""Parameters that say how long a window is timed, not what runs in it: never in the signature,
and named apart where a reference is shown (kit.refs.store.unlike)."""

_ABSENT = object()


def differing(mine: Mapping[str, Any] | None, theirs: Mapping[str, Any] | None) -> list[str]:
    """The parameter names whose values differ, one side lacking it included (sorted)."""
    a, b = mine or {}, theirs or {}
    return sorted(k for k in {*a, *b} if _canon(a.get(k, _ABSENT)) != _canon(b.get(k, _ABSENT)))


def _canon(value: Any) -> Any:
    """A value as the signature compares it (canonical JSON), so 1 and 1.0 stay what JSON says."""
    return value if value is _ABSENT else json.dumps(value, sort_keys=True)


def same_workload(kind: str, here: Mapping[str, Any], there: Mapping[str, Any]) -> list[str] | None:
    """None when a reference's benchmark entry (`there`) did not measure the workload of this
    bundle's entry (`here`, both as kit.refs.store.reference_of writes them); else the words for
    the parameters that differ without changing the figure ([] when none do)."""
    if here.get("kind") != kind or there.get("kind") != kind:
        return None
    mine, theirs = here.get("params"), there.get("params")
    if not isinstance(mine, Mapping) or not isinstance(theirs, Mapping):
        return [] if here.get("signature") == there.get("signature") else None
    before = added_defaults(kind)
    mine, theirs = {**before, **mine}, {**before, **theirs}
    names = [k for k in differing(mine, theirs) if k not in WINDOW_ONLY]
    if any(k not in same_figure(kind) for k in names):
        return None
    return [_words(k, mine.get(k, _ABSENT), theirs.get(k, _ABSENT)) for k in names]


def _words(name: str, mine: Any, theirs: Any) -> str:
    """ "iters 100 here against 20 there", or "latency true here, not recorded there"."""

    def shown(v: Any) -> str:
        return json.dumps(v) if not isinstance(v, str) else v

    if theirs is _ABSENT:
        return f"{name} {shown(mine)} here, not recorded there"
    if mine is _ABSENT:
        return f"{name} not recorded here, {shown(theirs)} there"
    return f"{name} {shown(mine)} here against {shown(theirs)} there"
