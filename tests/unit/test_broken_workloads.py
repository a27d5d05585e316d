"""A workload folder that names what this kit lacks (a metric, a figure kind) costs one line
where it is used, never a traceback in every command: run against a copy of kit/ with the
mistake planted, through the real CLI."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kit.workloads import registry
from tests.conftest import ROOT

RECIPE = ROOT / "recipes" / "gpt2_ddp.yaml"


def planted_kit(tmp_path: Path, path: str, old: str, new: str) -> Path:
    """A copy of kit/ under tmp_path with one edit in `path`; the folder to put on PYTHONPATH."""
    shutil.copytree(ROOT / "kit", tmp_path / "kit", ignore=shutil.ignore_patterns("__pycache__"))
    target = tmp_path / "kit" / path
    text = target.read_text()
    assert old in text
    target.write_text(text.replace(old, new, 1))
    return tmp_path


def kit(where: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(where)}
    return subprocess.run(
        [sys.executable, "-m", "kit", *args], cwd=where, env=env, capture_output=True,
        text=True, timeout=120,
    )  # fmt: skip


def test_the_shipped_workloads_all_load():
    assert registry.KINDS and not [k for k in registry.KINDS if registry.broken(k)]
    assert all(registry.spec(k) for k in registry.KINDS)


def test_a_metric_missing_from_the_catalog_breaks_only_its_workload(tmp_path):
    where = planted_kit(
        tmp_path, "workloads/training_spec.py", '"throughput", "throughput_window"',
        '"throughputx", "throughput_window"',
    )  # fmt: skip
    helped = kit(where, "--help")
    assert helped.returncode == 0, helped.stderr
    assert "Traceback" not in helped.stderr
    ok = kit(where, "recipes", "validate", str(ROOT / "recipes" / "allreduce.yaml"))
    assert ok.returncode == 0, ok.stderr
    bad = kit(where, "recipes", "validate", str(RECIPE))
    assert bad.returncode == 2
    (line,) = bad.stderr.strip().splitlines()
    assert "gpt2_ddp" in line and "no metric named 'throughputx'" in line, line


@pytest.mark.parametrize("command", ["validate", "reproduce"])
def test_an_unknown_figure_kind_fails_before_any_run(tmp_path, command):
    where = planted_kit(
        tmp_path, "workloads/training_spec.py", 'figures="training"', 'figures="inference"'
    )
    out = tmp_path / "bundle"
    args = (
        ("recipes", "validate", str(RECIPE))
        if command == "validate"
        else ("reproduce", str(RECIPE), "--device", "cpu", "--runtime", "host", "--out", str(out))
    )
    done = kit(where, *args)
    assert done.returncode == 2, done.stdout + done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert "figure kind 'inference'" in line and "gpt2_ddp" in line, line
    assert not out.exists()
