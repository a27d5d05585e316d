"""Three repeat counts kept apart: planned, ran (adaptive repeats add whole repeats) and the
adaptive decision. The page prints the count that ran, with the planned one beside it."""

from __future__ import annotations

import html
import re

from kit.bundle import Bundle, write_manifest
from kit.model import AdaptiveRecord
from kit.report.render import render_html
from tests.unit.test_compare import run


def text_of(page: str) -> str:
    page = re.sub(r"(?s)<(style|svg)\b.*?</\1>", "", page)
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", page)))


RECIPE = {"kit": 1, "name": "adaptive", "description": "", "repeats": 2, "max_repeats": 4,
          "benchmarks": [{"kind": "allreduce", "name": "ar"}]}  # fmt: skip


def test_a_run_that_planned_2_and_ran_4_says_4(tmp_path):
    header = {"recipe": "adaptive", "device": "cuda", "runtime": "host", "pinned": False,
              "smoke": False, "repeats": 2}  # fmt: skip
    bundle = Bundle.create(tmp_path / "b", RECIPE, header)
    for i, (a, b) in enumerate(((10.0, 5.0), (12.0, 5.5), (10.5, 5.1), (11.0, 5.2))):
        bundle.add_run(run("p2p", i, a))
        bundle.add_run(run("no-p2p", i, b))
    bundle.results.adaptive = {"ar": AdaptiveRecord(
        metric="busbw_peak", planned=2, max_repeats=4, cv_threshold=0.03,
        repeats=4, cv={"p2p": 0.08, "no-p2p": 0.04}, noisy=["p2p"], more=False,
        cap_reached=True, reason="p2p CV 8.0% > 3%")}  # fmt: skip
    bundle.finish("complete")
    write_manifest(bundle.path)
    page = text_of(render_html(Bundle(bundle.path)))
    assert "4 repeats per variant (2 planned)" in page
    assert (
        "ran 4 times per variant (2 planned; adaptive repeats added 2 (p2p CV 8.0% > 3%))" in page
    )
    assert "ran 2 times" not in page and "2 repeats per variant" not in page
