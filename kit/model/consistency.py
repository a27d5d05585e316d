"""Whether results.json agrees with itself and with the bundle's recipe.

A sender can append a copy of a run, or invent one, and reseal: each record is valid on its own,
so the typed models take it, and the copy would count as one more sample in every statistic and
verdict. load_bundle calls `check_results` after reading results.json and recipe.yaml, so every
command that opens a bundle refuses such a bundle in one line that names the run.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from kit.errors import InputError
from kit.model.results import Results
from kit.recipe import Recipe

DEVICES = ("cuda", "cpu")
"""Where a run can run (kit reproduce --device)."""


def run_name(benchmark: str, variant: str, repeat: int) -> str:
    """A run's id as kit.run.plan names it: benchmark.variant.rN."""
    return f"{benchmark}.{variant}.r{repeat}"


def _timestamp(value: str, shown: str) -> None:
    try:
        datetime.fromisoformat(value)
    except ValueError:
        raise InputError(f"{shown}: expected an ISO 8601 timestamp, got {value[:40]!r}") from None


def repeat_bound(results: Results, recipe: Recipe) -> int:
    """How many repeats of a benchmark the bundle could hold: planned, or added adaptively."""
    adaptive = [a.max_repeats for a in results.adaptive.values()]
    return max(results.planned_repeats, recipe.repeats, recipe.max_repeats or 0, *adaptive)


def check_results(results: Results, recipe: Recipe, shown: Path, folders: set[str] | None) -> None:
    """Refuse (one line naming the run) runs that repeat, contradict or outrun the recipe.

    `folders`: the bundle's runs/ folder names, or None when it has no runs/ folder (bundles
    written before run folders were kept); a run recorded without its folder is refused.
    """
    _timestamp(results.created_at, f"{shown}: created_at")
    if results.device not in DEVICES:
        raise InputError(f"{shown}: device: expected one of {', '.join(DEVICES)}, "
                         f"got {results.device[:40]!r}")  # fmt: skip
    benchmarks = [b.label for b in recipe.benchmarks]
    variants = [v.name for v in recipe.resolved_variants()]
    bound = repeat_bound(results, recipe)
    seen: dict[str, int] = {}
    for i, run in enumerate(results.runs):
        where = f"{shown}: runs.{i} ({run.run_id[:80]!r})"
        if run.run_id in seen:
            raise InputError(f"{where}: the same run as runs.{seen[run.run_id]}; each run is "
                             "recorded once")  # fmt: skip
        seen[run.run_id] = i
        if run.benchmark not in benchmarks:
            raise InputError(f"{where}: benchmark {run.benchmark[:40]!r} is not one of the "
                             f"recipe's ({', '.join(benchmarks)})")  # fmt: skip
        if run.variant not in variants:
            raise InputError(f"{where}: variant {run.variant[:40]!r} is not one of the "
                             f"recipe's ({', '.join(variants)})")  # fmt: skip
        expected = run_name(run.benchmark, run.variant, run.repeat)
        if run.run_id != expected:
            raise InputError(f"{where}: run_id: expected {expected!r} (benchmark.variant.rN)")
        if run.repeat >= bound:
            raise InputError(f"{where}: repeat {run.repeat} is beyond the {bound} repeats this "
                             "bundle planned or could add")  # fmt: skip
        if run.device not in DEVICES:
            raise InputError(f"{where}: device: expected one of {', '.join(DEVICES)}, "
                             f"got {run.device[:40]!r}")  # fmt: skip
        if folders is not None and run.run_id not in folders:
            raise InputError(f"{where}: no runs/{run.run_id} folder; a recorded run has one")
