"""The local Apptainer runtime's words: the exact command line, its variables, the registry's
choice. The end-to-end run through a stand-in `apptainer` is tests/integration/test_apptainer_local.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from kit.io.errors import InputError
from kit.run import registry
from kit.runtime.apptainer import ApptainerRuntime
from kit.runtime.base import RuntimeRequest
from kit.runtime.containers.process import Apptainer

SIF = "/images/kit cuda.sif"  # a space: quoted in a script, one word on a command line
TORCHRUN = ["torchrun", "--standalone", "--nproc-per-node=2", "-m", "kit.worker",
            "/kit/run/spec.json"]  # fmt: skip


def test_a_local_launch_is_apptainer_exec_of_the_sif_with_the_run_directory_bound(tmp_path):
    runtime = ApptainerRuntime(Path(SIF))
    argv = runtime.command(tmp_path, 2)
    assert argv == TORCHRUN  # the image's torchrun, the spec where the bind puts it
    box = runtime.container
    bind = ["--bind", f"{tmp_path.resolve()}:/kit/run", "--pwd", "/kit/run"]
    assert box.command(argv, tmp_path, "cuda") == ["apptainer", "exec", "--nv", *bind, SIF, *argv]
    assert box.command(argv, tmp_path, "cpu") == ["apptainer", "exec", *bind, SIF, *argv]
    assert box.shown(argv) == ["apptainer", "exec", SIF, *argv]
    # a local launch's own TMPDIR, bound where it lies (not every TMPDIR is under /tmp)
    tmp = "/scratch/u/kit-launch-1"
    expected = ["apptainer", "exec", "--bind", tmp, *bind, SIF, *argv]
    assert box.command(argv, tmp_path, "cpu", tmp) == expected
    assert (runtime.name, runtime.placement, runtime.engine) == ("apptainer", "local", "apptainer")


def test_slurm_composes_the_same_words_quoted_for_its_script():
    face = Apptainer(SIF).face("$RUN_DIR", "cuda")
    assert face.flags == []
    assert face.prefix == ["apptainer", "exec", "--nv", "--bind", '"$RUN_DIR:/kit/run"',
                           "--pwd", "/kit/run", "'/images/kit cuda.sif'"]  # fmt: skip
    assert face.spec == "/kit/run/spec.json"
    assert Apptainer(SIF).face(None, "cpu").prefix == [
        "apptainer",
        "exec",
        "'/images/kit cuda.sif'",
    ]


def test_the_launch_sees_the_heartbeat_in_the_bind_and_not_the_hosts_python_path(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("PYTHONPATH", "/somewhere/on/the/host")
    runtime = ApptainerRuntime(Path(SIF))
    env = runtime.launch_env(tmp_path, {"NCCL_P2P_DISABLE": "1"}, "cpu")
    assert env["KIT_HEARTBEAT"] == "/kit/run/heartbeat" and env["HOME"] == "/tmp"
    assert env["NCCL_P2P_DISABLE"] == "1"
    full = runtime.container.process_env(env, [1])
    assert "PYTHONPATH" not in full and full["CUDA_VISIBLE_DEVICES"] == "1"


def request(**kw) -> RuntimeRequest:
    return RuntimeRequest(environment="docker/cpu", device="cpu", **kw)


def test_the_registry_knows_it_by_its_two_axes_and_the_sif_picks_it():
    assert registry.axes("apptainer") == ("local", "apptainer")
    assert registry.local_runtime("apptainer") == "apptainer"
    assert registry.choose("auto", request(apptainer=Path("k.sif"))) == ("apptainer", None)
    assert registry.choose("apptainer", request(apptainer=Path("k.sif")))[0] == "apptainer"


@pytest.mark.parametrize(
    ("asked", "kw", "says"),
    [
        ("host", {"apptainer": Path("k.sif")}, "--apptainer: only for the apptainer runtime"),
        ("docker", {"apptainer": Path("k.sif")}, "this run uses the docker runtime"),
        ("apptainer", {"apptainer": Path("k.sif"), "base_image": "debian:12"},
         "--base-image: needs the docker runtime (--runtime docker); this run uses the apptainer"),
        ("apptainer", {"apptainer": Path("k.sif"), "image_archive": Path("k.tar")},
         "--image-archive: needs the docker runtime"),
    ],
)  # fmt: skip
def test_an_option_another_runtime_would_ignore_is_refused(asked, kw, says):
    with pytest.raises(InputError, match=says.replace("(", r"\(").replace(")", r"\)")):
        registry.choose(asked, request(**kw))


def test_env_is_refused_since_nothing_is_built():
    with pytest.raises(InputError, match="the apptainer runtime runs the image it is given"):
        registry.fit_environment("apptainer", request(), "docker/cpu", "docker/cuda13")


def test_preparing_names_what_is_missing(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no apptainer here
    with pytest.raises(InputError, match=r"^--runtime apptainer: name the image: --apptainer"):
        ApptainerRuntime.prepare(request())
    with pytest.raises(InputError, match=r"`apptainer` is not on PATH"):
        ApptainerRuntime.prepare(request(apptainer=tmp_path / "k.sif"))
    (tmp_path / "apptainer").write_text("#!/bin/sh\nexit 0\n")
    (tmp_path / "apptainer").chmod(0o755)
    with pytest.raises(InputError, match=r"k\.sif: not a file"):
        ApptainerRuntime.prepare(request(apptainer=tmp_path / "k.sif"))


def test_a_run_directory_apptainer_bind_cannot_take_fails_the_launch_with_the_reason(tmp_path):
    from kit.runtime.containers.base import LaunchError

    odd = tmp_path / "a:b"
    odd.mkdir()
    with pytest.raises(LaunchError, match=r"apptainer --bind cannot take the run directory .*a:b"):
        Apptainer(SIF).command(TORCHRUN, odd, "cpu")
    with pytest.raises(LaunchError, match=r"cannot take the launch's TMPDIR .*a:b.*set TMPDIR"):
        Apptainer(SIF).command(TORCHRUN, tmp_path, "cpu", str(odd))


def test_a_sif_without_the_kit_fails_its_probe_in_one_line_that_says_what_to_build(
    tmp_path, monkeypatch
):
    from kit.io.errors import KitError
    from kit.runtime.apptainer import probe

    exe = tmp_path / "apptainer"
    exe.write_text('#!/bin/sh\necho "python: No module named kit.worker.probe" >&2\nexit 1\n')
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(KitError, match=r"failed \(exit 1\): python: No module named kit\.worker"
                                       r"\.probe \(a SIF of the kit's image"):  # fmt: skip
        probe(tmp_path / "k.sif", "cpu")


def test_a_rerun_runs_in_apptainer_only_with_the_sif_named_again():
    from kit.model.environment import Environment
    from kit.run.rerun import check_image_given, rerun_runtime

    slurm = Environment.model_validate(
        {"runtime": "slurm", "pinned": True, "launcher": "apptainer", "image": "/shared/k.sif"}
    )
    host = Environment.model_validate({"runtime": "host", "pinned": False})
    assert rerun_runtime(slurm, None, None) == "apptainer"  # a Slurm Apptainer job: here too
    assert rerun_runtime(host, None, Path("k.sif")) == "apptainer"  # the SIF picks it
    assert rerun_runtime(slurm, "host", None) == "host"
    with pytest.raises(InputError, match=r"^b ran in an Apptainer image \('/shared/k\.sif'\): "
                                         r"name it again \(--apptainer IMAGE\.sif\)"):  # fmt: skip
        check_image_given(Path("b"), "apptainer", slurm, None)
    with pytest.raises(InputError, match=r"^--runtime apptainer: name the image"):
        check_image_given(Path("b"), "apptainer", host, None)
    check_image_given(Path("b"), "apptainer", slurm, Path("k.sif"))  # named: nothing to say
