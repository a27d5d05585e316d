"""The fourth black-box pass's batch dry runs: an option given as --container-image's value and a
kubeconfig that is named but missing are refused in one line, exit 2, dry run or not."""

from __future__ import annotations

from tests.conftest import one_line_exit_2, run_kit

DIGEST = "reg.example/kit@sha256:" + "a" * 64


def test_an_option_is_no_container_image():
    for value in ("--container-image=--privileged", "--container-image=-v"):
        proc = run_kit("slurm", "recipes/allreduce.yaml", "--device", "cpu", value, "--dry-run")
        one_line_exit_2(proc, "an option, not an image")
    proc = run_kit("slurm", "recipes/allreduce.yaml", "--device", "cpu",
                   "--container-image", "docker://nvcr.io#nvidia/pytorch:25.10-py3", "--dry-run")  # fmt: skip
    assert proc.returncode == 0, proc.stderr


def test_a_named_kubeconfig_must_exist(tmp_path):
    proc = run_kit("k8s", "recipes/allreduce.yaml", "--image", DIGEST,
                   "--kubeconfig", str(tmp_path / "missing"), "--dry-run")  # fmt: skip
    one_line_exit_2(proc, "no such file")
    config = tmp_path / "config"
    config.write_text("apiVersion: v1\nkind: Config\n")
    proc = run_kit("k8s", "recipes/allreduce.yaml", "--image", DIGEST,
                   "--kubeconfig", str(config), "--dry-run")  # fmt: skip
    assert proc.returncode == 0 and "kind: Job" in proc.stdout, proc.stderr
