"""A Docker or Podman run where no daemon answers is refused in one line (exit 2) before any
notice: a rerun of a Docker bundle once printed its base image, its recipe's variables and the
base it builds FROM, and only then that no daemon answers (exit 1). Every refusal that needs no
work comes first, as the apptainer runtime's does (kit.run.registry.check_ready).

The daemon is made absent by pointing DOCKER_HOST (KIT_PODMAN_HOST) at a socket that does not
exist; the CLI is the real one.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from kit.bundle import write_manifest
from kit.runtime.images.environments import load
from tests.conftest import ROOT, one_variant, run_kit

DOCKER_BUNDLE = ROOT / "tests" / "fixtures" / "bundles" / "synthetic-2gpu"
RECIPE = ROOT / "recipes" / "allreduce.yaml"
SAYS = {"docker": "no Docker daemon answers", "podman": "no Podman API answers"}


def docker_bundle(tmp_path: Path) -> Path:
    """A sealed bundle recorded with the docker runtime, built FROM the kit's pinned base (so
    nothing about the base is refused)."""
    b = tmp_path / "b"
    shutil.copytree(DOCKER_BUNDLE, b)
    env = json.loads((b / "environment.json").read_text())
    assert env["runtime"] == "docker"
    env["base_image"] = load(env["name"]).default_base_image()
    env["base_image_digest"] = None
    (b / "environment.json").write_text(json.dumps(env))
    write_manifest(b)
    return b


def no_daemon(tmp_path: Path) -> dict[str, str]:
    missing = f"unix://{tmp_path}/no-such-daemon.sock"
    return {**os.environ, "DOCKER_HOST": missing, "KIT_PODMAN_HOST": missing}


def refused_alone(proc, engine: str, out: Path) -> None:
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1, proc.stderr  # the refusal, no notice before it
    assert proc.stderr.startswith("kit: error: ") and SAYS[engine] in proc.stderr, proc.stderr
    assert proc.stdout == ""
    assert not out.exists()


@pytest.mark.parametrize("runtime", [None, "docker", "podman"])
def test_a_docker_bundles_rerun_with_no_daemon_is_one_line(tmp_path, runtime):
    b, out = docker_bundle(tmp_path), tmp_path / "r"
    args = ["reproduce", str(b), "--device", "cpu", "--out", str(out)]
    args += ["--runtime", runtime] if runtime else []
    proc = run_kit(*args, env=no_daemon(tmp_path), timeout=120)
    refused_alone(proc, runtime or "docker", out)


@pytest.mark.parametrize("runtime", ["docker", "podman"])
def test_a_recipe_run_with_no_daemon_is_one_line(tmp_path, runtime):
    out = tmp_path / "r"
    proc = run_kit("reproduce", str(RECIPE), "--device", "cpu", "--smoke", "--runtime", runtime,
                   "--out", str(out), env=no_daemon(tmp_path), timeout=120)  # fmt: skip
    refused_alone(proc, runtime, out)


def test_auto_with_no_daemon_still_runs_on_the_host(tmp_path):
    """--runtime auto is not refused: no daemon means the host runtime, said in a note."""
    out = tmp_path / "r"
    proc = run_kit("reproduce", str(one_variant(tmp_path)), "--device", "cpu", "--smoke",
                   "--repeats", "1", "--out", str(out), env=no_daemon(tmp_path),
                   timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "host runtime" in proc.stderr and (out / "results.json").is_file()
