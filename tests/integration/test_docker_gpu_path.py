"""The GPU path of the docker runtime, against a real daemon on a machine with no GPU.

scripts/ci-docker.sh starts Docker 26 with CDI on and a CDI spec of a harmless device kind,
kit.test/gpu (devices 0, 1 and all: /dev/null as /dev/kit-test-gpuN, and an environment variable).
With KIT_CDI_KIND=kit.test/gpu the kit requests those exactly as it requests nvidia.com/gpu on a
GPU server, so these tests prove the request path: the daemon's style is read, one device id
goes per GPU, the container sees what it was given and nothing else, a device the spec lacks is
one line before any container exists, and a daemon that cannot resolve a device fails the run
with its reason. The faults that need no GPU run here too: a container killed for memory, and a
worker in a container without CUDA. The same cases ran on a lent H100 through
scripts/device/gpu_faults.py. (An environment on an existing image, packages: image, built FROM
the cpu image: test_docker_env_identity.py.)
"""

# ruff: noqa: F811  (the daemon fixtures are test_docker_env's, imported by name for pytest)
from __future__ import annotations

import re
from pathlib import Path

import pytest

from kit.runtime.base import LaunchRequest
from kit.runtime.containers import gpus
from kit.runtime.containers.client import LABEL_OWNER
from kit.runtime.containers.docker import DockerContainer
from kit.runtime.pinned import DockerRuntime
from tests.integration.test_docker_env import (  # noqa: F401
    OWNER,
    _assert_nothing_left,
    _write_spec,
    base_image,
    client,
    cpu_image,
    daemon_state,
)

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.cpu_image]

KIND = "kit.test/gpu"
# CI's daemon runs nested in a sandbox that cannot raise memlock to unlimited (GPU runs ask for
# it); what these tests check is the device request, so their GPU containers keep the default
MEMLOCK = False
SHOW = ["sh", "-c", "ls /dev | grep kit-test-gpu; env | grep KIT_TEST_CDI | sort"]


@pytest.fixture
def cdi(client, monkeypatch):
    """The daemon's CDI style for the test kind, or a skip naming the script that sets it up."""
    monkeypatch.setenv("KIT_CDI_KIND", KIND)
    style = gpus.style(client)
    if not isinstance(style, gpus.Cdi) or not style.devices:
        pytest.skip(f"this daemon has no CDI spec of {KIND}: as root, bash scripts/ci-docker.sh")
    return style


def _show(box: DockerContainer, run_dir: Path, gpu_ids: list[int] | None) -> tuple[int, str]:
    log = run_dir / f"show-{gpu_ids}.log"
    with open(log, "wb") as f:
        started = box.start(SHOW, LaunchRequest(run_dir, 1, {}, log, 60, gpu_ids, "cuda"), f)
        try:
            code, timed_out = started.wait(60)
        finally:
            started.remove()
    assert not timed_out
    return code, log.read_text()


def test_cdi_devices_reach_the_container(client, cpu_image, cdi, daemon_state, tmp_path):
    assert cdi.name == "cdi" and {"0", "1", "all"} <= cdi.devices
    assert cdi.requests([1])[0]["DeviceIDs"] == [f"{KIND}=1"]
    run_dir = tmp_path / "run"
    _write_spec(run_dir, run_id="cdi.show.r0")
    box = DockerContainer(cpu_image.tag, client=client, gpu_style=cdi, memlock=MEMLOCK)
    code, text = _show(box, run_dir, [1])
    assert code == 0, text
    assert re.findall(r"kit-test-gpu\d", text) == ["kit-test-gpu1"]  # GPU 1 and only it
    assert "KIT_TEST_CDI_GPU1=1" in text and "GPU0" not in text
    code, text = _show(box, run_dir, None)  # all GPUs: KIND=all
    assert code == 0 and re.findall(r"kit-test-gpu\d", text) == ["kit-test-gpu0", "kit-test-gpu1"]
    _assert_nothing_left(client, daemon_state)


def test_cdi_device_the_spec_lacks_is_one_line_before_any_container(
    client, cpu_image, cdi, daemon_state, tmp_path
):
    run_dir = tmp_path / "run"
    _write_spec(run_dir, run_id="cdi.missing.r0", device="cuda", nproc=1)
    # this worker's containers only, by id (sparse: no inspect): the other worker's come and go,
    # and a full list() inspected one removed meanwhile (404, a loaded run, 2026-12-01)
    mine = {"label": f"{LABEL_OWNER}={OWNER}"}
    before = {c.id for c in client.containers.list(all=True, filters=mine, sparse=True)}
    out = DockerRuntime(cpu_image.tag, client=client, gpu_style=cdi, memlock=MEMLOCK).run(
        LaunchRequest(run_dir, 1, {}, tmp_path / "log", 60, [5], "cuda")
    )
    assert out.exit_code is None and out.error and "\n" not in out.error
    assert f"no device {KIND}=5" in out.error and "it declares: 0, 1, all" in out.error
    assert {c.id for c in client.containers.list(all=True, filters=mine, sparse=True)} == before
    # a daemon whose spec files the kit cannot read (remote): the daemon's refusal, one line
    blind = gpus.Cdi(kind=KIND)
    out = DockerRuntime(cpu_image.tag, client=client, gpu_style=blind, memlock=MEMLOCK).run(
        LaunchRequest(run_dir, 1, {}, tmp_path / "log2", 60, [5], "cuda")
    )
    assert out.exit_code is None and out.error.startswith("CDI: the daemon cannot resolve")
    assert f"{KIND}=5" in out.error
    _assert_nothing_left(client, daemon_state)


def test_gpu_run_in_an_image_without_cuda_is_a_failed_run_with_its_reason(
    client, cpu_image, cdi, daemon_state, tmp_path
):
    """The cpu image's torch has no CUDA: the worker says so in one line; no hang, no leftover."""
    run_dir = tmp_path / "run"
    _write_spec(run_dir, run_id="cdi.nocuda.r0", device="cuda", nproc=1)
    out = DockerRuntime(cpu_image.tag, client=client, gpu_style=cdi, memlock=MEMLOCK).run(
        LaunchRequest(run_dir, 1, {}, tmp_path / "log", 120, [0], "cuda")
    )
    assert out.exit_code not in (0, None) and not out.timed_out
    assert "torch sees no GPU" in (tmp_path / "log").read_text()
    _assert_nothing_left(client, daemon_state)


def test_container_killed_for_memory_says_so(client, cpu_image, daemon_state, tmp_path):
    run_dir = tmp_path / "run"
    _write_spec(run_dir, run_id="oom.r0")
    box = DockerContainer(cpu_image.tag, client=client, memory="64m")
    hog = ["python3", "-c", "x = bytearray(1 << 30); print(len(x))"]
    with open(tmp_path / "log", "wb") as f:
        started = box.start(
            hog, LaunchRequest(run_dir, 1, {}, tmp_path / "log", 120, None, "cpu"), f
        )
        try:
            code, timed_out = started.wait(120)
            reason = started.reason()
        finally:
            started.remove()
    assert not timed_out and code != 0
    if code == 137 and reason is None:
        pytest.skip("this daemon's cgroups do not report OOM kills (OOMKilled unset)")
    assert reason and "OOMKilled" in reason and "0.1 GiB" in reason
    _assert_nothing_left(client, daemon_state)
