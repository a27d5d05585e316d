"""`gpus: all`: counted where the run starts (NVML's GPUs, 2 gloo ranks on the CPU, the named
--gpus-per-node on a scheduler), refused where it cannot be counted, never planned or recorded
as the word."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kit.io.errors import InputError
from kit.model import load_bundle
from kit.recipe import gpus, load_recipe, parse_recipe
from kit.recipe.gpus import CPU_RANKS
from kit.run import devices
from kit.run.plan import plan
from kit.run.slurm.script import SlurmOptions, make_job
from tests.conftest import ROOT

ALL = "kit: 1\nname: box\ngpus: all\nrepeats: 1\nbenchmarks:\n  - kind: allreduce\n"


def test_the_acceptance_recipe_takes_every_gpu():
    recipe = load_recipe(ROOT / "recipes" / "acceptance.yaml")
    assert recipe.gpus == "all" and recipe.repeats == 3
    assert [b.kind for b in recipe.benchmarks] == ["copy_bandwidth", "matmul_ceiling", "allreduce"]


def test_all_is_counted_where_the_run_starts(monkeypatch):
    recipe = parse_recipe(ALL, "r.yaml")
    on_cpu = devices.every_gpu(recipe, "cpu", several_nodes=False)
    assert on_cpu.gpus == CPU_RANKS == 2 and recipe.gpus == "all"  # a copy; the recipe as read
    assert {r.nproc for r in plan(on_cpu, "cpu", smoke=True)} == {2}
    assert on_cpu.resolved()["gpus"] == 2  # what recipe.yaml in the bundle records
    assert recipe.verified_on == "" and on_cpu.verified_on == ""  # nothing claimed where none was
    shipped = parse_recipe(ALL + 'verified_on: "2x NVIDIA H200 NV18"\n', "r.yaml")
    four = gpus.resolve(shipped, 4, "")
    # a count the recipe was not verified at never reads as verified there
    assert four.verified_on == "as gpus: all (here 4 GPUs), on 2x NVIDIA H200 NV18", four
    monkeypatch.setattr(devices, "detect_gpus", lambda: 8)
    assert devices.every_gpu(recipe, "cuda", several_nodes=False).gpus == 8
    counted = parse_recipe(ALL.replace("gpus: all", "gpus: 2"), "r.yaml")
    assert devices.every_gpu(counted, "cuda", several_nodes=False).gpus == 2  # a count stays


def test_all_is_refused_where_it_cannot_be_counted(monkeypatch):
    recipe = parse_recipe(ALL, "r.yaml")
    with pytest.raises(InputError, match="gpus: all: a run over several nodes cannot count"):
        devices.every_gpu(recipe, "cuda", several_nodes=True)
    monkeypatch.setattr(devices, "detect_gpus", lambda: 0)
    with pytest.raises(InputError, match="gpus: all: NVML found no GPU to count"):
        devices.every_gpu(recipe, "cuda", several_nodes=False)
    with pytest.raises(InputError, match="gpus: all was not resolved to a count before planning"):
        plan(recipe, "cpu", smoke=True)


def test_a_scheduler_takes_the_count_it_is_given(tmp_path):
    recipe = parse_recipe(ALL, "r.yaml")
    opts = dict(host_python="python3", device="cpu", out=tmp_path / "b")
    with pytest.raises(
        InputError, match="Slurm job cannot count the nodes' GPUs from here; name --gpus-per-node"
    ):
        make_job(recipe, SlurmOptions(**opts))
    job = make_job(recipe, SlurmOptions(**opts, gpus_per_node=4))
    assert job.gpus_per_node == 4 and job.recipe.gpus == 4
    assert {r.nproc for r in job.runs} == {4}


def test_a_bundle_never_records_the_word(tmp_path: Path):
    b = tmp_path / "b"
    shutil.copytree(ROOT / "tests" / "fixtures" / "bundles" / "cpu-smoke", b)
    load_bundle(b)  # as recorded: a count
    text = (b / "recipe.yaml").read_text()
    (b / "recipe.yaml").write_text(text.replace("gpus: 2\n", "gpus: all\n", 1))
    with pytest.raises(InputError, match="gpus: all; a bundle records the GPU count it ran on"):
        load_bundle(b)
