"""auto | cuda | cpu is spelled once (kit.runtime.base.DEVICES): the engine, a rerun's recorded
device and multi-node runs all call check_device."""

from __future__ import annotations

import re

import pytest

from kit.io.errors import InputError
from kit.runtime.base import check_device
from tests.conftest import ROOT


def test_the_asked_device_is_checked_in_one_place():
    with pytest.raises(InputError, match=r"^--device 'gpu': allowed: auto, cuda, cpu$"):
        check_device("gpu")
    check_device("auto")
    spelled = [
        p.relative_to(ROOT).as_posix()
        for p in sorted((ROOT / "kit").rglob("*.py"))
        if re.search(r"\(\s*\"auto\",\s*\"cuda\",\s*\"cpu\"\s*\)", p.read_text())
    ]
    assert spelled == ["kit/runtime/base.py"]
