"""A real worker's files (torchrun, two gloo processes) load through the typed bundle model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kit.model import load_bundle
from kit.worker.records import ResultRecord, SpecRecord
from tests.conftest import run_kit

pytestmark = pytest.mark.slow

RECIPE = """\
kit: 1
name: model-check
gpus: 2
repeats: 1
timeout_s: 120
variants: [p2p, no-p2p]
benchmarks:
  - kind: allreduce
    params: {max_bytes: 4096, factor: 4, iters: 2, warmup_iters: 1, trials: 2}
"""


def test_a_real_bundle_validates_and_the_worker_writes_only_known_fields(tmp_path: Path) -> None:
    recipe, out = tmp_path / "recipe.yaml", tmp_path / "bundle"
    recipe.write_text(RECIPE)
    proc = run_kit("reproduce", str(recipe), "--device", "cpu", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    data = load_bundle(out)
    assert data.results.status == "complete"
    assert [r.status for r in data.results.runs] == ["ok", "ok"]
    assert sorted(data.runs) == sorted(r.run_id for r in data.results.runs)
    for run_id, files in data.runs.items():
        assert files.result is not None and files.result.status == "ok"
        assert files.result.data.sizes and all(row.wrong == 0 for row in files.result.data.sizes)
        # the worker's own files hold no field its TypedDicts do not name
        raw = json.loads((out / "runs" / run_id / "result.json").read_text())
        assert set(raw) <= set(ResultRecord.__annotations__)
        spec = json.loads((out / "runs" / run_id / "spec.json").read_text())
        assert set(spec) == set(SpecRecord.__annotations__)
