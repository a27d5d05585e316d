"""Pinned environments and the docker runtime against a real Docker daemon.

Builds the CPU environment from a local debootstrap base image (no registry is reachable in CI)
through the host-side wheelhouse, then runs the all-reduce worker in containers with two gloo
processes through the real `kit reproduce` path, and checks that crashes, timeouts and
interrupts leave no container, network or volume behind.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from kit.bundle import sha256_file
from kit.io import locks
from kit.io.errors import KitError
from kit.runtime.base import LaunchRequest
from kit.runtime.containers.client import LABEL_OWNER, LABEL_RUN, cleanup, leftovers
from kit.runtime.images import archive as archives
from kit.runtime.images import environments
from kit.runtime.images import fingerprint as fingerprints
from kit.runtime.images import image as images
from kit.runtime.pinned import DockerRuntime
from tests.conftest import kill_once_a_container_runs, run_kit, sigint_as_default

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.cpu_image]

ROOT = Path(__file__).resolve().parents[2]

BASE = os.environ.get("KIT_TEST_BASE_IMAGE", "kit-test-base:bookworm")
PY = sys.executable
# what this test session's drivers create carries this owner; the tests touch nothing else
OWNER = f"kit-test-{os.getpid()}-{os.urandom(4).hex()}"
os.environ["KIT_OWNER"] = OWNER  # also the runtimes and probes the tests make in-process


def _daemon():
    try:
        import docker

        client = docker.from_env(timeout=300)
        client.ping()
        return client, None
    except Exception as e:
        return None, type(e).__name__


@pytest.fixture(scope="session")
def client():
    c, why = _daemon()
    if c is None:
        pytest.skip(
            f"needs a Docker daemon (none answers: {why}): as root, bash scripts/ci-docker.sh (Docker 26 from Debian trixie's .deb files)"
        )
    return c


@pytest.fixture(scope="session")
def base_image(client):
    """The local base image (debootstrap bookworm + python3), made once per machine."""
    import docker

    try:
        client.images.get(BASE)
    except docker.errors.ImageNotFound:
        if shutil.which("debootstrap") is None:
            pytest.skip(
                f"needs debootstrap to make the base image {BASE}: apt-get install debootstrap"
            )
        subprocess.run([str(ROOT / "tests/docker/make_base_image.sh"), BASE], check=True)
    return BASE


@pytest.fixture(scope="session")
def daemon_state(client):
    """Nothing of this session's owner exists yet (the owner is new): nothing to record."""
    return OWNER


@pytest.fixture(scope="session")
def cpu_image(client, base_image, daemon_state):
    """The cpu environment, built or reused: its shared tag (kit-cpu:...) is never removed."""
    env = environments.load("cpu")
    lines: list[str] = []
    image = images.build(env, base_image_override=base_image, client=client, echo=lines.append)
    assert image.cached or any("Successfully tagged" in ln for ln in lines), lines[-5:]
    return image


def _assert_nothing_left(client, daemon_state) -> None:
    """Nothing this session's drivers made is left; what others own is not looked at."""
    mine = {"label": f"{LABEL_OWNER}={OWNER}"}
    assert leftovers(client, OWNER) == []
    assert client.containers.list(all=True, filters=mine) == []
    assert client.networks.list(filters=mine) == []
    assert client.volumes.list(filters=mine) == []


# --- images -----------------------------------------------------------------------------------


def test_second_build_is_a_cache_hit(client, cpu_image, base_image):
    again = images.build("cpu", base_image_override=base_image, client=client, echo=print)
    assert again.cached
    assert again.tag == cpu_image.tag
    assert again.image_id == cpu_image.image_id
    labels = client.images.get(cpu_image.tag).labels
    assert labels[images.LABEL_HASH] == cpu_image.content_hash


def test_tag_is_a_content_hash(tmp_path, base_image):
    env_dir = tmp_path / "cpu"
    shutil.copytree(environments.load("cpu").path, env_dir)
    env = environments.load(env_dir)
    tag = images.image_tag(env, base_image)
    assert tag == images.image_tag(environments.load(env_dir), base_image)  # stable
    assert tag.startswith("kit-cpu:") and len(tag.split(":")[1]) == 12
    # changing a pin of the lock changes the tag
    lock = env_dir / "requirements.lock"
    text = lock.read_text()
    lock.write_text(text.replace("mdurl==0.1.2", "mdurl==0.1.1"))
    assert images.image_tag(env, base_image) != tag
    lock.write_text(text)
    assert images.image_tag(env, base_image) == tag
    # so do the Dockerfile and the base image
    assert images.image_tag(env, "debian:other") != tag
    (env_dir / "Dockerfile").write_text((env_dir / "Dockerfile").read_text() + "\n# changed\n")
    assert images.image_tag(env, base_image) != tag


def test_probe_reports_what_the_lock_pins(client, cpu_image):
    info = fingerprints.probe(cpu_image.tag, client=client)
    lock = environments.load("cpu").lock.read_text()
    assert f"torch=={info['torch']} " in lock
    assert info["python"].startswith("3.11.")
    assert info["cuda"] is None and info["nccl"] is None and info["gpus"] == 0
    assert "gloo" in info["distributed_backends"]
    for pkg in ("transformers", "peft", "accelerate", "nvidia-ml-py"):
        assert f"{pkg}=={info['packages'][pkg]} " in lock
    fp = fingerprints.fingerprint(cpu_image, info, runtime="docker")
    for key in ("name", "pinned", "runtime", "image_id", "image_tag", "base_image",
                "dockerfile_sha256", "lock_sha256", "kit_version", "container"):  # fmt: skip
        assert fp[key] not in (None, ""), key
    assert fp["image_id"] == client.images.get(cpu_image.tag).id
    assert fp["lock_sha256"] == sha256_file(environments.load("cpu").lock)


def _tiny_env(tmp_path: Path, dockerfile_tail: str = "") -> environments.Environment:
    """An environment with a one-wheel lock (mdurl) to exercise the build path in seconds."""
    src = environments.load("cpu")
    d = tmp_path / "tiny"
    d.mkdir()
    lock = src.lock.read_text()
    i = lock.index("mdurl==")
    (d / "requirements.lock").write_text(lock[i : lock.index("\n", lock.index("--hash", i))] + "\n")
    (d / "Dockerfile").write_text(src.dockerfile.read_text() + dockerfile_tail)
    shutil.copy2(src.path / "env.yaml", d / "env.yaml")
    (d / "env.yaml").write_text((d / "env.yaml").read_text().replace("name: cpu", "name: tiny"))
    return environments.load(d)


def test_wheelhouse_refuses_a_wheel_that_does_not_match_the_lock(tmp_path):
    env = _tiny_env(tmp_path)
    text = env.lock.read_text()
    digest = text.split("sha256:")[1].strip()
    env.lock.write_text(text.replace(digest, "0" * 64))
    with pytest.raises(KitError, match=r"pip could not download .*(hash|HASH)"):
        environments.wheelhouse(env, cache=tmp_path / "wheels")


def test_failed_build_names_the_error_and_keeps_the_log(client, base_image, tmp_path):
    env = _tiny_env(tmp_path, "RUN echo about to fail && exit 3\n")
    with pytest.raises(images.BuildError) as info:
        images.build(env, base_image_override=base_image, client=client, echo=lambda _: None)
    err = info.value
    assert "building environment 'tiny'" in str(err)
    assert "returned a non-zero code: 3" in str(err)
    assert "\n" not in str(err)
    assert "about to fail" in err.log_tail
    assert err.log_path is not None and "about to fail" in err.log_path.read_text()


def test_export_and_load_round_trip(client, base_image, tmp_path):
    import docker

    # a tag of this test's own: it removes the image, which another session's test may share
    env = _tiny_env(tmp_path, f"RUN echo {os.urandom(6).hex()}\n")
    image = images.build(env, base_image_override=base_image, client=client, echo=lambda _: None)
    archive = archives.export(image.tag, tmp_path / "tiny.tar", client=client)
    assert archive.stat().st_size > 1_000_000
    client.images.remove(image.tag, force=True)
    with pytest.raises(docker.errors.ImageNotFound):
        client.images.get(image.tag)
    assert image.tag in archives.load_archive(archive, client=client)
    assert client.images.get(image.tag).id == image.image_id
    assert images.build(env, base_image_override=base_image, client=client).cached
    client.images.remove(image.tag, force=True)
    archive.unlink()


def test_an_export_the_daemon_refuses_says_the_daemons_words(client, base_image, tmp_path):
    """The daemon fails the save (here: the image is removed between the kit's lookup and its
    save; in CI a daemon short of disk): one line with what the daemon said, no file left. It
    read "-o kit-cpu.tar: not written: None" (the SDK's errors are OSErrors, taken for the
    file's)."""
    tag = f"kit-test-gone-{os.urandom(5).hex()}:1"
    dockerfile = f"FROM {base_image}\nLABEL kit.test.gone={tag}\n"
    client.images.build(fileobj=io.BytesIO(dockerfile.encode()), tag=tag, rm=True,
                        labels={LABEL_OWNER: OWNER})  # fmt: skip

    class Vanishing:
        """The real daemon, whose image goes right after the kit looked it up."""

        def __init__(self) -> None:
            self.images = self

        def get(self, name: str):  # type: ignore[no-untyped-def]
            image = client.images.get(name)
            client.images.remove(name, force=True)
            return image

    out = tmp_path / "gone.tar"
    with pytest.raises(KitError) as info:
        archives.export(tag, out, client=Vanishing())
    said = str(info.value)
    assert said.startswith(f"{tag}: not saved: ") and "None" not in said, said
    assert any(w in said.lower() for w in ("no such image", "reference does not exist")), said
    assert "\n" not in said
    assert list(tmp_path.iterdir()) == []


def test_a_second_kit_waits_for_the_build_of_its_tag_and_reuses_it(client, base_image, tmp_path):
    """Two kits that need one image (parallel tests, two jobs on a node) build it once: the
    second says it waits, then takes the first one's image. Here the test is the first kit."""
    env = _tiny_env(tmp_path, f"RUN echo {os.urandom(6).hex()}\n")  # a tag nobody has built
    args = images.build_args(env, base_image)
    digest = images.content_hash(env, args)
    tag = f"kit-tiny:{digest[:12]}"
    said: list[str] = []
    waiting = threading.Event()
    second: list[images.Image] = []

    def echo(line: str) -> None:
        said.append(line)
        if line.startswith("waiting for another kit"):
            waiting.set()

    def build_second() -> None:
        second.append(images.build(env, base_image, client=client, echo=echo))

    try:
        with locks.held(images._build_lock(client, tag)):
            thread = threading.Thread(target=build_second)
            thread.start()
            assert waiting.wait(60), said
            first = images._build(env, tag, args, digest, client, lambda _: None)
        thread.join(120)
        assert not thread.is_alive()
        assert said == [f"waiting for another kit on this host that builds {tag}"]
        assert second[0].cached and second[0].tag == tag and second[0].image_id == first
    finally:
        with contextlib.suppress(Exception):
            client.images.remove(tag, force=True)


# --- runs in containers -----------------------------------------------------------------------


def _recipe(
    tmp_path: Path,
    iters: int = 3,
    timeout_s: float = 300,
    trials: int = 1,
    variants: str = "[p2p, no-p2p]",
) -> Path:
    """Both variants where a test follows the runs; one where only the environment is tested."""
    path = tmp_path / "recipe.yaml"
    path.write_text(
        f"""kit: 1
name: docker-smoke
description: all-reduce in containers, two gloo processes
environment: cpu
gpus: 2
repeats: 1
timeout_s: {timeout_s}
variants: {variants}
benchmarks:
  - kind: allreduce
    params: {{min_bytes: 8, max_bytes: 4096, factor: 8, iters: {iters}, warmup_iters: 1, trials: {trials}}}
"""
    )
    return path


def _reproduce(recipe: Path, out: Path, base_image: str) -> list[str]:
    return [PY, "-m", "kit.cli", "reproduce", str(recipe), "--device", "cpu", "--smoke",
            "--runtime", "docker", "--env", "cpu", "--base-image", base_image,
            "--out", str(out)]  # fmt: skip


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "KIT_OWNER": OWNER}


def _kit(cmd: list[str], timeout: float = 300) -> subprocess.CompletedProcess:
    """A `python -m kit.cli ...` command line run to its end, forked from the test zygote
    (tests.conftest.run_kit: the same process, without paying the kit's imports again); the
    commands a test signals start as processes of their own."""
    assert cmd[:3] == [PY, "-m", "kit.cli"], cmd
    return run_kit(*cmd[3:], env=_env(), timeout=timeout)


def test_reproduce_runs_each_variant_in_a_container(
    client, cpu_image, base_image, daemon_state, tmp_path
):
    out = tmp_path / "bundle"
    proc = _kit(_reproduce(_recipe(tmp_path), out, base_image))
    assert proc.returncode == 0, proc.stderr[-2000:]
    results = json.loads((out / "results.json").read_text())
    # FROM the local test base (a `docker import`): not pinned, and said so (issue 49)
    assert results["runtime"] == "docker" and results["pinned"] is False
    assert results["status"] == "complete"
    assert [r["status"] for r in results["runs"]] == ["ok", "ok"]
    for r in results["runs"]:
        assert r["world_size"] == 2 and r["backend"] == "gloo"
        assert r["launch"]["command"][:3] == ["docker", "run", cpu_image.tag]
        assert r["versions"]["torch"] == "2.13.0+cpu"
        assert r["metrics"]["busbw_peak"]["value"] > 0
    assert [r["env"].get("NCCL_P2P_DISABLE") for r in results["runs"]] == [None, "1"]
    env = json.loads((out / "environment.json").read_text())
    assert env["image_tag"] == cpu_image.tag and env["image_id"] == cpu_image.image_id
    assert env["runtime"] == "docker" and env["pinned"] is False
    assert env["pinning"] == "local base image, not by digest"
    assert env["container"]["torch"] == "2.13.0+cpu"
    assert env["base_image"] == base_image and env["lock_sha256"] == cpu_image.lock_sha256
    log = (out / "logs" / "allreduce.no-p2p.r0.log").read_text()
    assert f"docker run {cpu_image.tag} torchrun" in log and "busbw" in log
    verify = _kit([PY, "-m", "kit.cli", "verify", str(out)])
    assert verify.returncode == 0, verify.stdout + verify.stderr
    _assert_nothing_left(client, daemon_state)

    # a rerun never builds FROM the base the bundle names: without --base-image it is refused
    again = tmp_path / "rerun"
    rerun_cmd = [PY, "-m", "kit.cli", "reproduce", str(out), "--strict-env", "--out", str(again)]
    proc = _kit(rerun_cmd)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr[-2000:]
    assert "--base-image" in proc.stderr and not again.exists()
    # the user names the same local base (a site with no registry): same image (a cache hit)
    proc = _kit([*rerun_cmd, "--base-image", base_image])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (
        "environment matches" in proc.stderr and f"FROM {base_image} (--base-image)" in proc.stderr
    )
    rerun = json.loads((again / "results.json").read_text())
    assert rerun["runtime"] == "docker" and rerun["reproduces"]["bundle"] == str(out)
    assert rerun["environment_diff"] == []
    assert [r["status"] for r in rerun["runs"]] == ["ok", "ok"]
    assert json.loads((again / "environment.json").read_text())["image_id"] == env["image_id"]
    _assert_nothing_left(client, daemon_state)


def _write_spec(run_dir: Path, **overrides) -> None:
    spec = {"schema": 1, "run_id": "t.crash.r0", "benchmark": "allreduce", "kind": "allreduce",
            "variant": "p2p", "repeat": 0, "device": "cpu", "nproc": 2, "smoke": True,
            "params": {"min_bytes": 8, "max_bytes": 64, "iters": 1, "warmup_iters": 0,
                       "trials": 1}, "env": {}, "result_path": "result.json"}  # fmt: skip
    spec.update(overrides)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "spec.json").write_text(json.dumps(spec))


def test_crashing_container_keeps_status_and_log(client, cpu_image, daemon_state, tmp_path):
    run_dir = tmp_path / "run"
    _write_spec(run_dir, schema=99)  # the worker refuses a spec it cannot read
    log = tmp_path / "run.log"
    rt = DockerRuntime(cpu_image.tag, client=client)
    outcome = rt.run(LaunchRequest(run_dir, 2, {}, log, timeout_s=120, gpu_ids=None, device="cpu"))
    assert outcome.exit_code not in (0, None)
    assert not outcome.timed_out and not outcome.interrupted
    assert outcome.command[:3] == ["docker", "run", cpu_image.tag]
    assert "run spec schema 99" in log.read_text()
    assert not (run_dir / "result.json").exists()
    _assert_nothing_left(client, daemon_state)


def test_timeout_stops_and_removes_the_container(
    client, cpu_image, base_image, daemon_state, tmp_path
):
    out = tmp_path / "bundle"
    recipe = _recipe(tmp_path, iters=10**6, trials=10**4, timeout_s=8, variants="[p2p]")
    t0 = time.monotonic()
    proc = subprocess.run(_reproduce(recipe, out, base_image), capture_output=True, text=True,
                          env=_env(), timeout=300)  # fmt: skip
    assert proc.returncode == 1, proc.stderr[-2000:]
    results = json.loads((out / "results.json").read_text())
    assert [r["status"] for r in results["runs"]] == ["timeout"]
    assert results["status"] == "failed"  # every attempt timed out: nothing measured
    assert time.monotonic() - t0 < 90  # an 8 s timeout, a 10 s grace, start-up
    _assert_nothing_left(client, daemon_state)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_interrupted_run_leaves_nothing_behind(
    client, cpu_image, base_image, daemon_state, tmp_path, sig
):
    out = tmp_path / "bundle"
    recipe = _recipe(tmp_path, iters=10**6, trials=10**4, timeout_s=300)
    proc = subprocess.Popen(_reproduce(recipe, out, base_image), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=_env(),
                            preexec_fn=sigint_as_default)  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not client.containers.list(
            filters={"label": [LABEL_RUN, f"{LABEL_OWNER}={OWNER}"]}, sparse=True
        ):
            # wait until the first run's container exists (not the probe's)
            assert proc.poll() is None, proc.communicate()[1][-2000:]
            assert time.monotonic() < deadline, "no container started"
            time.sleep(0.2)
        time.sleep(2)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
        cleanup(client, OWNER)
    assert proc.returncode == 128 + sig, err[-2000:]  # SIGINT 130, SIGTERM 143
    assert "Traceback" not in err
    results = json.loads((out / "results.json").read_text())
    assert results["status"] == "interrupted"
    assert len(results["runs"]) == 1 and results["runs"][0]["status"] == "failed"
    assert (out / "MANIFEST.sha256").is_file()
    _assert_nothing_left(client, daemon_state)


def test_sigkill_of_the_driver_stops_its_container(
    client, cpu_image, base_image, daemon_state, tmp_path
):
    """SIGKILL runs no handler: the container's guard (kit.worker.guard) sees the heartbeat stop
    and stops the container itself, within the heartbeat's 8 s and the guard's grace, and the
    engine removes it as it exits (no stopped container is left for the next run to remove);
    `kit seal` then never records the run the driver lost as "ok"."""
    out = tmp_path / "bundle"
    recipe = _recipe(tmp_path, iters=10**6, trials=10**4, timeout_s=600)
    proc = subprocess.Popen(_reproduce(recipe, out, base_image), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=_env())  # fmt: skip
    mine = {"label": [LABEL_RUN, f"{LABEL_OWNER}={OWNER}"]}
    try:
        kill_once_a_container_runs(proc, client, mine, 120)
    finally:
        cleanup(client, OWNER)
    sealed = _kit([PY, "-m", "kit.cli", "seal", str(out)])
    assert sealed.returncode == 0, sealed.stderr[-2000:]
    results = json.loads((out / "results.json").read_text())
    assert all(r["status"] != "ok" for r in results["runs"])


def test_sigkill_of_the_driver_while_it_probes_leaves_no_probe_container(
    client, cpu_image, base_image, daemon_state, tmp_path
):
    """The image's probe container, too, is the engine's to remove as it exits."""
    out = tmp_path / "bundle"
    proc = subprocess.Popen(_reproduce(_recipe(tmp_path), out, base_image),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env())  # fmt: skip
    probes = {"label": ["kit.probe", f"{LABEL_OWNER}={OWNER}"]}
    try:
        deadline = time.monotonic() + 120
        while not client.containers.list(all=True, filters=probes, sparse=True):
            assert proc.poll() is None, proc.communicate()[1][-2000:]
            assert time.monotonic() < deadline, "no probe container started"
            time.sleep(0.05)
        proc.kill()
        proc.communicate(timeout=30)
        gone_by = time.monotonic() + 60  # the probe ends itself; the engine removes it
        while client.containers.list(all=True, filters=probes, sparse=True):
            assert time.monotonic() < gone_by, "the probe container outlived its killed driver"
            time.sleep(1)
    finally:
        if proc.poll() is None:
            proc.kill()
        cleanup(client, OWNER)


KILLED_AFTER_CREATE = """
import sys, time, docker
from kit.runtime.containers.{module} import {engine}
from kit.runtime.containers.docker import start_removed_on_exit
class Stuck({engine}):
    @classmethod
    def create(cls, client, opts):
        made = super().create(client, opts)
        print("created", made.name, flush=True)
        time.sleep(600)  # killed here: created, never started
client = {engine}.connect()
start_removed_on_exit(client, Stuck, {{"image": sys.argv[1], "command": ["true"],
                                       "labels": {{"kit.owner": sys.argv[2]}}}})
"""


def killed_after_create(client, image: str, module: str, engine: str) -> None:
    """A driver SIGKILLed between creating a container and starting it: its reaper removes the
    created container (it never ran, so neither its guard nor AutoRemove can)."""
    owner = f"kit-test-created-{os.getpid()}-{time.time_ns()}"
    code = KILLED_AFTER_CREATE.format(module=module, engine=engine)
    proc = subprocess.Popen([PY, "-c", code, image, owner], stdout=subprocess.PIPE, text=True,
                            env=_env())  # fmt: skip
    mine = {"label": f"{LABEL_OWNER}={owner}"}
    try:
        assert proc.stdout.readline().startswith("created"), proc.communicate()
        assert [c.status for c in client.containers.list(all=True, filters=mine)] == ["created"]
        proc.kill()
        proc.wait(timeout=30)
        gone_by = time.monotonic() + 20
        while client.containers.list(all=True, filters=mine, sparse=True):
            assert time.monotonic() < gone_by, "a created container outlived its killed driver"
            time.sleep(0.5)
    finally:
        if proc.poll() is None:
            proc.kill()
        for c in client.containers.list(all=True, filters=mine, sparse=True):
            c.remove(force=True)


def test_a_driver_killed_between_create_and_start_leaves_no_container(client, base_image):
    killed_after_create(client, base_image, "docker", "DockerContainer")


def test_container_removed_from_outside_is_a_failed_run(
    client, cpu_image, base_image, daemon_state, tmp_path
):
    """`docker rm -f` of a run's container mid-run: that run fails with the reason, the next
    run still goes, and the bundle is sealed failed (never complete). Each run's container is
    removed as it appears, the second too: its start is the proof that the driver went on, and
    its removal spares the suite a run that would otherwise spin to its timeout."""
    out = tmp_path / "bundle"
    # a run goes until removed; the timeout (a guard) leaves room for a container's start under load
    recipe = _recipe(tmp_path, iters=10**6, trials=10**4, timeout_s=120)
    proc = subprocess.Popen(_reproduce(recipe, out, base_image), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=_env())  # fmt: skip
    mine = {"label": [LABEL_RUN, f"{LABEL_OWNER}={OWNER}"]}
    removed: list[str] = []
    try:
        deadline = time.monotonic() + 240
        while len(removed) < 2:
            for found in client.containers.list(filters=mine, sparse=True):
                run = found.attrs["Labels"][LABEL_RUN]  # sparse: the list's own fields
                if run not in removed:
                    time.sleep(2)  # started, not only created
                    found.remove(force=True)  # what `docker rm -f` does
                    removed.append(run)
            assert proc.poll() is None, proc.communicate()[1][-2000:]
            assert time.monotonic() < deadline, f"containers removed: {removed}"
            time.sleep(0.2)
        _, err = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
        cleanup(client, OWNER)
    assert "Traceback" not in err
    assert proc.returncode == 1, err[-2000:]
    results = json.loads((out / "results.json").read_text())
    assert [r["run_id"] for r in results["runs"]] == removed  # the driver went on to the next run
    for run in results["runs"]:
        assert run["status"] == "failed" and "killed from outside the kit" in run["error"], run
    assert results["status"] == "failed"
    assert (out / "MANIFEST.sha256").is_file()
    _assert_nothing_left(client, daemon_state)


def test_containers_carry_the_run_label(client, cpu_image, tmp_path):
    run_dir = tmp_path / "run"
    _write_spec(run_dir, run_id="label.check.r0")
    opts = DockerRuntime(cpu_image.tag, client=client).container_options(
        run_dir, 2, {"A": "1"}, None, "cpu"
    )
    assert opts["labels"][LABEL_RUN] == "label.check.r0"
    assert opts["device_requests"] == []


def test_image_archive_needs_the_docker_runtime(tmp_path):
    cmd = [PY, "-m", "kit.cli", "reproduce", str(_recipe(tmp_path)), "--device", "cpu",
           "--runtime", "host", "--image-archive", str(tmp_path / "x.tar")]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, env=_env())
    assert proc.returncode == 2
    assert (
        proc.stderr.strip()
        .splitlines()[-1]
        .startswith("kit: error: --image-archive: needs the docker runtime (--runtime docker)")
    )


def test_missing_base_image_fails_before_any_download(client, tmp_path, monkeypatch):
    env = _tiny_env(tmp_path)
    downloads: list[str] = []
    monkeypatch.setattr(images, "wheelhouse", lambda e, cache=None: downloads.append(e.name))
    with pytest.raises(
        KitError,
        match=r"base image kit-test-absent:none \(environment tiny\) is not on this machine",
    ):
        images.build(env, base_image_override="kit-test-absent:none", client=client,
                          echo=lambda _: None)  # fmt: skip
    assert downloads == []
