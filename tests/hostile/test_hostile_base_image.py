"""A stranger's Docker bundle never chooses the image a rerun runs.

The sender edits environment.json so that its base image is another local image, a registry of
theirs, an option (`--privileged`) or a name with terminal escapes, and reseals the bundle. A
rerun must refuse each in one line (exit 2) before any image is built, pulled or run, naming
--base-image; with --base-image the user's own image is the base, and a malformed one is refused
the same way. The decision itself (kit.runtime.images.base_choice) is checked without a daemon.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kit.bundle import write_manifest
from kit.io.errors import InputError
from kit.runtime.images import base_choice
from kit.runtime.images.environments import load
from tests.conftest import ROOT, run_kit

DOCKER_BUNDLE = ROOT / "tests" / "fixtures" / "bundles" / "synthetic-2gpu"
PINNED = load("cuda13").default_base_image()

FOREIGN = {
    "local-other-code": "kit-host-stack:local",
    "sender-registry": "registry.evil.example:5000/cuda:13",
    "an-option": "--privileged",
    "escapes": "nvidia/cuda\x1b[2J\x1b]0;owned\x07",
    "same-name-other-digest": PINNED.split("@")[0] + "@sha256:" + "0" * 64,
}


def docker_bundle(tmp_path: Path, base: str | None) -> Path:
    b = tmp_path / "b"
    shutil.copytree(DOCKER_BUNDLE, b)
    env = json.loads((b / "environment.json").read_text())
    env["base_image"] = base
    env["base_image_digest"] = None
    (b / "environment.json").write_text(json.dumps(env))
    write_manifest(b)
    return b


@pytest.mark.parametrize("case", sorted(FOREIGN))
def test_a_base_the_bundle_names_is_refused_in_one_line(tmp_path, case):
    b = docker_bundle(tmp_path, FOREIGN[case])
    out = tmp_path / "r"
    proc = run_kit("reproduce", str(b), "--out", str(out), timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and "\x1b" not in proc.stderr, proc.stderr
    assert "--base-image" in proc.stderr and "never builds FROM an image a bundle" in proc.stderr
    assert not out.exists()


@pytest.mark.parametrize("given", ["--privileged", "a b", "x\x1b[31m", "UPPER/case", ""])
def test_a_malformed_base_image_option_is_refused(tmp_path, given):
    b = docker_bundle(tmp_path, PINNED)
    out = tmp_path / "r"
    proc = run_kit("reproduce", str(b), "--out", str(out), f"--base-image={given}", timeout=120)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "--base-image" in proc.stderr and "\x1b" not in proc.stderr
    assert not out.exists()


@pytest.mark.parametrize("runtime", ["docker", "podman"])
@pytest.mark.parametrize("given", ["--privileged", "a\nb", "$(id)", "x\x1b[2Jy"])
def test_a_malformed_base_image_is_refused_before_any_notice(tmp_path, runtime, given):
    """A recipe run on the CPU whose environment is for GPUs: the environment notice came first,
    the refusal second (two lines); the option is checked before anything is said."""
    out = tmp_path / "r"
    proc = run_kit("reproduce", "recipes/allreduce.yaml", "--device", "cpu", "--smoke",
                   "--runtime", runtime, f"--base-image={given}", "--out", str(out),
                   timeout=120)  # fmt: skip
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith("kit: error: --base-image") and "\x1b" not in proc.stderr
    assert not out.exists()


def test_base_image_with_an_archive_is_refused(tmp_path):
    b = docker_bundle(tmp_path, PINNED)
    proc = run_kit("reproduce", str(b), "--out", str(tmp_path / "r"), "--base-image", "x:1",
                   "--image-archive", str(tmp_path / "a.tar"), timeout=120)  # fmt: skip
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr


def test_the_decision(tmp_path):
    src = tmp_path / "b"
    # the user's base wins over whatever the bundle recorded
    base, why = base_choice.rerun_base(src, "cuda13", "evil:1", "kit-host-stack:local", None)
    assert base == "kit-host-stack:local" and "(--base-image)" in why
    # nothing named: the kit's own pinned digest, also when the bundle recorded exactly it
    for recorded in (None, PINNED, "other-name@" + PINNED.split("@")[1]):
        base, why = base_choice.rerun_base(src, "cuda13", recorded, None, None)
        assert base == PINNED and "docker/cuda13/Dockerfile pins" in why
    # an archive the user loads runs as it is: no base at all
    base, why = base_choice.rerun_base(src, "cuda13", "evil:1", None, tmp_path / "a.tar")
    assert base is None and "--image-archive" in why
    with pytest.raises(InputError, match="built FROM 'x\\\\x1b"):
        base_choice.rerun_base(src, "cuda13", "x\x1b[2J", None, None)
    with pytest.raises(InputError, match=r"no .*Dockerfile"):
        base_choice.rerun_base(src, "nope-env", None, None, None)


def test_an_environment_name_is_the_kits_own_never_a_folder_here(tmp_path, monkeypatch):
    (tmp_path / "cuda13").mkdir()
    (tmp_path / "cuda13" / "Dockerfile").write_text("ARG BASE_IMAGE=evil:1\nFROM ${BASE_IMAGE}\n")
    monkeypatch.chdir(tmp_path)
    assert load("cuda13").default_base_image() == PINNED


def test_the_users_base_wins_and_the_bundles_record_is_shown_escaped(tmp_path):
    b = docker_bundle(tmp_path, FOREIGN["escapes"])
    env = json.loads((b / "environment.json").read_text())
    env["base_image_digest"] = "sha256:\x1b]0;owned\x07"
    (b / "environment.json").write_text(json.dumps(env))
    write_manifest(b)
    proc = run_kit("reproduce", str(b), "--out", str(tmp_path / "r"), "--device", "cpu",
                   "--base-image", "kit-host-stack:local", timeout=120)  # fmt: skip
    assert "\x1b" not in proc.stderr and "\x07" not in proc.stderr, proc.stderr
    assert "the rerun builds FROM kit-host-stack:local (--base-image)" in proc.stderr
    assert "Traceback" not in proc.stderr
