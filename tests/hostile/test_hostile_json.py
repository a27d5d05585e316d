"""Hostile JSON inside a resealed bundle: one strict reader for every file, every command.

The sender edits a file and recomputes the manifest, so the bundle verifies. What the edit holds
must still be refused by every command that reads the bundle, with one line naming the file:
NaN and Infinity literals, duplicate keys at any depth, numbers so large that a median or a
ratio overflows to infinity, and a record (bundle, run, file) of a schema newer than this kit.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from kit.bundle import write_manifest
from kit.shared.jsonio import dumps
from tests.conftest import ROOT, run_kit

FIXTURE = ROOT / "tests" / "fixtures" / "bundles" / "cpu-smoke"


def _text(name: str, edit: Callable[[str], str]) -> Callable[[Path], str]:
    def apply(b: Path) -> str:
        (b / name).write_text(edit((b / name).read_text()))
        return name

    return apply


def _json(name: str, edit: Callable[[dict], None]) -> Callable[[Path], str]:
    def apply(b: Path) -> str:
        data = json.loads((b / name).read_text())
        edit(data)
        (b / name).write_text(json.dumps(data))
        return name

    return apply


def _metric(value: object) -> Callable[[dict], None]:
    def edit(r: dict) -> None:
        metrics = r["runs"][0]["metrics"]
        metrics[next(iter(metrics))]["value"] = value

    return edit


def _result_file(b: Path) -> str:
    path = next(b.glob("runs/*/result.json"))
    data = json.loads(path.read_text())
    data["schema"] = 99
    path.write_text(json.dumps(data))
    return str(path.relative_to(b))


CASES = {
    "env-duplicate-schema": _text("environment.json", lambda s: s.replace("{", '{"schema": 1, "schema": 999,', 1)),
    "env-nan": _text("environment.json", lambda s: s.replace("{", '{"x": NaN,', 1)),
    "env-newer-schema": _json("environment.json", lambda d: d.update(schema=999)),
    "hardware-nested-duplicate": _text("hardware.json", lambda s: s.replace('"host": {', '"host": {"a": 1, "a": 2,', 1)),
    "results-infinity-literal": _text("results.json", lambda s: s.replace('"repeats":', '"x": Infinity, "repeats":', 1)),
    "results-run-newer-schema": _json("results.json", lambda d: d["runs"][0].update(schema=99)),
    "results-metric-1e308": _json("results.json", _metric(1e308)),
    "results-metric-negative-huge": _json("results.json", _metric(-1e31)),
    "results-metric-huge-int": _json("results.json", _metric(10**40)),
    "result-file-newer-schema": _result_file,
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_command_refuses_it_in_one_line(tmp_path, case):
    b = tmp_path / "b"
    shutil.copytree(FIXTURE, b)
    name = CASES[case](b)
    write_manifest(b)  # resealed: the manifest matches
    other = tmp_path / "other"
    shutil.copytree(FIXTURE, other)
    env = {"KIT_REFS_DB": str(tmp_path / "refs.sqlite"), "PATH": "/usr/bin:/bin"}
    commands = {
        "report": ["report", str(b)],
        "compare": ["compare", str(other), str(b), "--out", str(tmp_path / "c")],
        "reproduce": ["reproduce", str(b), "--out", str(tmp_path / "r")],
        "refs add": ["refs", "add", str(b)],
        "accept": ["accept", str(b), "--against", "0.01GB/s"],
        "refs standing": ["refs", "standing", str(b)],
    }
    for command, args in commands.items():
        proc = run_kit(*args, timeout=120, env=env)
        assert proc.returncode == 2, (command, proc.stdout, proc.stderr)
        assert proc.stderr.startswith("kit: error: ") and proc.stderr.count("\n") == 1, proc.stderr
        assert name in proc.stderr, (command, proc.stderr)
    assert not (tmp_path / "c").exists() and not (tmp_path / "r").exists()
    assert not (tmp_path / "refs.sqlite").exists()


def test_what_the_kit_writes_is_strict_json():
    text = dumps({"a": float("inf"), "b": [float("nan"), 1.0], "c": {"d": -float("inf")}})
    assert not re.search(r"NaN|Infinity", text)
    assert json.loads(text) == {"a": None, "b": [None, 1.0], "c": {"d": None}}
