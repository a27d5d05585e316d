"""Hostile bundles whose results.json contradicts itself or its recipe, resealed by the sender.

Each record is valid on its own, so only a check across the runs catches them: a copy of a run
counted as a fourth sample turned an UNDECIDED verdict into PASS. Each case edits a copy of a
real recorded bundle, recomputes the manifest (write_manifest, as a sender would) and runs the
real `kit`: verify, accept and compare refuse it with exit 2 and one line naming the run.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kit.bundle import write_manifest
from tests.conftest import ROOT, one_line, run_kit
from tests.conftest import edit_results as edit

EXAMPLE = ROOT / "reports" / "examples" / "h200x2-allreduce"
AGAINST = "325.6GB/s"


def copy(tmp_path: Path, name: str = "b") -> Path:
    out = tmp_path / name
    shutil.copytree(EXAMPLE, out)
    return out


def _duplicate(data: dict) -> None:
    data["runs"].append(dict(data["runs"][0]))


def _invented(data: dict) -> None:
    run = dict(data["runs"][0], run_id="allreduce.p2p.r9", repeat=9, variant="p2p")
    data["runs"].append(run)


def _renamed(data: dict) -> None:  # an id that is not benchmark.variant.rN
    data["runs"][0]["run_id"] = "allreduce.p2p.r7"


def _same_triple(data: dict) -> None:  # another id, the same (benchmark, variant, repeat)
    run = dict(data["runs"][0], run_id="allreduce.p2p.r0x")
    data["runs"].append(run)


def _variant(data: dict) -> None:
    data["runs"][0].update(variant="nvlink-magic", run_id="allreduce.nvlink-magic.r0")


def _benchmark(data: dict) -> None:
    data["runs"][0].update(benchmark="matmul", run_id=f"matmul.{data['runs'][0]['variant']}.r0")


def _kind(data: dict) -> None:  # 8th pass: an allreduce run recorded as another task
    for run in data["runs"]:
        run["kind"] = "allgather"


def _run_device(data: dict) -> None:
    data["runs"][0]["device"] = "tpu"


def _bundle_device(data: dict) -> None:
    data["device"] = "quantum"


def _created_at(data: dict) -> None:
    data["created_at"] = "yesterday"


CASES = {
    "duplicate-run": (_duplicate, "the same run as runs.0"),
    "invented-run": (_invented, "allreduce.p2p.r9"),
    "run-id-not-its-name": (_renamed, "run_id: expected"),
    "same-benchmark-variant-repeat": (_same_triple, "allreduce.p2p.r0x"),
    "unknown-variant": (_variant, "variant 'nvlink-magic' is not one of the recipe's"),
    "unknown-benchmark": (_benchmark, "benchmark 'matmul' is not one of the recipe's"),
    "another-kind": (_kind, "kind 'allgather', but the recipe's benchmark"),
    "run-device": (_run_device, "device: expected one of cuda, cpu, got 'tpu'"),
    "bundle-device": (_bundle_device, "device: expected one of cuda, cpu, got 'quantum'"),
    "created-at": (_created_at, "created_at: expected an ISO 8601 timestamp"),
}


def test_the_untouched_bundle_is_undecided_with_three_runs(tmp_path):
    b = copy(tmp_path)
    assert run_kit("verify", str(b)).returncode == 0
    proc = run_kit("accept", str(b), "--against", AGAINST)
    assert proc.returncode == 3 and "n=3" in proc.stdout, (proc.stdout, proc.stderr)


@pytest.mark.parametrize("case", sorted(CASES))
def test_verify_and_accept_refuse_runs_that_contradict(tmp_path, case):
    change, says = CASES[case]
    b = edit(copy(tmp_path), change)
    for args in (("verify", str(b)), ("accept", str(b), "--against", AGAINST)):
        err = one_line(run_kit(*args))
        assert says in err and "results.json" in err, err
    assert not (b / "acceptance.json").exists()


def test_compare_refuses_a_duplicated_run(tmp_path):
    a = copy(tmp_path, "a")
    b = edit(copy(tmp_path, "b"), _duplicate)
    out = tmp_path / "cmp"
    err = one_line(run_kit("compare", str(a), str(b), "--out", str(out)))
    assert "the same run as runs.0" in err and not out.exists()


def test_a_run_without_its_folder_is_refused(tmp_path):
    """A run recorded in results.json must have the runs/ folder the driver wrote for it."""
    b = copy(tmp_path)
    victim = json.loads((b / "results.json").read_text())["runs"][0]["run_id"]
    shutil.rmtree(b / "runs" / victim)
    write_manifest(b)
    err = one_line(run_kit("verify", str(b)))
    assert f"no runs/{victim} folder" in err


def test_every_recorded_bundle_is_consistent():
    """The rule refuses no bundle a kit wrote: every example and fixture bundle loads."""
    from kit.model import load_bundle

    bundles = [p for p in (ROOT / "reports" / "examples").iterdir() if (p / "runs").is_dir()]
    bundles += [p for p in (ROOT / "tests" / "fixtures" / "bundles").iterdir() if p.is_dir()]
    assert len(bundles) >= 10
    for b in bundles:
        load_bundle(b)


@pytest.mark.parametrize(
    ("before", "after", "says"),
    [
        ("value: 343,", "value: -343,", "busbw_largest.0.value: input should be greater than 0"),
        ("value: 343,", "value: 0,", "busbw_largest.0.value: input should be greater than 0"),
        ("unit: GB/s", "unit: furlongs", "unit 'furlongs' is not one busbw_largest is recorded in"),
        ("busbw_largest:", "busbw_fastest:", "busbw_fastest: not a metric this kit records"),
    ],
)
def test_recipe_expectations_are_positive_in_a_known_unit(tmp_path, before, after, says):
    text = (ROOT / "recipes" / "allreduce.yaml").read_text()
    assert before in text
    recipe = tmp_path / "r.yaml"
    recipe.write_text(text.replace(before, after, 1))
    err = one_line(run_kit("recipes", "validate", str(recipe)))
    assert says in err, err
    assert run_kit("recipes", "validate", str(ROOT / "recipes" / "allreduce.yaml")).returncode == 0


def test_a_rate_of_work_takes_the_units_of_work():
    from kit.shared.metrics import metric

    assert metric("throughput").units() == ("items/s", "images/s", "samples/s", "tokens/s")
    assert metric("busbw_largest").units() == ("GB/s",)


IMAGE = "registry.example/kit-cuda13@sha256:" + "0123456789abcdef" * 4
K8S = ("k8s", "recipes/allreduce.yaml", "--image", IMAGE, "--dry-run")
SLURM = ("slurm", "recipes/allreduce.yaml", "--host-python", "python3", "--dry-run")


def test_k8s_refuses_a_node_selector_key_given_two_values():
    err = one_line(run_kit(*K8S, "--node-selector", "a=b", "--node-selector", "a=c"))
    assert "--node-selector 'a' given twice, as 'b' and 'c'" in err
    same = run_kit(*K8S, "--node-selector", "a=b", "--node-selector", "a=b")
    assert same.returncode == 0 and "a: b" in same.stdout, same.stderr


@pytest.mark.parametrize("command", [K8S, SLURM], ids=["k8s", "slurm"])
@pytest.mark.parametrize("target", ["file", "dev-null", "inside-bundle"])
def test_a_dry_run_checks_out_as_a_real_run_does(tmp_path, command, target):
    bundle = copy(tmp_path)
    out = {
        "file": tmp_path / "a-file",
        "dev-null": Path("/dev/null"),
        "inside-bundle": bundle / "inner",
    }[target]
    if target == "file":
        out.write_text("keep me\n")
    err = one_line(run_kit(*command, "--out", str(out)))
    assert f"--out {out}" in err, err
    assert not (bundle / "inner").exists()
    if target == "file":
        assert out.read_text() == "keep me\n"
    fresh = run_kit(*command, "--out", str(tmp_path / "new"))
    assert fresh.returncode == 0 and not (tmp_path / "new").exists(), fresh.stderr


SLURM_PLAIN = ("slurm", "recipes/allreduce.yaml", "--dry-run")


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--host-python", "python3", "--sbatch-arg", "rm -rf /"], "--sbatch-arg 'rm -rf /'"),
        (["--host-python", "python3", "--sbatch-arg", "-"], "--sbatch-arg '-'"),
        (
            ["--host-python", "python3", "--partition", "gpu; rm -rf ~"],
            "expected a Slurm partition",
        ),
        (["--host-python", "python3", "--partition", "gpu,"], "--partition 'gpu,'"),
        (["--apptainer", "FOLDER"], "not a file (an Apptainer .sif image)"),
        (["--apptainer", "/dev/zero"], "--apptainer /dev/zero: not a file"),
    ],
)
def test_slurm_refuses_what_is_no_sbatch_option_partition_or_sif(tmp_path, args, says):
    args = [str(tmp_path) if a == "FOLDER" else a for a in args]
    proc = run_kit(*SLURM_PLAIN, *args)
    err = one_line(proc)
    assert says in err and "#SBATCH" not in proc.stdout, err


def test_slurm_takes_a_partition_list_an_option_and_a_sif(tmp_path):
    sif = tmp_path / "kit.sif"
    sif.write_bytes(b"SIF")
    proc = run_kit(*SLURM_PLAIN, "--apptainer", str(sif), "--partition", "gpu,a100.x_1",
                   "--sbatch-arg=--account=lab")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "#SBATCH --partition=gpu,a100.x_1\n" in proc.stdout
    assert "#SBATCH --account=lab\n" in proc.stdout


def _failing_sbatch(tmp_path: Path) -> dict[str, str]:
    """An sbatch on PATH that refuses every job, as a cluster whose partition is down does."""
    import os

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    sbatch = bin_dir / "sbatch"
    sbatch.write_text("#!/bin/sh\necho 'sbatch: error: invalid partition specified' >&2\nexit 1\n")
    sbatch.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}


@pytest.mark.parametrize("existing", [False, True], ids=["new-folders", "empty-folder"])
def test_a_failed_submission_leaves_out_as_it_was(tmp_path, existing):
    env = _failing_sbatch(tmp_path)
    out = tmp_path / "shared" / "bundle" if not existing else tmp_path / "empty"
    if existing:
        out.mkdir()
    proc = run_kit("slurm", "recipes/allreduce.yaml", "--host-python", "python3",
                   "--out", str(out), env=env)  # fmt: skip
    err = one_line(proc, code=1)  # sbatch's failure is a failed run, not a usage error
    assert "sbatch failed (exit 1): sbatch: error: invalid partition specified" in err, err
    if existing:
        assert out.is_dir() and list(out.iterdir()) == []
    else:
        assert not (tmp_path / "shared").exists()


@pytest.mark.parametrize("value", ["nan", "0", "604801", "inf"])
def test_pending_timeout_says_its_range(value):
    err = one_line(run_kit(*K8S, "--pending-timeout", value))
    assert "expected a number of seconds from 1 s to 7 days" in err, err


@pytest.mark.parametrize("price", ["1e9USD", "1000USD", "0", "free", "nan"])
def test_report_and_compare_say_one_thing_of_a_bad_price(tmp_path, price):
    a, b = copy(tmp_path, "a"), copy(tmp_path, "b")
    said = {
        one_line(run_kit("report", str(a), "--price-per-gpu-hour", price)),
        one_line(
            run_kit(
                "compare",
                str(a),
                str(b),
                "--price-per-gpu-hour",
                price,
                "--out",
                str(tmp_path / "c"),
            )
        ),
    }
    assert len(said) == 1, said
    assert "more than 0 and less than 1000, such as 3.50USD" in said.pop()
