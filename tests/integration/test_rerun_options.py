"""A rerun decides its device, scale, repeats and runtime once, into a new Options: the caller's
Options is left as given, and the device is resolved once (not again by the engine)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from kit.run import engine, rerun
from tests.conftest import allreduce_recipe, run_kit

pytestmark = pytest.mark.slow

RECIPE = allreduce_recipe(
    "rerun-options", "max_bytes: 1024, factor: 4, iters: 1, warmup_iters: 1, trials: 1", gpus=1
)


def test_a_rerun_leaves_options_alone_and_resolves_the_device_once(tmp_path: Path, monkeypatch):
    recipe, first = tmp_path / "recipe.yaml", tmp_path / "first"
    recipe.write_text(RECIPE)
    proc = run_kit("reproduce", str(recipe), "--device", "cpu", "--out", str(first))
    assert proc.returncode == 0, proc.stderr

    resolved: list[str] = []
    real = engine.resolve_device

    def counted(requested: str) -> str:
        resolved.append(requested)
        return real(requested)

    seen: list[engine.Options] = []

    def no_runs(p: engine.Prepared, state: engine.Execution, on_result=None) -> None:
        seen.append(p)

    monkeypatch.setattr(engine, "resolve_device", counted)
    monkeypatch.setattr(rerun, "resolve_device", counted)
    monkeypatch.setattr(engine, "execute", no_runs)
    given = engine.Options(out=tmp_path / "second")
    before = dataclasses.asdict(given)
    rerun.rerun_bundle(first, given)
    assert dataclasses.asdict(given) == before
    assert resolved == ["cpu"]  # the recorded device, resolved once
    (p,) = seen
    assert (p.device, p.smoke, len(p.runs)) == ("cpu", True, 1)
