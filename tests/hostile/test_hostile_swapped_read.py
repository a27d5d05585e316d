"""A results.json swapped by another process between the manifest check and the read is never
read as valid: the bytes read are hashed against the manifest (kit.bundle.intake.receive), so
`kit compare` (and every other reader) refuses it with one line naming the file."""

from __future__ import annotations

import json
import shutil

import pytest

from kit.bundle import intake
from kit.io.errors import InputError
from kit.report.machines import load_machines
from tests.conftest import ROOT

FIXTURE = ROOT / "tests" / "fixtures" / "bundles" / "cpu-smoke"


def test_a_file_swapped_after_the_check_is_refused(tmp_path, monkeypatch):
    a, b = tmp_path / "a", tmp_path / "b"
    shutil.copytree(FIXTURE, a)
    shutil.copytree(FIXTURE, b)
    results = json.loads((a / "results.json").read_text())
    results["created_at"] = "2020-01-01T00:00:00Z"  # still a valid results.json, other content
    swapped = json.dumps(results)
    checked = intake.check_signature

    def check_then_swap(root, *args):  # the other process strikes right after the checks
        line = checked(root, *args)
        if root == a:
            (a / "results.json").write_text(swapped)
        return line

    monkeypatch.setattr(intake, "check_signature", check_then_swap)
    with pytest.raises(InputError) as err:
        load_machines([a, b])
    assert str(a / "results.json") in str(err.value) and "changed while it was read" in str(
        err.value
    )
    assert "\n" not in str(err.value)


def test_an_untouched_pair_is_read(tmp_path):
    copy = (
        tmp_path / "copy"
    )  # the same folder twice is refused (tests/hostile/test_hostile_round5.py)
    shutil.copytree(FIXTURE, copy)
    machines = load_machines([FIXTURE, copy])
    assert len(machines) == 2 and machines[0].results == machines[1].results
