"""The worker's plain TypedDicts and the driver's pydantic models describe the same files."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import pytest
from pydantic import ValidationError

from kit.model import Metric, RunResult, RunSpec
from kit.recipe import load_recipe
from kit.run.plan import plan
from kit.shared.metrics import record
from kit.worker.records import MetricRecord, ResultRecord, SpecRecord
from tests.conftest import ROOT

DRIVER_ADDED = {"nccl", "exit_code", "launch", "log_tail", "nodes", "network", "recovered"}
"""Fields kit.run.results.result_of (and multi-node, Slurm) add to the worker's result."""


def aliases(model) -> set[str]:  # type: ignore[no-untyped-def]
    return {f.alias or name for name, f in model.model_fields.items()}


def test_spec_fields_agree() -> None:
    assert set(SpecRecord.__annotations__) == aliases(RunSpec)


def test_result_fields_agree() -> None:
    assert set(ResultRecord.__annotations__) == aliases(RunResult) - DRIVER_ADDED


def test_metric_fields_agree() -> None:
    assert set(MetricRecord.__annotations__) == set(Metric.model_fields)
    assert Metric.model_validate(record("busbw_peak", 1.5)).value == 1.5


@pytest.mark.parametrize("name", ["allreduce", "fsdp_llama", "gpt2_ddp", "resnet_ddp"])
def test_every_planned_spec_validates(name: str) -> None:
    """What kit.plan writes for the shipped recipes is a valid RunSpec, smoke and full."""
    path = ROOT / "recipes" / f"{name}.yaml"
    if not path.is_file():
        pytest.skip(f"{path.name} is not in this checkout")
    recipe = load_recipe(path)
    for smoke in (True, False):
        for spec in plan(recipe, "cuda", smoke):
            text = json.dumps(spec.to_json())
            model = RunSpec.model_validate(json.loads(text))
            assert model.dump() == spec.to_json()


def test_nan_and_infinity_are_refused_in_typed_fields() -> None:
    for bad in (math.nan, math.inf, -math.inf):
        with pytest.raises(ValidationError, match="finite number"):
            Metric.model_validate({"value": bad, "unit": "s", "higher_is_better": False})


def _modules_after(statement: str) -> set[str]:
    code = f"import sys; {statement}; print(' '.join(sorted(sys.modules)))"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    return set(out.stdout.split())


def test_the_model_imports_neither_cli_nor_runtime() -> None:
    loaded = _modules_after("import kit.model, kit.model.schema")
    banned = {m for m in loaded if m.split(".")[:2] in (["kit", "cli"], ["kit", "runtime"])}
    banned |= {
        m for m in loaded if m in ("kit.run.engine", "kit.run.rerun", "kit.run.slurm", "docker")
    }
    assert banned == set()


def test_the_worker_records_need_no_pydantic() -> None:
    loaded = _modules_after("import kit.worker.records")
    assert "pydantic" not in loaded and not any(m.startswith("kit.model") for m in loaded)
