"""A site compares its fleet: `kit compare` of 50 bundles works and stays readable.

Twenty bundles used to end in a traceback (the colour palette ran out). Fifty copies of a real
sealed bundle are compared with the real command; the comparison must name each machine, give
every series its own colour, keep its heading short, its legends off the plots and its tables
within the page (split into parts of six machines).
"""

from __future__ import annotations

import base64
import json
import re
import shutil

import pytest

from kit.report.plots import LEGEND_INSIDE, colors
from tests.conftest import ROOT, needs_pdf, run_kit

FIXTURE = ROOT / "tests" / "fixtures" / "bundles" / "cpu-smoke"
FLEET = 50


def test_every_series_gets_its_own_colour():
    for n in (1, 6, 7, 24, 25, 100):
        names = [f"m{i} p2p" for i in range(n)] + ["p2p", "no-p2p"]
        col = colors(names)
        assert len(set(col.values())) == len(names), n
        assert col["p2p"] == "#1f5fa8" and col["no-p2p"] == "#d9822b"


@pytest.mark.slow
@needs_pdf
def test_compare_of_fifty_bundles(tmp_path):
    paths = []
    for i in range(FLEET):
        shutil.copytree(FIXTURE, tmp_path / f"b{i:02d}")
        paths.append(str(tmp_path / f"b{i:02d}"))
    out = tmp_path / "cmp"
    proc = run_kit("compare", *paths, "--out", str(out), "--label", "7=rack-7", timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    data = json.loads((out / "compare.json").read_text())
    assert len(data["machines"]) == FLEET
    assert len({m["label"] for m in data["machines"]}) == FLEET  # each named apart
    assert any(m["label"].startswith("rack-7") for m in data["machines"])
    html = (out / "compare.html").read_text()
    heading = re.search(r"<h1>(.*?)</h1>", html, re.S).group(1)
    assert len(heading) < 120 and f"{FLEET} machines" in heading, heading
    notes = [w["text"] for w in data["warnings"] if "not pinned" in w["text"]]
    assert len(notes) == 1 and f"{FLEET} machines" in notes[0]
    svgs = [
        base64.b64decode(x).decode()
        for x in re.findall(r"data:image/svg\+xml;base64,([^\"]+)", html)
    ]
    fills = {c for svg in svgs for c in re.findall(r"stroke: ?(#[0-9a-f]{6})", svg)}
    assert len(fills) >= FLEET, len(fills)  # a line colour per machine and variant
    # per-machine tables are split so that no column leaves the page: at most 6 machines each
    rows = re.findall(r"<tr>(<th>[^\n]*?)</tr>", html)
    assert rows and max(r.count("<th>") for r in rows) <= 7, max(r.count("<th>") for r in rows)
    assert (out / "compare.pdf").stat().st_size > 0
    assert FLEET * 2 > LEGEND_INSIDE  # the sweep's legend goes below its plot


def test_a_comparison_keeps_the_reports_variant_colours():
    """The first machine's p2p and no-p2p series are drawn in the report's own colours; the
    next machines in shades of the same hue, all distinct."""
    col = colors(["2x H200 [1] p2p", "2x H200 [1] no-p2p", "4x H200 [2] p2p", "4x H200 [2] no-p2p"])
    assert col["2x H200 [1] p2p"] == "#1f5fa8" and col["2x H200 [1] no-p2p"] == "#d9822b"
    assert len(set(col.values())) == 4
