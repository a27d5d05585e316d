"""Whether results.json agrees with itself and with the bundle's recipe.

A sender can append a copy of a run, or invent one, and reseal: each record is valid on its own,
so the typed models take it, and the copy would count as one more sample in every statistic and
verdict. The same holds for a record that contradicts the rest: a bandwidth below zero, a metric
in another unit or direction than the catalog's (or than another run's), a run on another number
of processes than the bundle started, a bundle finished before it began, "complete" without its
runs. load_bundle calls `check_results` after reading results.json and recipe.yaml, so every
command that opens a bundle refuses such a bundle in one line that names the run.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from pathlib import Path

from kit.io.errors import InputError
from kit.model.hardware import Hardware
from kit.model.results import Results
from kit.model.run import RunResult
from kit.recipe import Recipe
from kit.shared import metrics as catalog

DEVICES = ("cuda", "cpu")
"""Where a run can run (kit reproduce --device)."""


def run_name(benchmark: str, variant: str, repeat: int) -> str:
    """A run's id as kit.run.plan names it: benchmark.variant.rN."""
    return f"{benchmark}.{variant}.r{repeat}"


CLOCK_SKEW_S = 60.0
"""How far the clock of a multi-node run's worker (its started_at, taken on another node) may
read ahead of the driver's (results.json finished_at) before the two are called a
contradiction; on one host both read one clock."""


def _timestamp(value: str, shown: str) -> datetime:
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        raise InputError(f"{shown}: expected an ISO 8601 timestamp, got {value[:40]!r}") from None


def _seconds(earlier: datetime, later: datetime) -> float | None:
    """later - earlier in seconds; None when one names its time zone and the other does not."""
    if (earlier.tzinfo is None) != (later.tzinfo is None):
        return None
    return (later - earlier).total_seconds()


def bundle_status(runs: list[RunResult], planned: int, interrupted: bool = False) -> str:
    """A bundle's status, from its runs alone: what a crash or a lucky path cannot bend.

    complete: every planned run is there and ok; failed: no run is ok (also when every attempt
    timed out); partial: some but not all; interrupted: stopped before its plan ended (Ctrl-C,
    SIGTERM, SIGHUP), whatever finished. The driver writes it (kit.run.results.close_bundle);
    check_results refuses a results.json whose "complete" these runs contradict.
    """
    if interrupted:
        return "interrupted"
    ok = sum(1 for r in runs if r.status == "ok")
    if ok == 0:
        return "failed"
    if ok == len(runs) and len(runs) >= planned:
        return "complete"
    return "partial"


def repeat_bound(results: Results, recipe: Recipe) -> int:
    """How many repeats of a benchmark the bundle could hold: planned, or added adaptively."""
    adaptive = [a.max_repeats for a in results.adaptive.values()]
    return max(results.planned_repeats, recipe.repeats, recipe.max_repeats or 0, *adaptive)


def check_results(
    results: Results, recipe: Recipe, shown: Path, nprocs: Mapping[str, int] | None
) -> None:
    """Refuse (one line naming the run) runs that repeat, contradict or outrun the recipe, and
    a results.json that contradicts itself (check_header, check_run).

    `nprocs`: the bundle's runs/ folders, each with the processes its spec.json started, or
    None when it has no runs/ folder (bundles written before run folders were kept); a run
    recorded without its folder is refused.
    """
    if results.device not in DEVICES:
        raise InputError(
            f"{shown}: device: expected one of {', '.join(DEVICES)}, got {results.device[:40]!r}"
        )
    kinds = {b.label: b.kind for b in recipe.benchmarks}
    benchmarks = list(kinds)
    variants = {b: [v.name for v in recipe.variants_of(b)] for b in benchmarks}
    bound = repeat_bound(results, recipe)
    seen: dict[str, int] = {}
    for i, run in enumerate(results.runs):
        where = f"{shown}: runs.{i} ({run.run_id[:80]!r})"
        if run.run_id in seen:
            raise InputError(
                f"{where}: the same run as runs.{seen[run.run_id]}; each run is recorded once"
            )
        seen[run.run_id] = i
        if run.benchmark not in benchmarks:
            raise InputError(
                f"{where}: benchmark {run.benchmark[:40]!r} is not one of the "
                f"recipe's ({', '.join(benchmarks)})"
            )
        if run.kind != kinds[run.benchmark]:
            raise InputError(
                f"{where}: kind {run.kind[:40]!r}, but the recipe's benchmark "
                f"{run.benchmark!r} is {kinds[run.benchmark]!r}"
            )
        if run.variant not in variants[run.benchmark]:
            raise InputError(
                f"{where}: variant {run.variant[:40]!r} is not one of the "
                f"recipe's for {run.benchmark!r} ({', '.join(variants[run.benchmark])})"
            )
        expected = run_name(run.benchmark, run.variant, run.repeat)
        if run.run_id != expected:
            raise InputError(f"{where}: run_id: expected {expected!r} (benchmark.variant.rN)")
        if run.repeat >= bound:
            raise InputError(
                f"{where}: repeat {run.repeat} is beyond the {bound} repeats this "
                "bundle planned or could add"
            )
        if run.device not in DEVICES:
            raise InputError(
                f"{where}: device: expected one of {', '.join(DEVICES)}, got {run.device[:40]!r}"
            )
        if nprocs is not None and run.run_id not in nprocs:
            raise InputError(f"{where}: no runs/{run.run_id} folder; a recorded run has one")
        started = nprocs[run.run_id] if nprocs is not None else recipe.gpus
        check_run(run, where, started)
    check_agreement(results.runs, shown)
    check_header(results, recipe, shown)


def check_header(results: Results, recipe: Recipe, shown: Path) -> None:
    """The header against itself and its runs: finished after created (and after every run
    started), and "complete" only with every planned run there and ok, and no run beyond the
    plan but those adaptive repeats added (results.adaptive); and the recipe it names is the
    recipe.yaml it holds."""
    if results.recipe != recipe.name:
        raise InputError(
            f"{shown}: it names the recipe {results.recipe[:60]!r}, but "
            f"its recipe.yaml is {recipe.name!r}"
        )
    created = _timestamp(results.created_at, f"{shown}: created_at")
    if results.finished_at is not None:
        finished = _timestamp(results.finished_at, f"{shown}: finished_at")
        if (_seconds(created, finished) or 0) < 0:
            raise InputError(
                f"{shown}: finished_at {results.finished_at[:40]} is before "
                f"created_at {results.created_at[:40]}"
            )
        for i, run in enumerate(results.runs):
            if run.started_at is None:
                continue
            began = _timestamp(run.started_at, f"{shown}: runs.{i}.started_at")
            skew = CLOCK_SKEW_S if run.nodes else 0.0  # one host, one clock
            if (_seconds(began, finished) or 0) < -skew:
                raise InputError(
                    f"{shown}: finished_at {results.finished_at[:40]} is before "
                    f"runs.{i} started ({run.started_at[:40]})"
                )
    if results.status == "complete" and results.planned_runs:  # 0: written before the count was
        status = bundle_status(results.runs, results.planned_runs)
        if status != "complete":
            raise InputError(
                f"{shown}: status complete, but its {len(results.runs)} run(s) of "
                f"{results.planned_runs} planned make it {status}"
            )
        added = sum(
            len(recipe.variants_of(name)) * max(0, a.repeats - a.planned)
            for name, a in results.adaptive.items()
        )  # a repeat adds a run per variant the benchmark runs
        if len(results.runs) > results.planned_runs + added:
            raise InputError(
                f"{shown}: {len(results.runs)} runs, more than the {results.planned_runs} "
                f"planned and the {added} adaptive repeats added"
            )


def check_run(run: RunResult, where: str, started: int) -> None:
    """One run against itself and its launch: timestamps in order, metrics as the catalog
    defines them (unit, direction, sign), and a finished run on the processes the driver
    started (its spec.json's, or the nodes' together)."""
    if run.started_at is not None and run.finished_at is not None:
        began = _timestamp(run.started_at, f"{where}: started_at")
        ended = _timestamp(run.finished_at, f"{where}: finished_at")
        if (_seconds(began, ended) or 0) < 0:
            raise InputError(
                f"{where}: finished_at {run.finished_at[:40]} is before "
                f"started_at {run.started_at[:40]}"
            )
    for name, m in run.metrics.items():
        entry = catalog.metric(name)
        if entry is None:
            continue  # another kit's metric: check_agreement holds it to the other runs
        if m.value < 0 and not entry.signed:
            raise InputError(
                f"{where}: metrics.{name[:40]}: {m.value:g} is below zero, which "
                f"{entry.label} cannot be"
            )
        if m.unit not in entry.units() or m.higher_is_better != entry.higher_is_better:
            raise InputError(
                f"{where}: metrics.{name[:40]}: {m.unit[:20]!r}, "
                f"{'higher' if m.higher_is_better else 'lower'} is better; the metric is "
                f"{' or '.join(entry.units())}, {entry.direction}"
            )
    if run.status == "ok" and run.world_size is not None:
        expected = sum(n.nproc for n in run.nodes) if run.nodes else started
        if run.world_size != expected:
            raise InputError(
                f"{where}: world_size {run.world_size}, but the driver started "
                f"{expected} process(es) for it"
            )


def check_agreement(runs: list[RunResult], shown: Path) -> None:
    """Every run of a benchmark records a metric in one unit and direction, and every finished
    run of the bundle ran on as many processes (variants differ in GPUs, never in count)."""
    seen: dict[tuple[str, str], tuple[str, bool, int]] = {}
    worlds: dict[int, int] = {}
    for i, run in enumerate(runs):
        for name, m in run.metrics.items():
            first = seen.setdefault((run.benchmark, name), (m.unit, m.higher_is_better, i))
            if first[:2] != (m.unit, m.higher_is_better):
                raise InputError(
                    f"{shown}: runs.{i}: metrics.{name[:40]}: {m.unit[:20]!r} "
                    f"(higher is better: {m.higher_is_better}), runs.{first[2]} "
                    f"has {first[0][:20]!r} ({first[1]})"
                )
        if run.status == "ok" and run.world_size is not None:
            worlds.setdefault(run.world_size, i)
    if len(worlds) > 1:
        (a, i), (b, j) = list(worlds.items())[:2]
        raise InputError(
            f"{shown}: runs.{i} ran on {a} processes, runs.{j} on {b}; every run "
            "of a bundle runs on as many"
        )


def check_hardware(results: Results, hardware: Hardware | None, shown: Path) -> None:
    """hardware.json against the runs of a one-machine bundle: the GPUs NVML listed must hold
    every finished CUDA run's processes (one GPU each), and a run's GPU (its worker's
    versions.gpu) must be one of them. A bundle resealed with a GPU cut from hardware.json, or
    with runs of another GPU model, is refused here rather than judged as the machine it is not.
    Multi-node and Slurm bundles keep each node's GPUs in `nodes`; NVML that failed lists none."""
    if hardware is None or hardware.nodes or hardware.nvml_error is not None:
        return
    names = {g.name for g in hardware.gpus if g.name}
    for i, run in enumerate(results.runs):
        if run.device != "cuda" or run.nodes or run.status != "ok":
            continue
        where = f"{shown}: runs.{i} ({run.run_id[:80]!r})"
        if run.world_size is not None and run.world_size > len(hardware.gpus):
            raise InputError(
                f"{where}: ran on {run.world_size} GPU processes, but hardware.json "
                f"lists {len(hardware.gpus)} GPU(s)"
            )
        gpu = run.versions.get("gpu")
        if gpu and names and gpu not in names:
            raise InputError(
                f"{where}: ran on {gpu[:60]!r}, which hardware.json does not list "
                f"({', '.join(sorted(n[:60] for n in names))})"
            )
