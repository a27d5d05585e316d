"""A CPU run in Docker uses the pinned cpu environment, not the recipe's CUDA one, unless --env
says otherwise; and a base image that cannot be pulled is one line that says what to do.

Only the `kit` command is used (no module paths), against a real daemon with no registry (CI's):
the run stops at the base image, and the message shows which environment was chosen.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import ROOT, docker_or_skip, run_kit

pytestmark = [pytest.mark.docker, pytest.mark.slow]

RECIPE = """\
kit: 1
name: docker-cpu-default-env
gpus: 2
repeats: 1
variants: [p2p]
benchmarks:
  - kind: allreduce
    params: {max_bytes: 1024, factor: 4, iters: 2, warmup_iters: 1, trials: 1}
"""  # no `environment:`: the recipe's is the default CUDA one


def base_image_of(env: str) -> str:
    text = (ROOT / "docker" / env / "Dockerfile").read_text()
    return re.search(r"^ARG\s+BASE_IMAGE=(\S+)", text, re.MULTILINE).group(1)


@pytest.fixture(scope="module")
def client():
    return docker_or_skip(60)


def test_cpu_run_in_docker_uses_the_cpu_environment(client, tmp_path: Path) -> None:
    import docker

    cpu_base = base_image_of("cpu")
    try:
        client.images.get(cpu_base)
        pytest.skip(f"{cpu_base} is on this daemon: the run would build instead of stopping")
    except docker.errors.ImageNotFound:
        pass
    recipe = tmp_path / "r.yaml"
    recipe.write_text(RECIPE)
    proc = run_kit(
        "reproduce", str(recipe), "--runtime", "docker", "--device", "cpu",
        "--out", str(tmp_path / "b"), timeout=300,
    )  # fmt: skip
    said = " ".join(proc.stderr.split())
    assert proc.returncode == 2, proc.stderr  # refused before any work: the user's to fix
    assert base_image_of("cuda13") not in said  # the CUDA image is never asked for
    assert f"kit: error: base image {cpu_base} (environment cpu) is not on this machine" in said
    assert "--base-image IMAGE" in said
    assert "`kit export cpu -o kit-cpu.tar`" in said and "--image-archive kit-cpu.tar" in said
