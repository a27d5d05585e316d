"""Outputs go only to regular files in places the user named, checked before the work.

`kit accept --json PATH` once wrote a temporary file and renamed it over PATH whatever PATH was:
a FIFO, a character device (`/dev/full`, `/dev/null` as root), a symbolic link became a regular
file, and a write that went nowhere reported success. `kit compare --out` into a sealed bundle
wrote there and the bundle no longer verified. Each is now one line, exit 2, and what was at the
path is left as it was.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_kit

FIXTURE = ROOT / "tests" / "fixtures" / "bundles" / "cpu-smoke"


def accept(json_path: Path | str) -> object:
    return run_kit("accept", str(FIXTURE), "--against", "1GB/s", "--json", str(json_path))


def one_line(proc) -> bool:
    return proc.returncode == 2 and proc.stderr.count("\n") == 1


def test_a_fifo_stays_a_fifo(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    proc = accept(fifo)
    assert one_line(proc) and "FIFO" in proc.stderr, proc.stderr
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


@pytest.mark.parametrize("device", ["/dev/full", "/dev/null"])
def test_a_device_is_never_replaced(device):
    before = os.lstat(device)
    proc = accept(device)
    assert one_line(proc) and "character device" in proc.stderr, proc.stderr
    after = os.lstat(device)
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == before.st_rdev


def test_a_symlink_is_neither_followed_nor_replaced(tmp_path):
    target = tmp_path / "precious"
    target.write_text("mine\n")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    proc = accept(link)
    assert one_line(proc) and "symbolic link" in proc.stderr, proc.stderr
    assert link.is_symlink() and target.read_text() == "mine\n"


@pytest.mark.parametrize("case", ["folder", "missing-folder", "inside-another-bundle"])
def test_places_that_cannot_take_the_file(tmp_path, case):
    other = tmp_path / "other"
    shutil.copytree(FIXTURE, other)
    path = {"folder": tmp_path, "missing-folder": tmp_path / "nope" / "a.json",
            "inside-another-bundle": other / "a.json"}[case]  # fmt: skip
    proc = accept(path)
    assert one_line(proc), proc.stderr
    assert not (other / "a.json").exists()
    assert run_kit("verify", str(other)).returncode == 0


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes in any folder")
def test_a_folder_the_user_cannot_write(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    proc = accept(locked / "a.json")
    assert one_line(proc) and "not writable" in proc.stderr, proc.stderr


def test_a_regular_file_is_written_and_replaced(tmp_path):
    path = tmp_path / "a.json"
    path.write_text("old\n")
    proc = accept(path)
    assert proc.returncode in (0, 1, 3, 4), proc.stderr
    assert json.loads(path.read_text())["verdict"]


def twin(tmp_path: Path) -> Path:
    """A second bundle, so that compare's only objection is the one under test."""
    path = tmp_path / "twin"
    shutil.copytree(FIXTURE, path)
    return path


def test_compare_never_writes_into_a_bundle(tmp_path):
    sealed = tmp_path / "sealed"
    shutil.copytree(FIXTURE, sealed)
    proc = run_kit("compare", str(FIXTURE), str(twin(tmp_path)), "--out", str(sealed))
    assert one_line(proc) and "bundle" in proc.stderr, proc.stderr
    assert not (sealed / "compare.html").exists()
    assert run_kit("verify", str(sealed)).returncode == 0


def test_compare_never_writes_through_a_planted_link(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    target = tmp_path / "precious"
    target.write_text("mine\n")
    (out / "compare.json").symlink_to(target)
    proc = run_kit("compare", str(FIXTURE), str(twin(tmp_path)), "--out", str(out))
    assert one_line(proc) and "symbolic link" in proc.stderr, proc.stderr
    assert target.read_text() == "mine\n" and not (out / "compare.html").exists()
