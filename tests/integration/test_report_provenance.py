"""A report says when and by which kit it was rendered; one rendered after the bundle was sealed,
or by another commit than the one that measured it, says so on page 1 and in its colophon."""

from __future__ import annotations

import shutil
from datetime import datetime, timezone
from pathlib import Path

import pytest

from kit import __version__ as V
from kit.bundle import Bundle, reseal_report, verify_manifest, write_manifest
from kit.model import load_bundle
from kit.report import provenance
from kit.report.render import render_bundle
from tests.conftest import needs_pdf
from tests.integration.test_report_render import FIXTURES, pdf_text

MEASURED = "1111111111111111111111111111111111111111"
LATER = "2222222222222222222222222222222222222222-dirty"


def flat(text: str) -> str:
    return " ".join(text.split())


def bundle_measured_by(tmp_path: Path, commit: str | None) -> Path:
    """A copy of the synthetic fixture whose results.json records `commit` as its kit's."""
    dst = tmp_path / "b"
    shutil.copytree(FIXTURES / "synthetic-2gpu", dst)
    b = Bundle.load(dst)
    b.results.kit_commit = commit
    b.save()
    return dst


def test_a_first_report_names_its_kit_and_no_rerender(tmp_path):
    root = bundle_measured_by(tmp_path, MEASURED)
    now = datetime(2026, 11, 24, 3, 0, tzinfo=timezone.utc)
    r = provenance.rendering(load_bundle(root).results, root, commit=MEASURED, now=now)
    assert r.after_the_fact is None
    assert r.colophon.startswith(f"Rendered on 2026-11-24 by kit {V} (commit {MEASURED}), Python")


def test_another_commit_or_a_sealed_bundle_is_after_the_fact(tmp_path):
    root = bundle_measured_by(tmp_path, MEASURED)
    results = load_bundle(root).results
    now = datetime(2026, 11, 24, 3, 0, tzinfo=timezone.utc)
    other = provenance.rendering(results, root, commit=LATER, now=now).after_the_fact
    assert other == (
        f"Report rendered after the run on 2026-11-24 by kit {V} (commit 222222222222-dirty) "
        f"from the results recorded on 2026-11-20 by kit {results.kit_version} (commit 111111111111); "
        "no measurement was changed."
    )
    (root / "report.html").write_text("x")
    write_manifest(root)  # sealed with a report: the same commit rendering again is a re-render
    same = provenance.rendering(results, root, commit=MEASURED, now=now).after_the_fact
    assert same is not None and same.startswith(f"Report re-rendered on 2026-11-24 by kit {V}")
    assert provenance.short(None) == "commit not recorded"


@pytest.mark.slow
@needs_pdf
def test_rerendering_a_sealed_bundle_says_so_on_page_1_and_in_the_colophon(tmp_path, monkeypatch):
    root = bundle_measured_by(tmp_path, MEASURED)
    monkeypatch.setattr(provenance, "kit_commit", lambda: MEASURED)
    render_bundle(Bundle.load(root))  # the run's own seal: same commit, not sealed yet
    write_manifest(root)
    first_html = (root / "report.html").read_text()
    first = flat(pdf_text(root / "report.pdf"))
    assert f"by kit {V} (commit {MEASURED})" in first  # the colophon names the commit
    assert "re-rendered" not in first and "re-rendered" not in first_html

    monkeypatch.setattr(provenance, "kit_commit", lambda: LATER)
    for pdf in ("0", "1"):  # a second re-render says the same, once (its PDF is the one read)
        monkeypatch.setenv("KIT_PDF", pdf)
        reseal_report(root, lambda: render_bundle(Bundle.load(root)))
    assert verify_manifest(root).ok
    pages = pdf_text(root / "report.pdf").split("\f")
    recorded = load_bundle(root).results.kit_version
    today = datetime.now(timezone.utc).date().isoformat()
    line = (
        f"Report re-rendered on {today} by kit {V} (commit 222222222222-dirty) from the results "
        f"recorded on 2026-11-20 by kit {recorded} (commit 111111111111); no measurement was changed."
    )
    assert line in flat(pages[0])  # page 1, near the top: before the machine's checklist
    assert flat(pages[0]).index(line) < flat(pages[0]).index("Is this the machine ordered?")
    colophon = flat(pages[-1])
    assert f"Rendered on {today} by kit {V} (commit {LATER}), Python" in colophon
    assert line in colophon
    html = (root / "report.html").read_text()
    assert html.count("Report re-rendered on") == 2  # page 1 and the colophon, no more
