"""The atomic write exists once (kit.shared.atomic) and both halves use it: the driver's
bundle files (kit.io.safe) and the worker's result (kit.worker.common)."""

from __future__ import annotations

import json
import re

import pytest

from kit.io import safe as safeio
from kit.io.errors import KitError
from kit.shared.atomic import write_atomic
from kit.worker.common import write_json
from tests.conftest import ROOT


def test_a_link_at_the_target_is_replaced_not_followed(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_text("keep")
    (tmp_path / "out.json").symlink_to(elsewhere)
    write_json(tmp_path / "out.json", {"a": 1})
    assert json.loads((tmp_path / "out.json").read_text()) == {"a": 1}
    assert not (tmp_path / "out.json").is_symlink() and elsewhere.read_text() == "keep"


def test_a_failed_write_leaves_no_temporary_file(tmp_path):
    (tmp_path / "taken").mkdir()  # a folder where the file goes: the rename fails
    with pytest.raises(OSError):
        write_atomic(tmp_path / "taken", b"x")
    with pytest.raises(KitError, match=r"taken: not written"):
        safeio.write_bytes(tmp_path / "taken", b"x")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken"]


def test_the_atomic_write_is_written_once():
    """Only kit/shared/atomic.py opens a temporary file with O_EXCL and renames it into place."""
    code = re.compile(r"^[^#\n]*os\.O_EXCL", re.M)
    writers = [
        p.relative_to(ROOT).as_posix()
        for p in sorted((ROOT / "kit").rglob("*.py"))
        if code.search(p.read_text())
    ]
    assert writers == ["kit/shared/atomic.py"]
