"""Error paths of environments and the docker runtime that a daemon here cannot produce on demand
(no GPU, no NVIDIA Container Toolkit), with a fake client; and environment loading errors.

The real builds and runs are tested against a real daemon in tests/integration/test_docker_env.py.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import docker
import pytest

from kit.errors import InputError, KitError
from kit.model import Environment
from kit.run import rerun
from kit.runtime.docker import client as dclient
from kit.runtime.docker import environments
from kit.runtime.docker import runtime as rt


class FakeClient:
    def __init__(self, info: dict, create_error: Exception | None = None) -> None:
        self._info = info
        self.containers = self
        self.create_error = create_error
        self.created: list[dict] = []

    def info(self) -> dict:
        return self._info

    def create(self, **kwargs):  # containers.create
        self.created.append(kwargs)
        raise self.create_error


def test_gpu_support_reads_the_daemon_runtimes(monkeypatch):
    monkeypatch.setattr(dclient, "CDI_DIRS", ())
    assert (
        dclient.gpu_support(FakeClient({"Runtimes": {"runc": {}, "nvidia": {}}}))
        == "nvidia runtime"
    )
    assert dclient.gpu_support(FakeClient({"Runtimes": {"runc": {}}})) is None


def test_gpu_support_sees_cdi_specs(monkeypatch, tmp_path):
    (tmp_path / "nvidia.yaml").write_text("cdiVersion: 0.5.0\n")
    monkeypatch.setattr(dclient, "CDI_DIRS", (str(tmp_path),))
    assert dclient.gpu_support(FakeClient({"Runtimes": {"runc": {}}})) == "cdi"


def test_gpu_run_without_toolkit_is_one_line_naming_the_toolkit(monkeypatch, tmp_path):
    monkeypatch.setattr(dclient, "CDI_DIRS", ())
    client = FakeClient({"Runtimes": {"runc": {}}})
    with pytest.raises(KitError) as info:
        rt.prepare_runtime("cpu", "cuda", client=client)
    assert "NVIDIA Container Toolkit" in str(info.value) and "\n" not in str(info.value)
    runtime = rt.DockerRuntime("kit-x:1", client=client)
    (tmp_path / "spec.json").write_text('{"run_id": "a.p2p.r0"}')
    out = runtime.run(tmp_path, 2, {}, tmp_path / "log", 10, None, "cuda")
    assert out.exit_code is None and "NVIDIA Container Toolkit" in out.error
    assert client.created == []  # refused before any container was made


def test_daemon_refusing_gpus_becomes_the_toolkit_hint(monkeypatch, tmp_path):
    monkeypatch.setattr(dclient, "CDI_DIRS", ())
    err = docker.errors.APIError(
        "500", explanation='could not select device driver "" with capabilities: [[gpu]]'
    )
    client = FakeClient({"Runtimes": {"nvidia": {}}}, create_error=err)
    (tmp_path / "spec.json").write_text('{"run_id": "a.p2p.r0"}')
    out = rt.DockerRuntime("kit-x:1", client=client).run(
        tmp_path, 2, {}, tmp_path / "log", 10, [0, 1], "cuda"
    )
    assert out.exit_code is None and not out.timed_out
    assert "NVIDIA Container Toolkit" in out.error and "could not select device driver" in out.error


def test_gpu_container_options(tmp_path):
    (tmp_path / "spec.json").write_text('{"run_id": "allreduce.cross.r1"}')
    runtime = rt.DockerRuntime("kit-cuda13:abc", client=FakeClient({}))
    opts = runtime.container_options(tmp_path, 2, {"NCCL_P2P_DISABLE": "1"}, [0, 4], "cuda")
    (req,) = opts["device_requests"]
    assert req["DeviceIDs"] == ["0", "4"] and req["Capabilities"] == [["gpu"]]
    assert {u["Name"]: u["Soft"] for u in opts["ulimits"]} == {"stack": 64 << 20, "memlock": -1}
    assert opts["environment"]["NCCL_P2P_DISABLE"] == "1"
    assert opts["labels"][dclient.LABEL_RUN] == "allreduce.cross.r1"
    assert opts["volumes"] == {str(tmp_path.resolve()): {"bind": "/kit/run", "mode": "rw"}}
    assert opts["command"] == ["torchrun", "--standalone", "--nproc-per-node=2", "-m",
                               "kit.worker", "/kit/run/spec.json"]  # fmt: skip
    assert opts["shm_size"] == "16g" and opts["init"] is True
    all_gpus = runtime.container_options(tmp_path, 2, {}, None, "cuda")["device_requests"][0]
    assert all_gpus["Count"] == -1


def test_unknown_environment_lists_the_available_ones():
    with pytest.raises(InputError, match=r"environment 'nope': .* available: cpu, cuda13"):
        environments.load("nope")


def test_bad_env_yaml_names_file_and_field(tmp_path: Path):
    src = environments.load("cpu")
    d = tmp_path / "bad"
    d.mkdir()
    for name in ("Dockerfile", "requirements.lock"):
        (d / name).write_bytes((src.path / name).read_bytes())
    (d / "env.yaml").write_text("name: bad\npyhton: '3.11'\n")
    with pytest.raises(InputError, match=r"bad/env.yaml: field 'pyhton': Extra inputs"):
        environments.load(d)
    (d / "env.yaml").write_text("device: tpu\n")
    with pytest.raises(InputError, match=r"field 'device': 'tpu'; allowed: cuda, cpu"):
        environments.load(d)


def test_locks_pin_every_package_with_a_hash():
    for name in environments.available():
        env = environments.load(name)
        entries = [ln for ln in env.lock.read_text().splitlines() if "==" in ln]
        assert entries and len(environments.lock_hashes(env.lock)) == len(entries)
        assert env.default_base_image().split("@")[1].startswith("sha256:")
    cuda = environments.load("cuda13").lock.read_text()
    for pin in ("torch==2.11.0 ", "nvidia-nccl-cu13==2.28.9 ", "torchvision==", "transformers==",
                "peft==", "accelerate==", "nvidia-ml-py=="):  # fmt: skip
        assert pin in cuda, pin


def test_pip_target_selects_the_image_not_the_host():
    args = environments.pip_target_args(environments.load("cuda13"))
    assert args[args.index("--python-version") + 1] == "3.12"
    assert args[args.index("--abi") + 1] == "cp312"
    plats = [args[i + 1] for i, a in enumerate(args) if a == "--platform"]
    assert plats[0] == "manylinux_2_39_x86_64" and "manylinux2014_x86_64" in plats


def test_bundle_rerun_with_an_archive_loads_it_and_never_builds(monkeypatch, tmp_path):
    """`kit reproduce BUNDLE --image-archive A` on a machine that cannot build: A is loaded.

    The daemon parts are stand-ins here; test_docker_env runs the same path against dockerd.
    """
    archive = tmp_path / "kit-cpu.tar"
    calls = []

    def no_build(*args, **kwargs):
        raise AssertionError("built although an archive was given")

    def load(path, env_name, client=None):
        calls.append((path, env_name))
        return SimpleNamespace(tag="kit-env-cpu:loaded")

    monkeypatch.setattr(rerun, "build", no_build)
    monkeypatch.setattr(rerun, "from_archive", load)
    monkeypatch.setattr(rerun, "docker_client", lambda: "client")
    monkeypatch.setattr(rerun, "gpu_support", lambda client: None)
    monkeypatch.setattr(rerun, "probe", lambda tag, client=None, gpus=False: {})
    monkeypatch.setattr(rerun, "fingerprint", lambda image, container, runtime: {"tag": image.tag})
    recorded = Environment.model_validate({"name": "cpu", "runtime": "docker", "pinned": True})
    target = rerun.rerun_environment(recorded, image_archive=archive)
    assert calls == [(archive, "cpu")]
    assert target.runtime == "docker" and target.fingerprint == {"tag": "kit-env-cpu:loaded"}
