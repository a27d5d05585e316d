"""Podman as the second container engine, against a real rootful Podman's API socket.

scripts/ci-podman.sh installs Debian's podman, starts `podman system service` on
/run/podman/podman.sock and writes the CDI spec of the harmless test kind kit.test/gpu where
Podman reads it (/var/run/cdi), as scripts/ci-docker.sh does for Docker. The cpu image comes from
Docker's daemon the way a user carries it to another machine: `kit export`, then
`--image-archive`; the runs then go through the Podman runtime end to end.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

import pytest

from kit.io.errors import KitError
from kit.runtime.base import LaunchRequest
from kit.runtime.containers import gpus
from kit.runtime.containers.podman import PodmanContainer, podman_client
from kit.runtime.images import archive as archives
from kit.runtime.images import environments
from kit.runtime.images import image as images
from tests.conftest import (
    ROOT,
    allreduce_recipe,
    kill_once_a_container_runs,
    room_to_export,
    run_kit,
)

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.cpu_image]

KIND = "kit.test/gpu"
BASE = "kit-test-base:bookworm"
SIZES = "min_bytes: 8, max_bytes: 64, factor: 8, iters: 3, warmup_iters: 1, trials: 1"
RECIPE = allreduce_recipe("podman-smoke", SIZES, timeout_s=300, environment="cpu")


@pytest.fixture(scope="module")
def podman():
    try:
        return podman_client()
    except KitError as e:
        pytest.skip(f"needs Podman's API ({e}): as root, bash scripts/ci-podman.sh")


@pytest.fixture(scope="module")
def archive(podman, tmp_path_factory):
    """The cpu image as `kit export` writes it from Docker's daemon (built there if needed)."""
    import docker

    try:
        dclient = docker.from_env(timeout=300)
        dclient.ping()
        dclient.images.get(BASE)
    except Exception as e:
        pytest.skip(f"needs Docker's daemon and {BASE} to export the cpu image from ({e})")
    image = images.build("cpu", base_image_override=BASE, client=dclient, echo=lambda _: None)
    path = tmp_path_factory.mktemp("podman") / "kit-cpu.tar"
    room_to_export(dclient, image.tag, path.parent)
    archives.export(image.tag, path, client=dclient)
    yield path, image
    # a gigabyte: CI's disk is not ours (the image it loaded into Podman stays: another test
    # session beside this one may be running it)
    path.unlink(missing_ok=True)


def test_a_cpu_recipe_runs_under_podman_and_records_the_engine(podman, archive, tmp_path):
    path, image = archive
    recipe = tmp_path / "r.yaml"
    recipe.write_text(RECIPE)
    out = tmp_path / "b"
    proc = run_kit("reproduce", str(recipe), "--runtime", "podman", "--device", "cpu", "--smoke",
                   "--image-archive", str(path), "--out", str(out), timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    env = json.loads((out / "environment.json").read_text())
    assert (env["schema"], env["placement"], env["engine"], env["runtime"]) == (
        2,
        "local",
        "podman",
        "podman",
    )
    assert env["content_hash"] == image.content_hash  # the same pinned content as under Docker
    results = json.loads((out / "results.json").read_text())
    assert results["runtime"] == "podman" and results["status"] == "complete"
    assert all(r["status"] == "ok" for r in results["runs"])
    assert "podman run" in (out / "logs" / f"{results['runs'][0]['run_id']}.log").read_text()
    listed = podman.containers.list(all=True, filters={"label": "kit.run"}, ignore_removed=True)
    # this run's: those that mount its bundle (another run may share the engine meanwhile)
    here = str(out.resolve())
    mine = [c for c in listed if any(here in m.get("Source", "") for m in c.attrs["Mounts"])]
    assert mine == []
    # the bundle's report says which engine
    said = run_kit("report", str(out), timeout=300)
    assert said.returncode == 0, said.stderr[-2000:]


def test_cdi_devices_reach_a_podman_container(podman, archive, tmp_path, monkeypatch):
    """GPUs by CDI (nvidia.com/gpu=N on a GPU host; the test kind here): one device per GPU."""
    monkeypatch.setenv("KIT_CDI_KIND", KIND)
    try:
        style = PodmanContainer.gpu_request_style(podman)
    except KitError as e:
        pytest.skip(f"{e}: as root, bash scripts/ci-podman.sh")
    assert isinstance(style, gpus.Cdi) and {"0", "1", "all"} <= style.devices
    tag = archives.load_archive(archive[0], client=podman)[0]
    box = PodmanContainer(tag, client=podman, gpu_style=style, memlock=False)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "spec.json").write_text(json.dumps({"run_id": "cdi.show.r0"}))
    show = ["sh", "-c", "ls /dev | grep kit-test-gpu; env | grep KIT_TEST_CDI | sort"]
    for ids, want in (([1], ["kit-test-gpu1"]), (None, ["kit-test-gpu0", "kit-test-gpu1"])):
        log = tmp_path / f"show-{ids}.log"
        with open(log, "wb") as f:
            started = box.start(show, LaunchRequest(run_dir, 1, {}, log, 60, ids, "cuda"), f)
            try:
                code, timed_out = started.wait(60)
            finally:
                started.remove()
        text = log.read_text()
        assert code == 0 and not timed_out, text
        assert re.findall(r"kit-test-gpu\d", text) == want
    assert box.shown(["x"])[:2] == ["podman", "run"]


def test_podman_needs_a_cdi_spec_for_gpus(podman, monkeypatch):
    monkeypatch.setenv("KIT_CDI_KIND", "kit.test/absent")
    with pytest.raises(KitError, match=r"no CDI spec of kit\.test/absent"):
        PodmanContainer.gpu_request_style(podman)


def test_an_absent_podman_socket_is_one_line(monkeypatch):
    monkeypatch.setenv("KIT_PODMAN_HOST", "unix:///nonexistent/podman.sock")
    with pytest.raises(KitError) as e:
        podman_client()
    assert "\n" not in str(e.value) and "podman system service" in str(e.value)


def test_kit_build_and_export_name_the_engine(tmp_path):
    proc = run_kit("export", "cpu", "-o", str(tmp_path / "x.tar"), "--runtime", "nope")
    assert proc.returncode == 2 and "--runtime 'nope': allowed: docker, podman" in proc.stderr
    assert environments.load("cpu").name == "cpu"


def test_sigkill_of_the_driver_leaves_no_podman_container(podman, archive, tmp_path):
    """SIGKILL runs no handler: the container's guard ends it when the heartbeat stops, and
    Podman removes it as it exits (nothing left for the next run to remove)."""
    path, _ = archive
    recipe = tmp_path / "r.yaml"
    recipe.write_text(RECIPE.replace("iters: 3,", "iters: 1000000,").replace(
        "trials: 1}", "trials: 10000}"))  # fmt: skip
    owner = f"kit-test-podman-kill-{time.time_ns()}"
    proc = subprocess.Popen([sys.executable, "-m", "kit", "reproduce", str(recipe), "--runtime", "podman",
                             "--device", "cpu", "--smoke", "--image-archive", str(path), "--out",
                             str(tmp_path / "b")], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "PYTHONPATH": str(ROOT), "KIT_OWNER": owner})  # fmt: skip
    mine = {"label": ["kit.run", f"kit.owner={owner}"]}
    try:
        kill_once_a_container_runs(proc, podman, mine, 300)
    finally:
        if proc.poll() is None:
            proc.kill()
        for c in podman.containers.list(
            all=True, filters={"label": f"kit.owner={owner}"}, sparse=True
        ):
            c.remove(force=True)


def test_a_driver_killed_between_create_and_start_leaves_no_podman_container(podman, archive):
    from tests.integration.test_docker_env import killed_after_create

    path, image = archive
    if not podman.images.list(name=image.tag):  # loaded by an earlier test, or here
        with open(path, "rb") as f:
            podman.images.load(f)
    killed_after_create(podman, image.tag, "podman", "PodmanContainer")


def test_a_local_base_in_podman_is_not_pinned_by_the_digest_podman_computes(podman):
    """Podman gives every image a repo digest, a `podman load`ed local base too
    (docker.io/library/NAME@sha256:...), which no registry serves: a base named by its tag is
    not pinned by it, as under Docker (a README check, 2026-12-03, found a Podman bundle FROM
    the local test base recorded as "pinned image")."""
    from kit.model.environment import pin_of

    try:
        held = podman.images.get(BASE)
    except Exception as e:
        pytest.skip(f"needs {BASE} loaded into Podman (scripts/ci-podman.sh): {e}")
    assert any("@sha256:" in d for d in held.attrs.get("RepoDigests") or [])  # Podman's own
    image_id, digest = images.base_identity(podman, BASE)
    assert image_id == held.id and digest is None
    assert pin_of(BASE, digest) == (False, "local base image, not by digest")
