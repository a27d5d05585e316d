"""A bundle's life around its runs, and a run's result from what its launch left behind.

Shared by the run engine (each launch, as it ends) and batch runtimes (kit slurm: the bundle
before the job, its results after): the header is written, a run reads, and a bundle is closed
the same whichever runtime ran it.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kit.bundle import Bundle, write_json
from kit.io import terminal
from kit.io.errors import InputError
from kit.model import RunResult, read_model
from kit.model.consistency import bundle_status
from kit.model.run import INTERRUPTED, Launch, NcclRecord, Network, failed_result
from kit.recipe import Recipe
from kit.run.plan import RunSpec
from kit.run.seal import seal_bundle
from kit.runtime.base import RunOutcome, tail
from kit.shared import files, stop
from kit.shared.nccl_log import parse_nccl_log, verdict
from kit.shared.p2p import p2p_off

console = terminal.console(highlight=False, soft_wrap=True)

_EXCEPTION_LINE = re.compile(r"^(?:\[rank\d+\]:\s*)?([A-Za-z_][\w.]*(?:Error|Exception)): (.+)$")


def worker_error(path: Path) -> str | None:
    """The first exception a rank raised, from the log (torchrun's own summary comes after it)."""
    if not path.is_file():
        return None
    for line in path.read_text(errors="replace").splitlines():
        match = _EXCEPTION_LINE.match(line.strip())
        if match and "ChildFailedError" not in match[1]:
            return f"{match[1]}: {match[2]}"[:300]
    return None


REJECTED = "result.rejected.json"
"""Where a worker's result.json that does not validate is kept (the loader reads result.json)."""


def worker_result(spec: RunSpec, run_dir: Path) -> tuple[RunResult | None, str | None]:
    """The worker's runs/<id>/result.json through the typed model; or why not.

    (None, None) when the worker wrote none. A file that does not validate (a crashed or hostile
    worker: not JSON, a NaN written as null where a number belongs, a link, another run's id) is
    (None, the loader's one-line message); it is moved aside to result.rejected.json (a link is
    removed), so the bundle holds no result.json its own loader refuses.
    """
    file = run_dir / files.RESULT
    if not os.path.lexists(file):
        return None, None
    try:
        result = read_model(run_dir, files.RESULT, RunResult, files.RESULT)
        if result.run_id != spec.run_id:
            raise InputError(f"{file}: run_id: expected {spec.run_id!r}, got {result.run_id!r}")
        return result, None
    except InputError as exc:
        with contextlib.suppress(OSError):  # a container's root-owned folder: left as it is
            if file.is_file() and not file.is_symlink():
                os.replace(file, run_dir / REJECTED)
            else:  # a link, FIFO or device: nothing to keep, and no bundle may hold one
                os.unlink(file)
        return None, str(exc)


def result_of(spec: RunSpec, run_dir: Path, outcome: RunOutcome, log_path: Path) -> RunResult:
    """The run's result: the worker's own file when it wrote a valid one, else a failed/timeout
    record (a result that does not validate is a failed run whose error says why, in one line),
    with what the driver saw added (kit.model.run.RunResult's driver fields)."""
    result, unreadable = worker_result(spec, run_dir)
    if result is None:
        if unreadable is not None:
            result = failed_result(spec, "failed", unreadable)
        elif outcome.interrupted:
            result = failed_result(spec, "failed", INTERRUPTED)
        elif outcome.timed_out:
            why = f"no result after the {spec.timeout_s:g} s timeout; stopped"
            result = failed_result(spec, "timeout", why)
        else:
            error = (
                outcome.error
                or f"worker exited with status {outcome.exit_code} and wrote no result"
            )
            cause = worker_error(log_path)
            result = failed_result(spec, "failed", f"{error}; {cause}" if cause else error)
    elif outcome.timed_out and result.status == "ok":
        result.status, result.error = "timeout", "the worker finished but did not exit in time"
    elif outcome.exit_code not in (0, None) and result.status == "ok":
        result.status = "failed"
        result.error = f"worker exited with status {outcome.exit_code} after writing its result"
    if spec.device == "cuda" and log_path.is_file():
        nccl = parse_nccl_log(log_path.read_text(errors="replace"))
        nccl["verdict"] = verdict(
            nccl,
            p2p_disabled=p2p_off(spec.env, nccl),
            single_node=outcome.nodes is None or len(outcome.nodes) < 2,
        )
        result.nccl = NcclRecord.model_validate(nccl)
    result.exit_code = outcome.exit_code
    result.launch = Launch(command=outcome.command, wall_s=outcome.wall_s)
    if result.wall_s is None:
        result.wall_s = outcome.wall_s
    if result.status != "ok":
        result.log_tail = tail(log_path)
    if outcome.nodes is not None:
        annotate_result(result, outcome)
    return result


def network_transport(result: RunResult) -> list[str]:
    """How the nodes talked: NCCL's NET transports from its log (NET/IB, NET/Socket), or gloo."""
    transports = result.nccl.transports if result.nccl else {}
    net = [k for k in transports if k.upper().startswith(("NET", "COLLNET"))]
    if net:
        return net
    if result.backend == "gloo" or result.device == "cpu":
        return ["gloo/TCP"]
    return []


def annotate_result(result: RunResult, outcome: RunOutcome) -> None:
    """Add the nodes to a run result: each node's status, which one failed, how they talked."""
    nodes = outcome.nodes or []
    result.nodes = nodes
    for node in nodes:  # what every node added: nodes.env, socket interface
        result.env = {**node.env, **result.env}
    if outcome.error and result.status != "ok":
        previous = result.error or ""
        if outcome.error not in previous:
            result.error = f"{outcome.error}; {previous}" if previous else outcome.error
        failed = next((n for n in nodes if n.status in ("failed", "vanished")), None)
        if failed and failed.log_tail:
            result.log_tail = f"[node {failed.node}]\n{failed.log_tail}"
    if result.started_at is None and nodes:  # the driver's record: no worker wrote one
        result.world_size = sum(n.nproc for n in nodes)
    result.network = Network(transport=network_transport(result))


def open_bundle(
    path: Path,
    recipe: Recipe,
    device: str,
    runtime: str,
    pinned: bool,
    smoke: bool,
    planned_repeats: int,
    command: str,
    planned_runs: int,
    reproduces: dict[str, Any] | None = None,
) -> Bundle:
    """The bundle with its recipe and results.json header (kit.model.Results): every runtime's."""
    header = {
        "recipe": recipe.name,
        "device": device,
        "runtime": runtime,
        "pinned": pinned,
        "smoke": smoke,
        "repeats": planned_repeats,
        "command": command,
        "planned_runs": planned_runs,
        "reproduces": reproduces,
    }
    return Bundle.create(path, recipe.resolved(), header)


def write_specs(bundle: Bundle, runs: list[RunSpec]) -> None:
    """runs/<id>/spec.json of each planned run: what its worker reads. A stop waits for each
    (a stop between the folder and its spec left runs/<id>/ empty, and the report, which
    reads a spec in every run folder, was not rendered)."""
    for spec in runs:
        with stop.held():
            write_json(bundle.run_dir(spec.run_id) / files.SPEC, spec.to_json())


def record_container(bundle: Bundle, environment: dict[str, Any] | None = None) -> None:
    """environment.json (the given record, else the one written) with the software the first
    finished run reported inside its container, where the record has none."""
    ok = [r for r in bundle.results.runs if r.status == "ok"]
    env = environment if environment is not None else bundle.read_json(files.ENVIRONMENT) or {}
    missing = bool(ok) and not env.get("container")
    if missing:
        env["container"] = ok[0].versions
    if missing or environment is not None:
        bundle.write_json(files.ENVIRONMENT, env)


def close_bundle(
    bundle: Bundle,
    planned: int,
    interrupted: bool = False,
    fault: bool = False,
    check: Callable[[Path], object] | None = None,
) -> str:
    """The status from the runs (never `complete` after an engine fault), finished, `check`ed
    (a batch runtime reads back what it wrote) and sealed whatever the check says; a stop
    signal while the status is written waits for it, and then the bundle is still sealed."""
    try:
        with stop.held():
            status = bundle_status(bundle.results.runs, planned, interrupted)
            if fault and status == "complete":
                status = "partial"
            bundle.finish(status)
        if check is not None:
            check(bundle.path)
    finally:
        seal(bundle)
    return status


def seal(bundle: Bundle) -> None:
    """Render the report (a failure there never costs the measurements) and write the manifest."""
    seal_bundle(bundle, lambda line: console.print(line, markup=False))
