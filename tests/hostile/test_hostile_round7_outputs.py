"""The seventh black-box pass (issue 37): `kit export -o` over a device, a FIFO, a link, into a
bundle or a missing folder; `kit compare --out` under a missing folder or beside a results.json
of the user's; `kit build ENV --env OTHER`; --image-archive that is no image tar, or given with
--base-image; one daemon twice in --nodes; a notice before a refusal. Each is one line on
stderr, exit 2, no traceback, before any notice or work, and what was there is left as it was."""

from __future__ import annotations

import io
import json
import os
import shutil
import stat
import tarfile
from pathlib import Path

import pytest

from kit.io.errors import InputError
from kit.io.outputs import is_bundle, write_stream
from kit.runtime.images.archive import check_archive
from tests.conftest import ROOT, run_kit

EXAMPLE = ROOT / "reports" / "examples" / "h200x2-allreduce"
TWIN = ROOT / "reports" / "examples" / "h200x4-allreduce"
RECIPE = "recipes/allreduce.yaml"
CPU_DOCKER = (RECIPE, "--device", "cpu", "--smoke", "--repeats", "1", "--runtime", "docker")
SOCKET = "unix:///var/run/docker.sock"


def refused(proc, words: str) -> str:  # type: ignore[no-untyped-def]
    """Exit 2, nothing on stderr but the one error line (no notice before it, no traceback)."""
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kit: error: "), proc.stderr
    assert words in lines[0], lines[0]
    return lines[0]


@pytest.fixture
def sealed(tmp_path: Path) -> Path:
    b = tmp_path / "sealed"
    shutil.copytree(EXAMPLE, b)
    return b


def _device(path: Path) -> Path:
    """A character device of our own (/dev/null's numbers), never the system's."""
    os.mknod(path, 0o600 | stat.S_IFCHR, os.makedev(1, 3))
    return path


# 1. kit export -o: refused before the image is looked up, built or saved
@pytest.mark.skipif(os.geteuid() != 0, reason="mknod of a character device needs root")
def test_export_over_a_device_is_refused_and_the_device_stays(tmp_path):
    dev = _device(tmp_path / "null")
    refused(run_kit("export", "cpu", "-o", str(dev)), "is a character device")
    assert stat.S_ISCHR(os.lstat(dev).st_mode)


def test_export_over_a_fifo_a_link_or_a_folder_is_refused(tmp_path):
    fifo = tmp_path / "fifo.tar"
    os.mkfifo(fifo)
    secret = tmp_path / "secret"
    secret.write_text("mine\n")
    link = tmp_path / "L.tar"
    link.symlink_to(secret)
    folder = tmp_path / "dir.tar"
    folder.mkdir()
    for out, words in [(fifo, "is a FIFO"), (link, "is a symbolic link"), (folder, "is a folder")]:
        refused(run_kit("export", "cpu", "-o", str(out), "--base-image", "kit-test-base:bookworm"),
                words)  # fmt: skip
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and link.is_symlink()
    assert secret.read_text() == "mine\n" and list(folder.iterdir()) == []


def test_export_into_a_bundle_or_a_missing_folder_is_refused(tmp_path, sealed):
    for out, words in [
        (sealed / "x.tar", "is inside the bundle"),
        (sealed / "runs" / "x.tar", "is inside the bundle"),
        (tmp_path / "no" / "such" / "x.tar", "no such folder"),
    ]:
        refused(run_kit("export", "cpu", "-o", str(out)), words)
    assert not (tmp_path / "no").exists() and not (sealed / "x.tar").exists()
    assert run_kit("verify", str(sealed)).returncode == 0


def test_export_of_a_tag_takes_no_env_nor_base(tmp_path):
    out = tmp_path / "x.tar"
    refused(run_kit("export", "kit-cpu:0", "--env", "cpu", "-o", str(out)), "is an image tag")
    refused(run_kit("export", "kit-cpu:0", "--base-image", "x:1", "-o", str(out)), "image tag")
    assert not out.exists()


def test_a_stream_is_written_whole_through_a_temporary_file(tmp_path):
    out = tmp_path / "a.tar"
    write_stream(out, (bytes([i]) * 1000 for i in range(5)), "-o")
    assert out.read_bytes() == b"".join(bytes([i]) * 1000 for i in range(5))
    assert [p.name for p in tmp_path.iterdir()] == ["a.tar"]  # no temporary file left


def test_a_stream_that_fails_leaves_nothing(tmp_path):
    def broken():  # type: ignore[no-untyped-def]
        yield b"x" * 100
        raise InputError("the daemon went away")

    with pytest.raises(InputError, match="went away"):
        write_stream(tmp_path / "a.tar", broken(), "-o")
    assert list(tmp_path.iterdir()) == []


def test_an_oserror_of_the_source_is_raised_as_it_came(tmp_path):
    """The Docker SDK's errors are OSErrors (requests' derive from IOError), with no strerror: a
    daemon that broke off an image's save read "-o a.tar: not written: None" (CI, 2026-12-02)."""
    import requests

    def broken():  # type: ignore[no-untyped-def]
        yield b"x" * 100
        raise requests.exceptions.ChunkedEncodingError("Connection broken: IncompleteRead")

    with pytest.raises(requests.exceptions.ChunkedEncodingError, match="IncompleteRead"):
        write_stream(tmp_path / "a.tar", broken(), "-o")
    assert list(tmp_path.iterdir()) == []


def test_a_link_planted_during_the_stream_is_not_replaced(tmp_path):
    out, secret = tmp_path / "a.tar", tmp_path / "secret"
    secret.write_text("mine\n")

    def plant():  # type: ignore[no-untyped-def]
        yield b"x" * 100
        out.symlink_to(secret)  # another process, while the archive is being saved
        yield b"y" * 100

    with pytest.raises(InputError, match="is a symbolic link"):
        write_stream(out, plant(), "-o")
    assert out.is_symlink() and secret.read_text() == "mine\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.tar", "secret"]


# 2. and 3. kit compare --out: a missing folder is refused; a user's results.json is no bundle
def test_compare_under_a_missing_folder_is_refused(tmp_path):
    out = tmp_path / "no" / "such" / "x"
    refused(run_kit("compare", str(EXAMPLE), str(TWIN), "--out", str(out)), "no such folder")
    assert not (tmp_path / "no").exists()


def test_a_results_json_of_the_users_makes_no_bundle(tmp_path):
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "results.json").write_text(json.dumps({"my": "notes"}))
    assert not is_bundle(proj)
    proc = run_kit("compare", str(EXAMPLE), str(TWIN), "--out", str(proj / "cmp"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (proj / "cmp" / "compare.json").is_file()


def test_a_bundle_sealed_or_in_progress_is_still_one(tmp_path, sealed):
    assert is_bundle(sealed)
    running = tmp_path / "running"  # what Bundle.create leaves before the manifest
    running.mkdir()
    (running / "recipe.yaml").write_text("kit: 1\n")
    (running / "results.json").write_text("{}")
    assert is_bundle(running)
    twin = tmp_path / "twin"
    shutil.copytree(TWIN, twin)
    for out in (running / "cmp", sealed / "cmp"):
        refused(run_kit("compare", str(EXAMPLE), str(twin), "--out", str(out)), "bundle")
    assert not (running / "cmp").exists() and not (sealed / "cmp").exists()


# 4. kit build ENV --env OTHER
def test_build_of_an_environment_with_another_env_is_refused():
    refused(run_kit("build", "cpu", "--env", "cuda13"), "is not a recipe")


# 5., 6., 7. --image-archive and --out checked before the first notice
def _tar(path: Path, names: tuple[str, ...]) -> Path:
    with tarfile.open(path, "w") as tar:
        for name in names:
            info = tarfile.TarInfo(name)
            info.size = 2
            tar.addfile(info, io.BytesIO(b"{}"))
    return path


@pytest.mark.parametrize(
    "archive,words",
    [
        ("missing", "no such image archive"),
        ("recipe", "not a tar archive"),
        ("plain-tar", "no manifest.json or index.json"),
        ("fifo", "not a regular file"),
    ],
)
def test_an_image_archive_that_is_none_is_refused_before_any_notice(tmp_path, archive, words):
    path = {
        "missing": tmp_path / "missing.tar",
        "recipe": ROOT / RECIPE,
        "plain-tar": _tar(tmp_path / "plain.tar", ("notes.txt",)),
        "fifo": tmp_path / "fifo.tar",
    }[archive]
    if archive == "fifo":
        os.mkfifo(path)
    refused(run_kit("reproduce", *CPU_DOCKER, "--image-archive", str(path),
                    "--out", str(tmp_path / "b")), words)  # fmt: skip
    assert not (tmp_path / "b").exists()


def test_an_image_tar_passes_the_check(tmp_path):
    check_archive(_tar(tmp_path / "d.tar", ("manifest.json", "repositories")))
    check_archive(_tar(tmp_path / "o.tar", ("oci-layout", "./index.json")))


def test_base_image_with_image_archive_is_refused(tmp_path):
    archive = _tar(tmp_path / "d.tar", ("manifest.json",))
    refused(run_kit("reproduce", *CPU_DOCKER, "--image-archive", str(archive),
                    "--base-image", "kit-test-base:bookworm"), "give one of them")  # fmt: skip


def test_an_out_where_no_folder_can_be_made_is_refused_before_any_notice(tmp_path):
    refused(run_kit("reproduce", RECIPE, "--device", "cpu", "--smoke", "--repeats", "1",
                    "--out", "/proc/kitout"), "cannot make a folder there")  # fmt: skip
    assert not Path("/proc/kitout").exists()


# 8. one daemon twice on the host network
@pytest.mark.parametrize(
    "nodes",
    [f"{SOCKET},{SOCKET}", f"{SOCKET},unix:///var/run//docker.sock", "ssh://a@node2,ssh://Node2"],
)
def test_one_daemon_twice_in_nodes_is_refused(nodes):
    refused(run_kit("reproduce", *CPU_DOCKER, "--nodes", nodes), "named twice")


def test_one_daemon_twice_on_a_bridge_network_is_a_recipe_the_kit_takes(tmp_path):
    recipe = tmp_path / "two.yaml"
    text = (ROOT / RECIPE).read_text()
    recipe.write_text(text + f'nodes:\n  hosts: ["{SOCKET}", "{SOCKET}"]\n  network: kitnet\n')
    proc = run_kit("recipes", "validate", str(recipe))
    assert proc.returncode == 0, proc.stderr


# a tar with a manifest that the daemon cannot load: one line, not docker's traceback
@pytest.mark.docker
@pytest.mark.slow
def test_a_forged_image_tar_is_one_line_from_the_daemon(tmp_path):
    archive = _tar(tmp_path / "forged.tar", ("manifest.json",))
    proc = run_kit("reproduce", *CPU_DOCKER, "--image-archive", str(archive),
                   "--out", str(tmp_path / "b"))  # fmt: skip
    assert proc.returncode == 2, proc.stderr[-3000:]
    errors = [x for x in proc.stderr.splitlines() if x.startswith("kit: error: ")]
    assert len(errors) == 1 and "not loaded as an image archive" in errors[0], proc.stderr
    assert "Traceback" not in proc.stderr


def test_kit_report_of_a_read_only_bundle_is_refused_before_rendering(tmp_path: Path) -> None:
    """A bundle on a read-only mount: `kit report` said so after rendering, exit 1, when
    MANIFEST.sha256 could not be written (the fifth black-box pass); now one line, exit 2."""
    import subprocess

    src, ro = tmp_path / "src", tmp_path / "ro"
    shutil.copytree(ROOT / "tests" / "fixtures" / "bundles" / "cpu-smoke", src)
    ro.mkdir()
    mounted = subprocess.run(["mount", "--bind", str(src), str(ro)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"a read-only bind mount needs mount rights: {mounted.stderr.decode()[:80]}")
    try:
        if subprocess.run(["mount", "-o", "remount,bind,ro", str(ro)]).returncode != 0:
            pytest.skip("could not remount the bind mount read-only")
        before = sorted(p.name for p in src.iterdir())
        refused(run_kit("report", str(ro), timeout=120), "not writable for you")
        assert sorted(p.name for p in src.iterdir()) == before
    finally:
        subprocess.run(["umount", str(ro)])
