"""A fault in a run is a failed run, and a bundle's status comes from its runs alone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kit.io.errors import KitError
from kit.recipe import parse_recipe
from kit.run import engine
from kit.run import results as run_results
from kit.run.results import bundle_status
from kit.runtime.base import LaunchRequest, RunOutcome
from tests.conftest import results_model

RECIPE = """\
kit: 1
name: faults
gpus: 2
repeats: 2
variants: [p2p, no-p2p]
benchmarks:
  - kind: allreduce
    params: {max_bytes: 4096, factor: 4, iters: 1, warmup_iters: 0, trials: 1}
"""


class FaultyRuntime:
    """A runtime whose launches fail the way the Docker SDK does when a container is removed."""

    name, pinned, inventory = "fake", False, None

    def __init__(self, fail: set[int]) -> None:
        self.environment = {"name": "fake", "pinned": False, "runtime": "fake", "container": None}
        self.fail, self.calls, self.closed = fail, 0, False

    def run(self, req: LaunchRequest) -> RunOutcome:
        run_dir, nproc, env = req.run_dir, req.nproc, req.env
        self.calls += 1
        if self.calls in self.fail:
            raise LookupError("404 Client Error: No such container: 3f2a")
        spec = json.loads((run_dir / "spec.json").read_text())
        result = {"schema": 1, "run_id": spec["run_id"], "benchmark": spec["benchmark"],
                  "kind": spec["kind"], "variant": spec["variant"], "repeat": spec["repeat"],
                  "status": "ok", "error": None, "world_size": nproc, "device": "cpu",
                  "env": env, "metrics": {}, "data": {}}  # fmt: skip
        (run_dir / "result.json").write_text(json.dumps(result))
        return RunOutcome(0, False, False, 0.1, ["fake"])

    def close(self) -> None:
        self.closed = True


def _run(tmp_path: Path, monkeypatch, fail: set[int]):
    runtime = FaultyRuntime(fail)
    monkeypatch.setattr(engine, "make_runtime", lambda *a, **k: runtime)
    monkeypatch.setattr(run_results, "seal", lambda b: (b.path / "MANIFEST.sha256").write_text(""))
    options = engine.Options(device="cpu", out=tmp_path / "b")
    bundle, code = engine.run_recipe(parse_recipe(RECIPE, "faults.yaml"), options)
    return bundle, code, runtime


def test_a_run_whose_runtime_raises_is_a_failed_run_and_the_driver_goes_on(tmp_path, monkeypatch):
    bundle, code, runtime = _run(tmp_path, monkeypatch, fail={2})
    runs = bundle.results.runs
    assert code == 1 and runtime.calls == 4 and runtime.closed
    assert [r.status for r in runs] == ["ok", "failed", "ok", "ok"]
    assert runs[1].error == "runtime error: LookupError: 404 Client Error: No such container: 3f2a"
    written = json.loads((bundle.path / "results.json").read_text())["runs"]
    assert [r["status"] for r in written] == ["ok", "failed", "ok", "ok"]
    assert bundle.results.status == "partial"


def test_a_bundle_with_no_good_run_is_failed_never_complete(tmp_path, monkeypatch):
    bundle, code, _ = _run(tmp_path, monkeypatch, fail={1, 2, 3, 4})
    assert code == 1 and bundle.results.status == "failed"


def test_an_engine_fault_seals_the_bundle_and_is_one_line(tmp_path, monkeypatch):
    def broken(*a, **k):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(engine, "result_of", broken)
    with pytest.raises(
        KitError, match=r"the run stopped: RuntimeError: disk on fire; bundle .* is failed"
    ):
        _run(tmp_path, monkeypatch, fail=set())
    results = json.loads((tmp_path / "b" / "results.json").read_text())
    assert results["status"] == "failed" and results["error"] == "RuntimeError: disk on fire"


@pytest.mark.parametrize(
    ("statuses", "planned", "interrupted", "expected"),
    [
        (["ok", "ok"], 2, False, "complete"),
        (["ok"], 2, False, "partial"),  # a planned run never ran
        (["ok", "failed"], 2, False, "partial"),
        (["timeout", "timeout"], 2, False, "failed"),  # every attempt timed out: nothing measured
        (["failed", "failed"], 2, False, "failed"),
        ([], 4, False, "failed"),
        (["ok", "ok"], 4, True, "interrupted"),
    ],
)
def test_bundle_status_comes_from_the_runs(statuses, planned, interrupted, expected):
    runs = results_model([{"status": s} for s in statuses]).runs
    assert bundle_status(runs, planned, interrupted) == expected


def test_a_stop_while_the_environment_is_recorded_still_seals_what_finished(tmp_path, monkeypatch):
    """Ctrl-C after the last run, while environment.json is being completed: the bundle is still
    sealed (interrupted, its runs kept), then the interruption reaches the command."""

    def stopped(bundle):
        raise KeyboardInterrupt

    monkeypatch.setattr(engine, "record_container", stopped)
    with pytest.raises(KeyboardInterrupt):
        _run(tmp_path, monkeypatch, fail=set())
    sealed = tmp_path / "b" / "MANIFEST.sha256"
    assert sealed.is_file()
    written = json.loads((tmp_path / "b" / "results.json").read_text())
    assert written["status"] == "interrupted" and len(written["runs"]) == 4
