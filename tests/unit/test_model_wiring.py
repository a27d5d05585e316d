"""The typed model wired in: a worker's result, the writers, and a rerun read through kit.model."""

from __future__ import annotations

import json
import math
import os
import subprocess
from pathlib import Path

import pytest

from kit.bundle import Bundle, write_json, write_manifest
from kit.model import RunResult, read_model
from kit.recipe import load_recipe
from kit.run.plan import RunSpec, plan
from kit.run.results import REJECTED, result_of
from kit.runtime.base import RunOutcome
from kit.shared.files import RESULT_SCHEMA
from kit.shared.metrics import record
from kit.worker import common
from tests.conftest import run_kit

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "recipes" / "allreduce.yaml"


def first_spec() -> RunSpec:
    return plan(load_recipe(RECIPE), "cpu", True)[0]


def worker_record(spec: RunSpec, **extra: object) -> dict:
    """A result as a worker writes it (kit.worker.records.ResultRecord)."""
    return {
        "schema": RESULT_SCHEMA, "run_id": spec.run_id, "benchmark": spec.benchmark,
        "kind": spec.kind, "variant": spec.variant, "repeat": spec.repeat, "status": "ok",
        "device": "cpu", "metrics": {"busbw_peak": record("busbw_peak", 1.5)}, **extra,
    }  # fmt: skip


def outcome(exit_code: int | None = 0) -> RunOutcome:
    return RunOutcome(exit_code, False, False, 1.0, ["python", "-m", "kit.worker"])


def one_run(tmp_path: Path, text: str | None) -> tuple[RunResult, Path]:
    spec = first_spec()
    run_dir = tmp_path / "runs" / spec.run_id
    run_dir.mkdir(parents=True)
    if text is not None:
        (run_dir / "result.json").write_text(text)
    log = tmp_path / "run.log"
    log.write_text("")
    return result_of(spec, run_dir, outcome(), log), run_dir


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ('{"schema": 1, "run_id": ', "not valid JSON"),
        ("[1, 2]", "expected a JSON object"),
        ("BAD_METRIC", "metrics.busbw_peak.value:"),
        ("OTHER_RUN", "run_id: expected"),
        ("NAN", "not valid JSON (NaN is not a number JSON allows)"),
    ],
)
def test_a_malformed_worker_result_is_a_failed_run_with_one_line(
    tmp_path: Path, text: str, why: str
) -> None:
    spec = first_spec()
    record = worker_record(spec)
    if text == "BAD_METRIC":
        record["metrics"]["busbw_peak"]["value"] = "fast"
        text = json.dumps(record)
    elif text == "OTHER_RUN":
        text = json.dumps({**record, "run_id": "other.run.r0"})
    elif text == "NAN":
        text = json.dumps({**record, "wall_s": math.nan})  # Python's json writes NaN
    result, run_dir = one_run(tmp_path, text)
    assert result.status == "failed" and result.error is not None
    assert "\n" not in result.error and why in result.error
    assert result.error.startswith(str(run_dir / "result.json"))
    # the worker's file is kept aside, where the loader does not read it
    assert not (run_dir / "result.json").exists() and (run_dir / REJECTED).read_text() == text
    # the driver's record of it, as results.json holds it, reads back as the same valid result
    assert RunResult.model_validate(result.dump(as_written=True)) == result


def test_a_result_that_is_a_link_is_refused_and_removed(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text(json.dumps(worker_record(first_spec())))
    spec = first_spec()
    run_dir = tmp_path / "runs" / spec.run_id
    run_dir.mkdir(parents=True)
    (run_dir / "result.json").symlink_to(elsewhere)
    log = tmp_path / "run.log"
    log.write_text("")
    result = result_of(spec, run_dir, outcome(), log)
    assert result.status == "failed" and "is a symlink" in (result.error or "")
    assert not os.path.lexists(run_dir / "result.json") and elsewhere.is_file()


def test_a_valid_worker_result_is_kept_as_written(tmp_path: Path) -> None:
    spec = first_spec()
    result, _ = one_run(tmp_path, json.dumps(worker_record(spec)))
    assert result.status == "ok" and result.metrics["busbw_peak"].value == 1.5
    assert result.exit_code == 0 and result.launch is not None and result.launch.wall_s == 1.0
    written = result.dump(as_written=True)  # what results.json holds (kit.bundle.Bundle.save)
    assert "telemetry" not in written  # no defaults filled in: the record is what was written
    # the worker's fields, then the driver's (wall_s: none written, so the launch's)
    assert list(written) == [*worker_record(spec), "wall_s", "exit_code", "launch"]


def test_a_nan_loss_is_written_as_null_and_loads(tmp_path: Path) -> None:
    """The worker's writer turns NaN/inf into null, so the loader takes what the kit wrote."""
    spec = first_spec()
    run_dir = tmp_path / "runs" / spec.run_id
    run_dir.mkdir(parents=True)
    data = {"loss": [2.5, math.nan, math.inf], "loss_last": math.nan, "unit": "tokens"}
    common.write_json(run_dir / "result.json", worker_record(spec, data=data))
    text = (run_dir / "result.json").read_text()
    assert "NaN" not in text and "Infinity" not in text
    loaded = read_model(run_dir, "result.json", RunResult, "result.json")
    assert loaded.data.model_extra["loss"] == [2.5, None, None]
    log = tmp_path / "run.log"
    log.write_text("")
    assert result_of(spec, run_dir, outcome(), log).status == "ok"


def test_the_bundle_writer_writes_no_nan(tmp_path: Path) -> None:
    write_json(tmp_path / "x.json", {"a": [math.nan, -math.inf, 1.0], "b": {"c": math.inf}})
    assert json.loads((tmp_path / "x.json").read_text()) == {
        "a": [None, None, 1.0],
        "b": {"c": None},
    }


def sealed_bundle(path: Path, environment: object) -> Path:
    recipe = load_recipe(RECIPE)
    header = {"recipe": recipe.name, "device": "cpu", "runtime": "host", "pinned": False,
              "smoke": True, "repeats": 1}  # fmt: skip
    bundle = Bundle.create(path, recipe.resolved(), header)
    bundle.finish("complete")
    bundle.write_json("environment.json", environment)
    bundle.write_json("hardware.json", {"schema": 1, "host": {"hostname": "h"}, "gpus": []})
    write_manifest(path)
    return path


def rerun(bundle: Path, out: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200"}
    return run_kit("reproduce", str(bundle), "--out", str(out), env=env, cwd=ROOT, timeout=120)


@pytest.mark.parametrize(
    ("environment", "why"),
    [
        ({"runtime": 5, "pinned": False}, "environment.json: runtime: expected a valid string"),
        ({"pinned": False}, "environment.json: runtime: required field is missing"),
        (["host"], "environment.json: expected a JSON object, got list"),
        ({"runtime": "docker", "pinned": True, "name": "../../elsewhere"},
         "environment.json: name '../../elsewhere': an environment of this kit"),
    ],
)  # fmt: skip
def test_rerun_of_a_bundle_with_a_malformed_environment_is_one_line(
    tmp_path: Path, environment: object, why: str
) -> None:
    bundle = sealed_bundle(tmp_path / "b", environment)
    proc = rerun(bundle, tmp_path / "out")
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and why in lines[0], proc.stderr
    assert not (tmp_path / "out").exists()  # refused before anything was created


def test_a_recorded_gpu_run_is_recorded_again_the_same(tmp_path: Path) -> None:
    """The typed driver against what the dict driver recorded on H200s: each run's worker file,
    NCCL log and launch through result_of give the committed results.json run, field for field
    (NCCL's record with the channel counts this kit's parser also reads), and what
    Bundle.save writes of it reads back as the same result."""
    from kit.model import load_bundle
    from kit.shared.nccl_log import parse_nccl_log

    root = ROOT / "reports" / "examples" / "h200x2-allreduce"
    recorded = load_bundle(root).results.runs
    assert {r.variant for r in recorded} == {"p2p", "no-p2p"}
    for i, rec in enumerate(recorded):
        assert rec.launch is not None and rec.nccl is not None
        spec_file = json.loads((root / "runs" / rec.run_id / "spec.json").read_text())
        spec = RunSpec.model_validate({**spec_file, "timeout_s": 600.0})
        run_dir = tmp_path / str(i)
        run_dir.mkdir()
        (run_dir / "result.json").write_bytes(
            (root / "runs" / rec.run_id / "result.json").read_bytes()
        )
        launch = RunOutcome(
            rec.exit_code, False, False, rec.launch.wall_s or 0.0, rec.launch.command
        )
        log = root / "logs" / f"{rec.run_id}.log"
        result = result_of(spec, run_dir, launch, log)
        assert result.model_copy(update={"nccl": rec.nccl}) == rec
        assert result.nccl is not None and result.nccl.verdict == rec.nccl.verdict
        assert result.nccl.transports == rec.nccl.transports and result.nccl.transports
        channels = parse_nccl_log(log.read_text())["channels"]
        assert result.nccl.dump(as_written=True) == {
            **rec.nccl.dump(as_written=True),
            "channels": channels,
        }
        assert RunResult.model_validate(result.dump(as_written=True)) == result
