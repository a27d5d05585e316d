"""Iteration counts that would hold the GPUs for years (10**12) are refused by `kit recipes
validate` with one line naming the field and its recipe line, exit 2; the bounds themselves pass."""

from __future__ import annotations

import pytest

from kit.workloads.base import COUNT_BOUNDS
from tests.conftest import run_kit

CASES = [
    ("allreduce", "params", "iters"),
    ("allreduce", "params", "warmup_iters"),
    ("allreduce", "smoke", "trials"),
    ("gpt2_ddp", "params", "steps"),
    ("gpt2_ddp", "smoke", "warmup_steps"),
    ("matmul_ceiling", "params", "warmup"),
    ("copy_bandwidth", "params", "loop_count"),
]


def recipe(kind: str, section: str, name: str, value: int) -> str:
    return (f"kit: 1\nname: demo\ngpus: 2\nbenchmarks:\n  - kind: {kind}\n"
            f"    {section}:\n      {name}: {value}\n")  # fmt: skip


@pytest.mark.parametrize(("kind", "section", "name"), CASES)
def test_huge_counts_are_one_line(tmp_path, kind, section, name):
    path = tmp_path / "r.yaml"
    path.write_text(recipe(kind, section, name, 10**12))
    proc = run_kit("recipes", "validate", str(path))
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1, proc.stderr
    assert f"{path}:7: benchmarks.0.{section}: {name}: must be at most" in proc.stderr
    path.write_text(recipe(kind, section, name, COUNT_BOUNDS[name]))
    proc = run_kit("recipes", "validate", str(path))
    assert proc.returncode == 0, proc.stderr
