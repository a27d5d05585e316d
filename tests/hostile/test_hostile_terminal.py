"""Hostile strings cannot reach the terminal raw: every byte kit writes is checked.

A sender names the bundle's folder, a host, a manifest entry and a label with ESC, CR, OSC,
C1 and bidi characters (an erase-line-and-print-OK attack, a window title, a reversed name).
Every command that reads a bundle runs on it; what it writes to stdout and stderr must hold no
control character but newline and tab, and no bidi or invisible format character.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from rich.table import Table

from kit.bundle import MANIFEST, write_manifest
from kit.io.terminal import SafeStream, console, escape, escape_stream
from tests.conftest import ROOT

FIXTURE = ROOT / "tests" / "fixtures" / "bundles" / "cpu-smoke"
HOSTILE = "\x1b[1A\x1b[2K\rOK\x1b]0;owned\x07\u202eevil\x9b2J\u2066x\x7f"
# what no byte of kit's output may decode to (UTF-8): C0 but \n and \t, DEL, C1, bidi controls
UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def kit(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    full = {**os.environ, **(env or {})}
    full["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), full.get("PYTHONPATH")) if p)
    return subprocess.run(
        [sys.executable, "-m", "kit", *args], env=full, cwd=ROOT, capture_output=True, timeout=300
    )


def assert_clean(proc: subprocess.CompletedProcess[bytes]) -> str:
    """stdout + stderr as text, after checking that no unsafe character is in either."""
    for name, data in (("stdout", proc.stdout), ("stderr", proc.stderr)):
        text = data.decode("utf-8", "surrogateescape")
        bad = UNSAFE.search(text)
        assert bad is None, f"{name} holds {bad.group()!r}: {text!r}"
        assert b"Traceback" not in data, text
    return (proc.stdout + proc.stderr).decode()


@pytest.fixture
def hostile(tmp_path: Path) -> Path:
    """A sealed bundle in a folder named with HOSTILE, whose host is named with it too."""
    b = tmp_path / f"b{HOSTILE}"
    shutil.copytree(FIXTURE, b)
    hw = json.loads((b / "hardware.json").read_text())
    hw["host"]["hostname"] = f"host{HOSTILE}"
    (b / "hardware.json").write_text(json.dumps(hw))
    write_manifest(b)
    return b


def test_escape_and_the_stream_filter():
    assert escape("a\x1b[2K\rb\u202ec\n") == "a\\x1b[2K\\rb\\u202ec\\n"
    assert escape_stream("ok\x1b[8mhidden\n") == "ok\\x1b[8mhidden\n"  # SGR too (conceal)
    assert escape_stream("\x1b]0;t\x07\x1b[2K\r\x9b") == "\\x1b]0;t\\x07\\x1b[2K\\r\\x9b"
    assert escape_stream("name\udcff") == "name\\udcff"  # an undecodable byte of a file name


def test_the_kits_console_keeps_its_colours_and_escapes_the_text(monkeypatch):
    """rich writes the kit's own styles beneath SafeStream; what it renders is escaped first."""
    out = io.StringIO()
    monkeypatch.setattr(sys, "stderr", SafeStream(out))
    con = console(force_terminal=True, color_system="standard", highlight=False)
    con.print(f"[red]kit: {HOSTILE}[/]", markup=True)
    con.print(Table("name"), HOSTILE)
    text = out.getvalue()
    assert "\x1b[31m" in text  # the kit's red
    assert UNSAFE.search(re.sub(r"\x1b\[[0-9;]*m", "", text)) is None, text  # rich's styles only
    assert "\\x1b]0;owned" in text  # escaped (rich drops the BEL itself)


def test_verify_of_a_hostile_manifest_entry(tmp_path):
    b = tmp_path / "b"
    shutil.copytree(FIXTURE, b)
    with open(b / MANIFEST, "a") as f:  # a listed file that is missing, named to erase the error
        f.write("0" * 64 + f"  logs/x{HOSTILE.replace(chr(13), '')}\n")
    proc = kit("verify", str(b))
    out = assert_clean(proc)
    assert proc.returncode == 1 and "missing: logs/x\\x1b[1A" in out


def test_verify_report_seal_of_a_hostile_folder(hostile, tmp_path):
    ok = kit("verify", str(hostile))
    assert ok.returncode == 0 and "\\x1b[1A" in assert_clean(ok)
    report = kit("report", str(hostile))
    assert report.returncode == 0, report.stderr
    assert "\\u202eevil" in assert_clean(report)
    (hostile / "results.json").write_text((hostile / "results.json").read_text() + " ")
    for args in (["report", str(hostile)], ["seal", str(hostile)],
                 ["accept", str(hostile), "--against", "1GB/s"],
                 ["sign", str(hostile), "--key", str(tmp_path / "nokey")]):  # fmt: skip
        proc = kit(*args)
        assert proc.returncode == 2, (args, proc.stderr)
        assert_clean(proc)


def test_compare_and_reproduce_refusals_and_labels(hostile, tmp_path):
    other = tmp_path / "other"
    shutil.copytree(FIXTURE, other)
    out = tmp_path / f"c{HOSTILE}"
    proc = kit("compare", str(hostile), str(other), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert_clean(proc)
    bad_label = kit("compare", str(hostile), str(other), "--label", f"1=x{HOSTILE}")
    assert bad_label.returncode == 2 and assert_clean(bad_label)
    rerun = kit("reproduce", str(hostile), "--out", str(hostile / f"sub{HOSTILE}"))
    assert rerun.returncode == 2 and assert_clean(rerun)


def test_refs_add_list_standing(hostile, tmp_path):
    env = {"KIT_REFS_DB": str(tmp_path / "refs.sqlite")}
    added = kit("refs", "add", str(hostile), env=env)
    assert added.returncode == 0, added.stderr
    assert_clean(added)
    labelled = kit("refs", "add", str(hostile), "--label", f"l{HOSTILE}", env=env)
    assert labelled.returncode in (0, 2) and assert_clean(labelled)
    for args in (["refs", "list"], ["refs", "standing", str(hostile)]):
        proc = kit(*args, env=env)
        assert proc.returncode == 0, proc.stderr
        assert_clean(proc)


def test_pages_write_a_bundles_control_characters_as_escapes(tmp_path):
    """The report and the comparison print a bundle's strings (its command, runtime, host): an
    ESC or OSC from the bundle is written on the page as an escape, never raw."""
    b = tmp_path / "b"
    shutil.copytree(FIXTURE, b)
    results = json.loads((b / "results.json").read_text())
    results["command"] = "kit \x1b]0;pwn\x07\x1b[2J reproduce"
    (b / "results.json").write_text(json.dumps(results))
    hardware = json.loads((b / "hardware.json").read_text())
    hardware["host"]["hostname"] = "vm\x1b]0;owned\x07\x1b[2J\r"
    (b / "hardware.json").write_text(json.dumps(hardware))
    (b / MANIFEST).unlink()
    write_manifest(b)
    other = tmp_path / "other"
    shutil.copytree(FIXTURE, other)
    assert kit("report", str(b)).returncode == 0
    assert kit("compare", str(b), str(other), "--out", str(tmp_path / "c")).returncode == 0
    for page in (b / "report.html", tmp_path / "c" / "compare.html"):
        text = page.read_text()
        assert not UNSAFE.search(text.replace("\r", "")) and "\r" not in text, page
    assert "\\x1b]0;pwn\\x07" in (b / "report.html").read_text()
    assert "vm\\x1b]0;owned\\x07" in (tmp_path / "c" / "compare.html").read_text()
