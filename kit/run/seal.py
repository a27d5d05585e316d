"""Sealing a bundle: render its report, then write its manifest; and `kit seal`, which finishes
the seal of a bundle an interruption left open, so nothing measured is ever stranded.

An interrupted `kit reproduce` (a second Ctrl-C while the report renders, a full disk, a crash)
can leave a bundle with finished runs, status `running`, no manifest and temporary files.
`kit seal BUNDLE` removes the temporary files, adds every run whose result the worker wrote
but the driver never recorded, records the interruption in results.json (`sealed_after`) and
seals the bundle, so it can be verified, reported, compared and rerun.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kit.bundle import MANIFEST, Bundle, write_manifest
from kit.bundle.intake import missing_files
from kit.io.errors import InputError, KitError
from kit.io.safe import scan
from kit.model import RunResult, RunSpec, SealedAfter, load_bundle, read_model
from kit.model.run import failed_result
from kit.runtime.heartbeat import FILE as HEARTBEAT
from kit.shared import files, stop
from kit.shared.atomic import TMP_SUFFIX
from kit.shared.jsonio import now_iso

try:  # the report's libraries (matplotlib, jinja2) may be absent where only the runs happen
    from kit.report.render import PdfNotWritten, render_bundle
except ImportError as _missing:  # the bundle is sealed all the same; `kit report` renders it later
    render_bundle = None

    class PdfNotWritten(KitError):  # nothing raises it where the report cannot be imported
        pass

    RENDER_UNAVAILABLE = f"{type(_missing).__name__}: {_missing}"


def seal_bundle(bundle: Bundle, warn: Callable[[str], Any]) -> None:
    """Render the report (a failure there never costs the measurements), then the manifest.

    Even an interruption while rendering (Ctrl-C, a stop signal) leaves the manifest written;
    the interruption then goes on to the command, which exits 130 (SIGINT) or 128 + the signal.
    """
    try:
        if render_bundle is None:
            raise KitError(f"the report's libraries are missing here ({RENDER_UNAVAILABLE})")
        render_bundle(bundle)
    except PdfNotWritten as exc:  # complete on its own: what was written and how to get the PDF
        warn(f"kit: warning: {exc}")
    except KitError as exc:
        warn(f"kit: warning: report not rendered: {exc}")
    except KeyboardInterrupt:
        warn("kit: warning: report not rendered: interrupted; `kit report` renders it later")
        raise  # after the manifest (finally): the command still exits as interrupted (130)
    except Exception as exc:  # the measurements matter more than the page
        warn(f"kit: warning: report not rendered: {type(exc).__name__}: {exc}")
    finally:
        if stop.pending is not None and bundle.results.status != "interrupted":
            # stopped while sealing (its exception may have been swallowed by a library): the
            # bundle says so, never "complete" for a command that exits 128 + the signal
            bundle.results.status = "interrupted"
            bundle.save()
            # a page rendered before the stop says what results.json no longer does: it goes,
            # and `kit report` renders it anew (the interruption line says the bundle is sealed)
            for page in ("report.html", "report.pdf"):
                (bundle.path / page).unlink(missing_ok=True)
        write_manifest(bundle.path)


DRIVER_DIED = (
    "finished after its driver was killed (its heartbeat file was left): nobody watched the run "
    "to its end, so the worker's result is kept but never counted as a measured ok run"
)


def _stray_results(bundle: Bundle, known: set[str], orphaned: set[str]) -> list[RunResult]:
    """Results the workers wrote (runs/<id>/result.json) that results.json does not hold; a run
    in `orphaned` (its driver died while it went) is recovered as failed, never "ok"."""
    found = []
    for name in scan(bundle.path).files:
        parts = name.split("/")
        if len(parts) != 3 or parts[0] != files.RUNS or parts[2] != files.RESULT:
            continue
        if parts[1] in known:
            continue
        try:  # only a valid result is recovered; any other (a schema of another kit, a file
            # too large to read) is refused: sealing it would make a bundle no reader takes
            result = read_model(bundle.path, name, RunResult, files.RESULT)
        except InputError as e:
            raise InputError(
                f"{e}; kit seal seals only what every reader of the bundle accepts"
            ) from None
        if result.run_id == parts[1]:
            result.recovered = "recorded by `kit seal`: the driver stopped before recording it"
            if parts[1] in orphaned:
                result.status, result.error = "failed", DRIVER_DIED
                result.recovered = "recorded by `kit seal`: finished after its driver was killed"
            found.append(result)
    return found


IN_FLIGHT = (
    "did not run to the end: the driver was killed while this run went and no result was "
    "written; it contributes no number"
)


def _in_flight(bundle: Bundle, orphaned: set[str], recorded: set[str]) -> list[RunResult]:
    """Runs the killed driver had launched (its heartbeat file was left, runs/<id>/spec.json
    written) that wrote no result: recorded as failed, "did not run to the end", from their
    spec, so the bundle says which benchmark and variant was stopped instead of losing it."""
    found = []
    for run_id in sorted(orphaned - recorded):
        name = f"{files.RUNS}/{run_id}/{files.SPEC}"
        if not (bundle.path / name).is_file():
            continue
        try:
            spec = read_model(bundle.path, name, RunSpec, files.SPEC)
        except InputError as e:
            raise InputError(
                f"{e}; kit seal seals only what every reader of the bundle accepts"
            ) from None
        if spec.run_id != run_id:
            continue
        result = failed_result(
            spec,
            "failed",
            IN_FLIGHT,
            recovered="recorded by `kit seal`: the run was in flight when its driver was killed",
        )
        found.append(result)
    return found


def _reason(before: str, orphaned: set[str]) -> str:
    """What happened, in the words `kit seal` prints and results.json keeps."""
    if orphaned:
        return (
            f"the driver was killed during {', '.join(sorted(orphaned))} (its heartbeat file "
            "was left)"
        )
    if before == "running":
        return "the run stopped before its end was recorded"
    return "the seal of this bundle was interrupted (no manifest was written)"


def recover(path: Path, warn: Callable[[str], Any]) -> tuple[Bundle, dict[str, Any]]:
    """Seal a bundle whose seal was interrupted; returns it and what was recorded about it."""
    path = Path(path)
    bundle = Bundle.load(path)  # refuses links, FIFOs, devices and malformed results.json
    if os.path.lexists(path / MANIFEST):
        raise InputError(f"{path}: already sealed ({MANIFEST}); `kit verify {path}` checks it")
    results = bundle.results  # typed before anything is touched: a malformed file is one line
    absent = [n for n in missing_files(path) if n != MANIFEST]
    if absent:  # a run stopped before it recorded the machine: no bundle any reader would take
        raise InputError(
            f"{path}: no {', '.join(absent)} (every bundle holds it); the run stopped before "
            "recording it, so there is nothing to seal: run the recipe again"
        )
    _readable(path)  # before anything is touched: what no reader takes is never sealed
    # a write cut short (.tmp), and the heartbeat a killed driver could not remove
    removed = [
        n
        for n in scan(path).files
        if n.endswith(TMP_SUFFIX)
        or (n.startswith(f"{files.RUNS}/") and n.endswith("/" + HEARTBEAT))
    ]
    memo = "/" + files.HASH_MEMO
    memos = [n for n in scan(path).files if n.startswith(f"{files.RUNS}/") and n.endswith(memo)]
    for name in memos:  # the library-hash memo a killed driver left: a cache, never a record
        os.unlink(path / name)
    for name in removed:  # a write cut short; the file it was to replace holds the last whole one
        os.unlink(path / name)
    orphaned = {n.split("/")[1] for n in removed if n.endswith("/" + HEARTBEAT)}
    recovered = _stray_results(bundle, {r.run_id for r in results.runs}, orphaned)
    results.runs.extend(recovered)
    stopped = _in_flight(bundle, orphaned, {r.run_id for r in results.runs})
    results.runs.extend(stopped)
    before = results.status
    note = {
        "at": now_iso(),
        "by": "kit seal",
        "status_before": before,
        "removed_temporary_files": removed,
        "recovered_runs": [r.run_id for r in recovered if r.run_id not in orphaned],
        "after_driver_died": [r.run_id for r in recovered if r.run_id in orphaned],
        "in_flight_runs": [r.run_id for r in stopped],
        "reason": _reason(before, orphaned),
    }
    results.sealed_after = SealedAfter.model_validate(note)
    if before == "running":
        results.status = "interrupted"
        results.finished_at = results.finished_at or now_iso()
    original = (path / files.RESULTS).read_bytes()
    bundle.save()
    try:
        _readable(path)  # the runs recovered above, as every reader will take them
    except InputError:
        (path / files.RESULTS).write_bytes(original)
        raise
    seal_bundle(bundle, warn)
    return bundle, note


def _readable(path: Path) -> None:
    """The bundle as every reader loads it (kit.model.load_bundle): run files of another
    kit's schema, a NaN, a run folder without its spec are refused here, not sealed into a
    bundle that `kit verify`, `kit report` and `kit compare` then refuse."""
    try:
        load_bundle(path)
    except InputError as e:
        raise InputError(
            f"{e}; kit seal seals only what every reader of the bundle accepts"
        ) from None
