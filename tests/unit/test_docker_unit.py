"""Error paths of environments and the docker runtime that a daemon here cannot produce on demand
(no GPU, no NVIDIA Container Toolkit), with a fake client; and environment loading errors.

The real builds and runs are tested against a real daemon in tests/integration/test_docker_env.py.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import docker
import pytest

from kit.io.errors import InputError, KitError
from kit.model import Environment
from kit.run import registry, rerun
from kit.runtime import pinned as rt
from kit.runtime.base import LaunchRequest, RuntimeRequest
from kit.runtime.containers import client as dclient
from kit.runtime.containers import gpus
from kit.runtime.images import environments


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


def _cdi_spec(folder: Path, kind: str, names: list[str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    devices = "".join(
        f"  - name: '{n}'\n    containerEdits: {{deviceNodes: [{{path: /dev/null}}]}}\n"
        for n in names
    )
    path = folder / f"{kind.replace('/', '_')}.yaml"
    path.write_text(f"cdiVersion: 0.6.0\nkind: {kind}\ndevices:\n{devices}")
    return path


def test_gpu_style_reads_the_daemon_runtimes(monkeypatch, tmp_path):
    monkeypatch.setattr(gpus, "CDI_DIRS", ())
    style = gpus.style(FakeClient({"Runtimes": {"runc": {}, "nvidia": {}}}))
    assert style is not None and style.name == "nvidia runtime"
    assert gpus.style(FakeClient({"Runtimes": {"runc": {}}})) is None
    # CDI directories with no spec for the GPU kind offer no GPU
    assert gpus.style(FakeClient({"Runtimes": {}, "CDISpecDirs": [str(tmp_path)]})) is None


def test_gpu_style_cdi_from_the_daemons_spec_dirs(monkeypatch, tmp_path):
    _cdi_spec(tmp_path, "nvidia.com/gpu", ["0", "1", "all"])
    _cdi_spec(tmp_path / "other", "vendor.example/thing", ["0"])
    style = gpus.style(FakeClient({"Runtimes": {"runc": {}}, "CDISpecDirs": [str(tmp_path)]}))
    assert isinstance(style, gpus.Cdi) and style.devices == {"0", "1", "all"}
    (req,) = style.requests([1, 0])
    assert req["Driver"] == "cdi" and req["DeviceIDs"] == ["nvidia.com/gpu=1", "nvidia.com/gpu=0"]
    assert style.requests(None)[0]["DeviceIDs"] == ["nvidia.com/gpu=all"]
    assert style.record() == {"gpu_request": "cdi", "cdi_kind": "nvidia.com/gpu"}
    with pytest.raises(KitError) as info:
        style.check([0, 3])
    msg = str(info.value)
    assert "no device nvidia.com/gpu=3" in msg and "it declares: 0, 1, all" in msg
    assert "\n" not in msg
    # both offered: the NVIDIA runtime, unless KIT_GPU_REQUEST=cdi chooses
    both = FakeClient({"Runtimes": {"nvidia": {}}, "CDISpecDirs": [str(tmp_path)]})
    assert gpus.style(both).name == "nvidia runtime"
    monkeypatch.setenv("KIT_GPU_REQUEST", "cdi")
    assert gpus.style(both).name == "cdi"
    monkeypatch.setenv("KIT_GPU_REQUEST", "amd")
    with pytest.raises(KitError, match=r"^KIT_GPU_REQUEST='amd': allowed: cdi, nvidia"):
        gpus.style(both)


def test_gpu_run_without_toolkit_is_one_line_naming_the_toolkit(monkeypatch, tmp_path):
    monkeypatch.setattr(gpus, "CDI_DIRS", ())
    client = FakeClient({"Runtimes": {"runc": {}}})
    with pytest.raises(KitError) as info:
        rt.prepare_runtime(RuntimeRequest("cpu", "cuda"), client=client)
    assert "NVIDIA Container Toolkit" in str(info.value) and "\n" not in str(info.value)
    assert "cdi generate" in str(info.value)
    runtime = rt.DockerRuntime("kit-x:1", client=client)
    (tmp_path / "spec.json").write_text('{"run_id": "a.p2p.r0"}')
    out = runtime.run(LaunchRequest(tmp_path, 2, {}, tmp_path / "log", 10, None, "cuda"))
    assert out.exit_code is None and "NVIDIA Container Toolkit" in out.error
    assert client.created == []  # refused before any container was made


def test_cdi_spec_lacking_a_gpu_fails_the_run_before_any_container(tmp_path):
    _cdi_spec(tmp_path / "cdi", "nvidia.com/gpu", ["0", "all"])
    client = FakeClient({"Runtimes": {}, "CDISpecDirs": [str(tmp_path / "cdi")]})
    (tmp_path / "spec.json").write_text('{"run_id": "a.p2p.r0"}')
    out = rt.DockerRuntime("kit-x:1", client=client).run(
        LaunchRequest(tmp_path, 2, {}, tmp_path / "log", 10, [0, 2], "cuda")
    )
    assert out.exit_code is None and "no device nvidia.com/gpu=2" in out.error
    assert client.created == []


def test_daemon_refusing_gpus_becomes_the_toolkit_hint(monkeypatch, tmp_path):
    monkeypatch.setattr(gpus, "CDI_DIRS", ())
    err = docker.errors.APIError(
        "500", explanation='could not select device driver "" with capabilities: [[gpu]]'
    )
    client = FakeClient({"Runtimes": {"nvidia": {}}}, create_error=err)
    (tmp_path / "spec.json").write_text('{"run_id": "a.p2p.r0"}')
    out = rt.DockerRuntime("kit-x:1", client=client).run(
        LaunchRequest(tmp_path, 2, {}, tmp_path / "log", 10, [0, 1], "cuda")
    )
    assert out.exit_code is None and not out.timed_out
    assert "NVIDIA Container Toolkit" in out.error and "could not select device driver" in out.error


def test_gpu_container_options(monkeypatch, tmp_path):
    monkeypatch.setattr(gpus, "CDI_DIRS", ())
    (tmp_path / "spec.json").write_text('{"run_id": "allreduce.cross.r1"}')
    runtime = rt.DockerRuntime("kit-cuda13:abc", client=FakeClient({"Runtimes": {"nvidia": {}}}))
    opts = runtime.container_options(tmp_path, 2, {"NCCL_P2P_DISABLE": "1"}, [0, 4], "cuda")
    (req,) = opts["device_requests"]
    assert req["DeviceIDs"] == ["0", "4"] and req["Capabilities"] == [["gpu"]]
    assert {u["Name"]: u["Soft"] for u in opts["ulimits"]} == {"stack": 64 << 20, "memlock": -1}
    assert opts["environment"]["NCCL_P2P_DISABLE"] == "1"
    assert opts["labels"][dclient.LABEL_RUN] == "allreduce.cross.r1"
    assert opts["volumes"] == {str(tmp_path.resolve()): {"bind": "/kit/run", "mode": "rw"}}
    # the guard stops the container when the driver's heartbeat stops (kit.worker.guard)
    assert opts["command"] == ["python", "-m", "kit.worker.guard", "--", "torchrun", "--standalone", "--nproc-per-node=2", "-m",
                               "kit.worker", "/kit/run/spec.json"]  # fmt: skip
    assert opts["shm_size"] == "16g" and opts["init"] is True
    # loopback only, under a host name that resolves (c10d and gloo look it up)
    assert opts["network_mode"] == "none"
    assert opts["extra_hosts"] == {opts["hostname"]: "127.0.0.1"}
    all_gpus = runtime.container_options(tmp_path, 2, {}, None, "cuda")["device_requests"][0]
    assert all_gpus["Count"] == -1


def test_unknown_environment_lists_the_available_ones():
    with pytest.raises(
        InputError, match=r"environment 'nope': .* available: cpu, cuda13, ngc-pytorch"
    ):
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
        assert env.default_base_image().split("@")[1].startswith("sha256:")
        if not env.locked:  # the base image's own packages: pinned by the image's digest
            assert env.packages == "image" and not env.lock.exists()
            continue
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

    The rerun asks the registry for the recorded environment; the daemon parts are stand-ins
    here, test_docker_env runs the same path against dockerd.
    """
    archive = tmp_path / "kit-cpu.tar"
    calls = []

    def no_build(*args, **kwargs):
        raise AssertionError("built although an archive was given")

    def load(path, env_name, client=None):
        calls.append((path, env_name))
        return SimpleNamespace(tag="kit-env-cpu:loaded", env=env_name, image_id=None)

    monkeypatch.setattr(rt.images, "build", no_build)
    monkeypatch.setattr(rt.archives, "from_archive", load)
    monkeypatch.setattr(rt.DockerContainer, "connect", classmethod(lambda cls: FakeClient({})))
    monkeypatch.setattr(rt, "cleanup_abandoned", lambda client: 0)
    monkeypatch.setattr(rt.fp, "probe", lambda tag, client, gpus=None, engine=None: {})
    monkeypatch.setattr(
        rt.fp,
        "fingerprint",
        lambda image, container, runtime, archive: {"tag": image.tag, "pinned": True},
    )
    inventoried = []

    def inventory(tag, image_id, client, engine):
        inventoried.append(tag)
        return {"image_id": image_id}, True

    monkeypatch.setattr(rt.software, "inventory", inventory)
    monkeypatch.setattr(rt.software, "line", lambda data, cached: "image inventory: cached")
    recorded = Environment.model_validate(
        {"name": "cpu", "runtime": "docker", "pinned": True, "base_image": "base:1"}
    )
    recipe = SimpleNamespace(environment="cuda13", gpus=2, nodes=None)
    name, request = rerun.rerun_request(recorded, None, "cpu", recipe, image_archive=archive)
    assert name == "docker" and request.environment == "cpu" and request.base_image is None
    runtime = registry.prepare(name, request)
    assert calls == [(archive, "cpu")]
    assert runtime.known_environment()["tag"] == "kit-env-cpu:loaded"
    assert inventoried == ["kit-env-cpu:loaded"] and runtime.software == {"image_id": None}
