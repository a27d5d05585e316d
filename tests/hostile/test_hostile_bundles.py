"""Hostile bundles: links, FIFOs, sockets, extra files and folders, malformed JSON.

Each case edits a copy of a real sealed bundle (tests/fixtures/bundles/cpu-smoke) the way a
hostile sender would, then runs the real `kit` command on it: every command that reads a bundle
must refuse it with exit status 2 or 1, one line on stderr, no traceback, and must write nothing
outside the bundle.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
from pathlib import Path

import pytest

from kit.bundle import MANIFEST, REPORT_FILES, Bundle, verify_manifest, write_manifest
from kit.io.errors import InputError
from tests.conftest import HEADER, ROOT, one_line, run_kit

FIXTURE = ROOT / "tests" / "fixtures" / "bundles" / "cpu-smoke"


def sealed(tmp_path: Path, name: str = "b") -> Path:
    out = tmp_path / name
    shutil.copytree(FIXTURE, out)
    return out


def _link_outside(b: Path, tmp: Path) -> str:
    victim = tmp / "victim.txt"
    victim.write_text("precious\n")
    os.symlink(victim, b / "logs" / "evil.log")
    return "logs/evil.log (symbolic link)"


def _link_report(b: Path, tmp: Path) -> str:
    (tmp / "victim.html").write_text("precious\n")
    os.symlink(tmp / "victim.html", b / "report.html")
    return "report.html (symbolic link)"


def _link_passwd_listed(b: Path, tmp: Path) -> str:
    """A link to /etc/passwd whose target's hash is in the manifest (hashed through the link)."""
    os.symlink("/etc/passwd", b / "logs" / "passwd.log")
    digest = __import__("hashlib").sha256(Path("/etc/passwd").read_bytes()).hexdigest()
    with open(b / MANIFEST, "a") as f:
        f.write(f"{digest}  logs/passwd.log\n")
    return "logs/passwd.log (symbolic link)"


def _fifo(b: Path, tmp: Path) -> str:
    os.mkfifo(b / "runs" / "pipe")
    return "runs/pipe (FIFO)"


def _fifo_results(b: Path, tmp: Path) -> str:
    (b / "hardware.json").unlink()
    os.mkfifo(b / "hardware.json")
    return "hardware.json (FIFO)"


def _socket(b: Path, tmp: Path) -> str:
    # a socket path must be short: bind it from inside the folder
    cwd = os.getcwd()
    os.chdir(b / "logs")
    try:
        s = socket.socket(socket.AF_UNIX)
        s.bind("sock")
        s.close()
    finally:
        os.chdir(cwd)
    return "logs/sock (socket)"


def _dir_link(b: Path, tmp: Path) -> str:
    (tmp / "elsewhere").mkdir()
    os.symlink(tmp / "elsewhere", b / "runs" / "linked")
    return "runs/linked (symbolic link)"


ODD = {
    "symlink-outside": _link_outside,
    "symlink-report": _link_report,
    "symlink-passwd-in-manifest": _link_passwd_listed,
    "fifo": _fifo,
    "fifo-as-hardware-json": _fifo_results,
    "socket": _socket,
    "dir-symlink": _dir_link,
}


@pytest.mark.parametrize("case", sorted(ODD))
def test_verify_names_every_odd_entry_and_hashes_no_link(tmp_path, case):
    b = sealed(tmp_path)
    named = ODD[case](b, tmp_path)
    check = verify_manifest(b)
    assert not check.ok and check.odd == [named]
    with pytest.raises(InputError, match=named.split(" (")[0]):
        Bundle.load(b)


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(ODD))
@pytest.mark.parametrize("command", ["verify", "report", "compare", "reproduce", "seal"])
def test_odd_entries_are_refused_by_every_command(tmp_path, case, command):
    b = sealed(tmp_path)
    named = ODD[case](b, tmp_path)
    if command == "seal":
        (b / MANIFEST).unlink()
    args = {
        "verify": ["verify", str(b)],
        "report": ["report", str(b)],
        "compare": [
            "compare",
            str(b),
            str(sealed(tmp_path, "other")),
            "--out",
            str(tmp_path / "c"),
        ],
        "reproduce": ["reproduce", str(b), "--out", str(tmp_path / "rerun")],
        "seal": ["seal", str(b)],
    }[command]
    proc = run_kit(*args, timeout=120)
    if command == "verify":
        assert proc.returncode == 1 and "Traceback" not in proc.stderr
        assert f"not a regular file: {named}" in proc.stdout
    else:
        line = one_line(proc, 2)
        assert named.split(" (")[0] in line
    assert not (tmp_path / "rerun").exists() and not (tmp_path / "c").exists()
    for victim in tmp_path.glob("victim*"):
        assert victim.read_text() == "precious\n"


EXTRA = {
    "tmp-file": ("results.json.tmp", "{}"),
    "nested-manifest": ("runs/MANIFEST.sha256", "0" * 64 + "  x\n"),
    "report-dir-payload": ("report.d/payload.sh", "rm -rf ~\n"),
    "report-evil-js": ("report.evil.js", "alert(1)\n"),
    "hidden": (".hidden", "x"),
}


@pytest.mark.parametrize("case", sorted(EXTRA))
def test_extra_files_fail_verify_and_report_reseals_nothing(tmp_path, case):
    b = sealed(tmp_path)
    name, text = EXTRA[case]
    (b / name).parent.mkdir(parents=True, exist_ok=True)
    (b / name).write_text(text)
    check = verify_manifest(b)
    assert not check.ok and name in check.extra
    manifest = (b / MANIFEST).read_bytes()
    line = one_line(run_kit("report", str(b), timeout=120), 2)
    assert name in line
    assert (b / MANIFEST).read_bytes() == manifest  # nothing re-sealed
    assert run_kit("verify", str(b)).returncode == 1


def test_empty_folder_is_an_unlisted_entry(tmp_path):
    b = sealed(tmp_path)
    (b / "runs" / "empty").mkdir()
    check = verify_manifest(b)
    assert check.extra == ["runs/empty/"] and not check.ok


def test_manifest_with_dotdot_or_absolute_names_is_refused(tmp_path):
    for name in ("../outside", "/etc/passwd", "logs/../results.json"):
        b = sealed(tmp_path, name.replace("/", "_"))
        with open(b / MANIFEST, "a") as f:
            f.write("0" * 64 + f"  {name}\n")
        with pytest.raises(InputError, match="not a sha256sum line"):
            verify_manifest(b)


@pytest.mark.parametrize(
    "content",
    [b"{not json", b"\xff\xfe", b"[1, 2]", b'{"schema": 1, "x": NaN}', b"[" * 100000],
    ids=["malformed", "not-utf8", "a-list", "nan", "deep"],
)
def test_malformed_results_json_is_one_line(tmp_path, content):
    b = sealed(tmp_path)
    (b / "results.json").write_bytes(content)
    write_manifest(b)  # re-sealed by the sender: the manifest matches
    for args in (["report", str(b)], ["reproduce", str(b), "--out", str(tmp_path / "r")]):
        line = one_line(run_kit(*args, timeout=120))
        assert "results.json" in line
    assert not (tmp_path / "r").exists()


def test_write_manifest_refuses_links_and_drops_empty_folders(tmp_path):
    b = sealed(tmp_path)
    (b / "runs" / "empty").mkdir()
    write_manifest(b)
    assert not (b / "runs" / "empty").exists() and verify_manifest(b).ok
    os.symlink("/etc/passwd", b / "p")
    with pytest.raises(InputError, match="p \\(symbolic link\\)"):
        write_manifest(b)


def test_bundle_writes_replace_links_never_follow_them(tmp_path):
    victim = tmp_path / "victim.json"
    victim.write_text("precious\n")
    bundle = Bundle.create(tmp_path / "b", {"kit": 1}, HEADER)
    os.unlink(bundle.path / "results.json")
    os.symlink(victim, bundle.path / "results.json")
    bundle.save()
    assert victim.read_text() == "precious\n"
    assert not (bundle.path / "results.json").is_symlink()
    assert json.loads((bundle.path / "results.json").read_text())["status"] == "running"
    assert not list(bundle.path.glob("*.tmp")) and not list(bundle.path.glob(".*.tmp"))


def test_report_files_are_known_by_exact_name():
    assert REPORT_FILES == ("report.html", "report.pdf")
