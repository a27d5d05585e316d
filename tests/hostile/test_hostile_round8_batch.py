"""The eighth black-box pass's batch options and recipe paths: a kubeconfig context that is an
option or holds control characters, a partition that starts with `-`, a container image with an
ESC in it, and a recipe path with a line break are each refused (or shown) in one line, exit 2,
before anything is printed or written -- dry run or not. And `kit seal` of an unsealed bundle
that no reader takes (a run file of schema 99, a NaN, a run without its spec) refuses it and
leaves it as it was, instead of sealing a bundle `kit verify` then refuses."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import ROOT, one_line_exit_2, run_kit

DIGEST = "registry.example/kit@sha256:" + "a" * 64
K8S = ("k8s", "recipes/allreduce.yaml", "--device", "cpu", "--image", DIGEST)
SLURM = ("slurm", "recipes/allreduce.yaml", "--device", "cpu", "--dry-run")


def test_a_context_is_no_option_and_has_no_control_characters():
    for bad in ("--privileged", "-x", "", " ", "a\nb", "a\rb", "a\x1b[2Jb", "a\x7fb", "a\tb"):
        proc = run_kit(*K8S, f"--context={bad}", "--dry-run")
        one_line_exit_2(proc, "--context")
    # context names are free-form: $ and parentheses are a name (never given to a shell)
    for good in ("$(id)", "arn:aws:eks:us-east-1:1:cluster/a b", "kind-kit"):
        proc = run_kit(*K8S, "--context", good, "--dry-run")
        assert proc.returncode == 0 and "kind: Job" in proc.stdout, proc.stderr


def test_a_partition_starts_with_a_letter_digit_or_underscore():
    for bad in ("--privileged", "-p", "gpu,-x", "a,,b", ".", "gpu,.x"):
        proc = run_kit(*SLURM, "--container-image", "x.sqsh", f"--partition={bad}")
        one_line_exit_2(proc, "--partition")
    for good in ("gpu", "gpu,debug", "_x.y-z", "0a"):
        proc = run_kit(*SLURM, "--container-image", "x.sqsh", f"--partition={good}")
        assert proc.returncode == 0 and f"#SBATCH --partition={good}" in proc.stdout, proc.stderr


def test_no_control_character_in_a_line_of_the_sbatch_script():
    for option in ("--container-image", "--apptainer", "--host-python"):
        for bad in ("a\x1b[2Jb", "a\x07b", "a\x7fb", "a\tb", "a\x08b"):
            proc = run_kit(*SLURM, f"{option}={bad}")
            one_line_exit_2(proc, f"{option} ")
    proc = run_kit(*SLURM, "--host-python", "python3", "--sbatch-arg=--comment=a\x1bb")
    one_line_exit_2(proc, "--sbatch-arg ")
    proc = run_kit(*SLURM, "--host-python", "python3", "--partition=gp\x1bu")
    one_line_exit_2(proc, "--partition ")


def test_a_recipe_path_with_a_line_break_is_shown_in_one_line(tmp_path):
    missing = str(tmp_path / "a\nb.yaml")
    for command in (("recipes", "validate"), ("reproduce",), ("recipes", "list")):
        target = missing if command != ("recipes", "list") else str(tmp_path / "a\nb")
        proc = run_kit(*command, target)
        one_line_exit_2(proc, "b.yaml" if command != ("recipes", "list") else "not a directory")
    # a recipe that exists under such a name: its OK line is one line too
    recipe = tmp_path / "x\ny.yaml"
    recipe.write_bytes(Path("recipes/allreduce.yaml").read_bytes())
    proc = run_kit("recipes", "validate", str(recipe))
    assert proc.returncode == 0 and len(proc.stdout.strip().splitlines()) == 1, proc.stdout
    proc = run_kit("recipes", "list", str(tmp_path))
    assert proc.returncode == 0 and len(proc.stdout.strip().splitlines()) == 1, proc.stdout


# kit seal of a stranger's unsealed bundle that no reader takes (the fifth black-box pass)


def _unsealed(tmp_path: Path, how: str) -> Path:
    import json
    import shutil

    b = tmp_path / "unsealed"
    shutil.copytree(ROOT / "tests" / "fixtures" / "bundles" / "cpu-smoke", b)
    (b / "MANIFEST.sha256").unlink()
    results = json.loads((b / "results.json").read_text())
    results["status"] = "running"
    (b / "results.json").write_text(json.dumps(results))
    run = b / "runs" / "allreduce.p2p.r0" / "result.json"
    data = json.loads(run.read_text())
    if how == "schema-99":
        data["schema"] = 99
        run.write_text(json.dumps(data))
    elif how == "nan":
        data["metrics"][next(iter(data["metrics"]))]["value"] = float("nan")
        run.write_text(json.dumps(data))
    else:  # a result recovered from a folder without its spec
        (b / "runs" / "allreduce.p2p.r7").mkdir()
        data["run_id"], data["repeat"] = "allreduce.p2p.r7", 7
        (b / "runs" / "allreduce.p2p.r7" / "result.json").write_text(json.dumps(data))
    return b


@pytest.mark.parametrize(("how", "says"), [("schema-99", "schema 99"), ("nan", "NaN"),
                                           ("no-spec", "spec.json: missing")])  # fmt: skip
def test_kit_seal_refuses_what_no_reader_takes_and_touches_nothing(tmp_path, how, says):
    b = _unsealed(tmp_path, how)
    before = (b / "results.json").read_bytes()
    proc = run_kit("seal", str(b), timeout=120)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert says in proc.stderr and "seals only what every reader" in proc.stderr
    assert not (b / "MANIFEST.sha256").exists() and (b / "results.json").read_bytes() == before
