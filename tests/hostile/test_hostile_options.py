"""Options checked against what they apply to: every one that cannot apply is one line, exit 2.

An empty value, an option given twice (click would take the last), an image option with the host
runtime, a rerun option with a recipe, a signer option without its file: each was accepted
silently. Nothing may be created.
"""

from __future__ import annotations

import json
import shutil

import pytest

from kit.bundle import write_manifest
from tests.conftest import ROOT, run_kit

RECIPE = str(ROOT / "recipes" / "allreduce.yaml")
SMOKE = ROOT / "tests" / "fixtures" / "bundles" / "cpu-smoke"

CASES = {
    # empty values and arguments
    "device-empty": (["reproduce", RECIPE, "--device", ""], "--device: an empty value"),
    "out-empty": (["reproduce", RECIPE, "--device", "cpu", "--out", ""], "--out: an empty value"),
    "out-equals-empty": (["reproduce", RECIPE, "--out="], "--out: an empty value"),
    "verify-empty": (["verify", ""], "an empty argument"),
    "compare-label-empty": (["compare", "BUNDLE", "BUNDLE", "--label="], "--label: an empty value"),
    "runtime-blank": (["reproduce", RECIPE, "--runtime", "  "], "--runtime: an empty value"),
    # repeated options
    "repeats-twice": (["reproduce", RECIPE, "--repeats", "2", "--repeats", "3"], "--repeats: given twice"),
    "device-twice": (["reproduce", RECIPE, "--device=cpu", "--device", "cuda"], "--device: given twice"),
    "smoke-twice": (["reproduce", RECIPE, "--smoke", "--smoke"], "--smoke: given twice"),
    "baseline-twice": (["compare", "BUNDLE", "BUNDLE", "--baseline", "1", "--baseline", "2"], "--baseline: given twice"),
    "refs-label-twice": (["refs", "add", "BUNDLE", "--label", "a", "--label", "b"], "--label: given twice"),
    # options the chosen runtime or device ignores
    "base-image-host": (["reproduce", RECIPE, "--device", "cpu", "--base-image", "debian:12"], "--base-image: needs the docker runtime"),
    "env-host": (["reproduce", RECIPE, "--device", "cpu", "--runtime", "host", "--env", "bogus"], "--env bogus: needs a runtime"),
    "env-auto-cpu": (["reproduce", RECIPE, "--device", "cpu", "--env", "cpu"], "--env cpu: needs a runtime"),
    "archive-host": (["reproduce", RECIPE, "--device", "cpu", "--runtime", "host", "--image-archive", "/x.tar"], "--image-archive: needs the docker"),
    "strict-env-recipe": (["reproduce", RECIPE, "--strict-env"], "only for rerunning a bundle"),
    "allow-path-recipe": (["reproduce", RECIPE, "--allow-path", "/etc"], "only for rerunning a bundle"),
    "allow-unsigned-alone": (["compare", "BUNDLE", "BUNDLE", "--allow-unsigned"], "only with --allowed-signers"),
    "signers-missing": (["compare", "BUNDLE", "BUNDLE", "--allowed-signers", "/nonexistent"], "not a regular file"),
    "verify-signers-missing": (["verify", "BUNDLE", "--allowed-signers", "/nonexistent"], "not a regular file"),
    "rerun-base-image-host": (["reproduce", "BUNDLE", "--base-image", "debian:12"], "--base-image: needs the docker runtime; this rerun uses the host runtime"),
    "rerun-nodes-single": (["reproduce", "BUNDLE", "--nodes", "unix:///x.sock"], "--nodes: BUNDLE is a single-node bundle"),
    "report-price-source-alone": (["report", "BUNDLE", "--price-source", "list price"], "--price-source: only with --price-per-gpu-hour"),
    "compare-price-source-alone": (["compare", "BUNDLE", "BUNDLE", "--price-source", "x"], "--price-source: only with --price-per-gpu-hour"),
    "slurm-wait-dry-run": (["slurm", RECIPE, "--host-python", "python3", "--wait", "--dry-run"], "--wait: --dry-run submits nothing"),
    "rerun-env": (["reproduce", "BUNDLE", "--env", "cpu"], "--env: a rerun builds"),
    "rerun-archive-host": (["reproduce", "BUNDLE", "--runtime", "host", "--image-archive", "/x.tar"], "--image-archive: needs the docker"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(CASES))
def test_an_option_that_cannot_apply_is_one_line(tmp_path, case):
    b = tmp_path / "b"
    shutil.copytree(SMOKE, b)
    args, words = CASES[case]
    args = [str(b) if a == "BUNDLE" else a for a in args]
    proc = run_kit(*args, cwd=tmp_path, timeout=120)
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert proc.stderr.startswith("kit: error: ") and proc.stderr.count("\n") == 1, proc.stderr
    assert words.replace("BUNDLE", str(b)) in proc.stderr, proc.stderr
    assert not (tmp_path / "reports").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b"]


def test_values_that_look_like_options_are_values():
    """--sbatch-arg=--account=x twice: a repeatable option whose values start with --."""
    proc = run_kit("slurm", RECIPE, "--sbatch-arg", "--account=x", "--sbatch-arg=--qos=y",
                   "--host-python", "python3", "--dry-run", "--device", "cpu")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "#SBATCH --account=x" in proc.stdout and "#SBATCH --qos=y" in proc.stdout


def test_a_multi_node_bundle_is_rerun_only_on_nodes_the_user_names(tmp_path):
    b = tmp_path / "b"
    shutil.copytree(SMOKE, b)
    text = (b / "recipe.yaml").read_text()
    (b / "recipe.yaml").write_text(
        text.replace(
            "gpus: 2\n", 'gpus: 2\nnodes:\n  hosts: ["ssh://evil.example", "tcp://10.0.0.9:2376"]\n'
        )
    )
    for name, runtime in (("environment.json", "multinode"), ("results.json", "multinode")):
        data = json.loads((b / name).read_text())
        data["runtime"] = runtime
        (b / name).write_text(json.dumps(data))
    write_manifest(b)
    proc = run_kit("reproduce", str(b), "--out", str(tmp_path / "r"), timeout=120)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "ssh://evil.example" in proc.stderr and "--nodes" in proc.stderr
    assert proc.stdout == "" and not (tmp_path / "r").exists()
    nodes = f"unix://{tmp_path}/n1.sock,unix://{tmp_path}/n2.sock"  # the user's, unreachable here
    named = run_kit(
        "reproduce", str(b), "--nodes", nodes, "--out", str(tmp_path / "r"), timeout=120
    )
    assert named.returncode in (1, 2) and "Traceback" not in named.stderr, named.stderr
    assert named.stderr.strip().splitlines()[-1].startswith("kit: error: node 0 (unix://")
