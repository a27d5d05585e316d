"""--read-broken-signature: a bundle whose signature does not verify is read all the same, when
asked for by name; one warning line names it on the terminal, and every page made from it (the
comparison's HTML and every page of its PDF, a report's page with an acceptance against it)
says its signature does not verify. `kit refs add` has no such option.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from kit.run.rerun import load_for_rerun
from tests.conftest import needs_pdf, run_kit
from tests.hostile.test_hostile_broken_signature import FIXTURE, edited_and_resealed

pytestmark = pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="ssh-keygen missing")
FLAG = "--read-broken-signature"
BANNER = "SIGNATURE DOES NOT VERIFY"


def pdf_pages(path: Path) -> list[str]:
    text = subprocess.run(["pdftotext", "-layout", str(path), "-"], capture_output=True,
                          text=True, check=True).stdout  # fmt: skip
    return [p for p in text.split("\f") if p.strip()]


def warned(stderr: str, b: Path) -> None:
    lines = [line for line in stderr.splitlines() if "warning" in line]
    assert len(lines) == 1 and str(b) in lines[0] and "does not verify" in lines[0], stderr


@pytest.mark.skipif(shutil.which("pdftotext") is None, reason="pdftotext missing")
@needs_pdf
def test_compare_reads_it_and_every_page_says_so(tmp_path):
    b = edited_and_resealed(tmp_path)
    proc = run_kit("compare", str(b), str(FIXTURE), "--out", str(tmp_path / "cmp"), FLAG)
    assert proc.returncode == 0, proc.stderr
    warned(proc.stderr, b)
    assert BANNER in (tmp_path / "cmp" / "compare.html").read_text()
    pages = pdf_pages(tmp_path / "cmp" / "compare.pdf")
    assert len(pages) > 1 and all(BANNER in page for page in pages)
    # without the option, and for an untouched pair, nothing of the kind
    twin = tmp_path / "twin"
    shutil.copytree(FIXTURE, twin)
    proc = run_kit("compare", str(FIXTURE), str(twin), "--out", str(tmp_path / "ok"), FLAG)
    assert proc.returncode == 0 and "warning" not in proc.stderr, proc.stderr
    assert BANNER not in (tmp_path / "ok" / "compare.html").read_text()


def test_accept_reads_it_as_bundle_and_as_reference(tmp_path):
    b = edited_and_resealed(tmp_path)
    for args in (("accept", str(b), "--against", "1GB/s"),
                 ("accept", str(FIXTURE), "--against", str(b))):  # fmt: skip
        proc = run_kit(*args, FLAG)
        assert proc.returncode != 2, proc.stderr
        warned(proc.stderr, b)


@needs_pdf
def test_report_against_it_says_so_on_the_page(tmp_path):
    b = edited_and_resealed(tmp_path)
    mine = tmp_path / "mine"
    shutil.copytree(FIXTURE, mine)
    proc = run_kit("report", str(mine), "--against", str(b), FLAG)
    assert proc.returncode == 0, proc.stderr
    warned(proc.stderr, b)
    assert BANNER in (mine / "report.html").read_text()
    if (mine / "report.pdf").exists() and shutil.which("pdftotext"):
        assert all(BANNER in page for page in pdf_pages(mine / "report.pdf"))
    proc = run_kit("report", str(mine), FLAG)  # the bundle re-rendered is never a signed one
    assert proc.returncode == 2 and "--against" in proc.stderr


def test_reproduce_reads_it(tmp_path, capsys):
    b = edited_and_resealed(tmp_path)
    data = load_for_rerun(b, read_broken=True)
    assert data.broken_signature and str(b) in data.broken_signature
    warned(capsys.readouterr().err, b)


def test_refs_add_never_reads_it(tmp_path):
    b = edited_and_resealed(tmp_path)
    env = {**os.environ, "KIT_REFS_DB": str(tmp_path / "refs.sqlite")}
    proc = run_kit("refs", "add", str(b), "--label", "theirs", FLAG, env=env)
    assert proc.returncode == 2, proc.stderr
    assert "theirs" not in run_kit("refs", "list", env=env).stdout


@needs_pdf
def test_a_rerun_of_it_records_so_and_every_page_of_the_new_report_says_so(tmp_path):
    """The new bundle is a sound one, but it reproduces a bundle whose signature did not verify:
    its results.json records the line, and its report carries the banner on every page."""
    import json

    from pypdf import PdfReader

    b = edited_and_resealed(tmp_path)
    new = tmp_path / "new"
    # one repeat of its two runs, not two: what is read is the banner, not the numbers
    proc = run_kit("reproduce", str(b), "--out", str(new), "--repeats", "1", FLAG, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    warned(proc.stderr, b)
    src = json.loads((new / "results.json").read_text())["reproduces"]
    assert str(b) in src["broken_signature"]
    assert BANNER in (new / "report.html").read_text()
    if (new / "report.pdf").exists():
        pages = [p.extract_text() for p in PdfReader(new / "report.pdf").pages]
        assert len(pages) > 1 and all(BANNER in page for page in pages)
    assert run_kit("verify", str(new)).returncode == 0
