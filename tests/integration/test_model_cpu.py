"""A real worker's files (torchrun, two gloo processes) load through the typed bundle model."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from kit.model import load_bundle
from kit.worker.records import ResultRecord, SpecRecord
from tests.conftest import allreduce_recipe, run_kit

pytestmark = pytest.mark.slow

RECIPE = allreduce_recipe(
    "model-check",
    "max_bytes: 4096, factor: 4, iters: 2, warmup_iters: 1, trials: 2",
    variants="p2p, no-p2p",
)


def test_a_real_bundle_validates_and_the_worker_writes_only_known_fields(
    cpu_allreduce_bundle: Path,
) -> None:
    """The suite's shared CPU bundle (4 runs); a rerun bundle's own fields are checked where the
    suite reruns it (test_rerun_compare_cpu.py's test_rerun_then_compare)."""
    out = cpu_allreduce_bundle  # read only
    data = load_bundle(out)
    assert data.results.status == "complete"
    assert [r.status for r in data.results.runs] == ["ok"] * 4
    assert sorted(data.runs) == sorted(r.run_id for r in data.results.runs)
    for run_id, files in data.runs.items():
        assert files.result is not None and files.result.status == "ok"
        assert files.result.data.sizes and all(row.wrong == 0 for row in files.result.data.sizes)
        # the worker's own files hold no field its TypedDicts do not name
        raw = json.loads((out / "runs" / run_id / "result.json").read_text())
        assert set(raw) <= set(ResultRecord.__annotations__)
        spec = json.loads((out / "runs" / run_id / "spec.json").read_text())
        assert set(spec) == set(SpecRecord.__annotations__)


def _submitted_slurm_bundle(tmp_path: Path) -> Path:
    recipe, out = tmp_path / "recipe.yaml", tmp_path / "bundle"
    recipe.write_text(RECIPE)
    env_path = str(tmp_path / "no-bin")  # no sbatch: the script is written, not submitted
    proc = run_kit("slurm", str(recipe), "--host-python", sys.executable, "--out", str(out),
                   env={**os.environ, "PATH": env_path})  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return out


def test_a_submitted_slurm_bundle_validates(tmp_path: Path) -> None:
    """Before the job: a `slurm` section, run specs, no results yet."""
    submitted = load_bundle(_submitted_slurm_bundle(tmp_path))
    assert submitted.results.status == "submitted" and submitted.results.slurm is not None
    assert submitted.results.slurm.launcher == "host"
    assert submitted.results.runs == [] and len(submitted.runs) == 2
    assert all(f.result is None for f in submitted.runs.values())


def test_a_collected_slurm_bundle_validates(tmp_path: Path) -> None:
    """After collect: runs the job never ran are failed runs; node files make hardware.json."""
    out = _submitted_slurm_bundle(tmp_path)
    proc = run_kit("slurm", "collect", str(out))
    assert "Traceback" not in proc.stderr
    assert proc.returncode == 1, proc.stderr  # the job never ran: every run failed, said so
    collected = load_bundle(out)
    assert collected.results.status == "failed"  # no run is ok
    assert [r.status for r in collected.results.runs] == ["failed", "failed"]
    assert collected.environment is not None and collected.environment.runtime == "slurm"
    assert collected.hardware is not None and collected.hardware.nodes == []


def test_a_collected_slurm_bundle_types_each_node(tmp_path: Path) -> None:
    """Each node's nodeinfo file (this machine's, for real) becomes a typed record of
    hardware.json, written as the node gave it; an unreadable one is a record that says so."""
    out = _submitted_slurm_bundle(tmp_path)
    from kit.worker import nodeinfo

    line = json.dumps(nodeinfo.collect())
    nodes = out / "slurm" / "nodes"
    (nodes / "node0.json").write_text(f"srun: started\n{line}\n")
    (nodes / "node1.json").write_text("{not json\n")
    proc = run_kit("slurm", "collect", str(out))
    assert "Traceback" not in proc.stderr
    hardware = load_bundle(out).hardware
    assert hardware is not None and hardware.nodes is not None
    first, second = hardware.nodes
    assert first.node == 0 and first.hostname == os.uname().nodename and first.cpus >= 1
    assert second.node == "node1" and second.error == "unreadable: node1.json"
    written = json.loads((out / "hardware.json").read_text())
    assert list(written) == ["nodes", "source"]
    assert list(written["nodes"][0]) == ["node", *json.loads(line)]
