"""`kit compare` of sweeps that went to different sizes (issue 34, item 2): compared at the
largest size both swept, or refused; rendered to PDF and read back."""

from __future__ import annotations

import json
import re
import shutil
import statistics
from pathlib import Path

import pytest
from pypdf import PdfReader

from kit.bundle import write_manifest
from kit.report.compare import write_comparison
from tests.conftest import ROOT, needs_pdf

pytestmark = [pytest.mark.slow, needs_pdf]

ALLREDUCE = ROOT / "reports" / "examples" / "h200x2-allreduce"  # a real 2x H200 sweep to 1 GiB


def truncated(dst: Path, keep: int) -> Path:
    """A copy of the real sweep as if it had stopped at `keep` bytes (or, keep < 0, started past
    -keep bytes): its rows past that dropped and its per-run figures recomputed the way the
    worker computes them; resealed."""
    shutil.copytree(ALLREDUCE, dst)
    doc = json.loads((dst / "results.json").read_text())
    for run in doc["runs"]:
        sizes = (run.get("data") or {}).get("sizes")
        if not sizes:
            continue
        sizes[:] = [s for s in sizes if (s["bytes"] <= keep if keep > 0 else s["bytes"] > -keep)]
        medians = [statistics.median(s["busbw_gbps"]) for s in sizes]
        run["metrics"]["busbw_largest"]["value"] = medians[-1]
        run["metrics"]["busbw_peak"]["value"] = max(medians)
        run["metrics"]["time_small_us"]["value"] = statistics.median(sizes[0]["time_us"])
    (dst / "results.json").write_text(json.dumps(doc, indent=1))
    write_manifest(dst)
    return dst


def first_page(pdf: Path) -> str:
    return re.sub(r"\s+", " ", PdfReader(pdf).pages[0].extract_text())


@pytest.mark.skipif(not ALLREDUCE.is_dir(), reason="the all-reduce example is not here")
def test_sweeps_to_different_sizes_are_compared_at_the_largest_common_size(tmp_path):
    """The same runs, one copy cut at 256 MiB: at the common 256 MiB they are identical, so the
    ratio is exactly 1 and the page names the size; the cut copy's own 256 MiB figure against
    the full sweep's 1 GiB figure (a size gap read as a hardware gap) is nowhere."""
    short = truncated(tmp_path / "short", 256 << 20)
    _html, pdf, js = write_comparison([ALLREDUCE, short], "1", tmp_path / "out")
    doc = json.loads(js.read_text())
    (row,) = [
        w for w in doc["workloads"] if w["metric"] == "busbw_largest" and w["variant"] == "p2p"
    ]
    base, other = row["cells"]
    assert other["ratio"]["estimate"] == pytest.approx(1.0)
    assert base["summary"]["median"] == pytest.approx(other["summary"]["median"])
    text = first_page(pdf)
    assert "compared at 256 MiB, the largest size every machine swept" in text
    assert "(their sweeps end at 1 GiB, 256 MiB)" in text


@pytest.mark.skipif(not ALLREDUCE.is_dir(), reason="the all-reduce example is not here")
def test_sweeps_with_no_size_in_common_get_no_ratio(tmp_path):
    low = truncated(tmp_path / "low", 1 << 20)
    high = truncated(tmp_path / "high", -(1 << 20))
    _html, pdf, js = write_comparison([low, high], "1", tmp_path / "out")
    doc = json.loads(js.read_text())
    (row,) = [
        w for w in doc["workloads"] if w["metric"] == "busbw_largest" and w["variant"] == "p2p"
    ]
    assert row["cells"][1]["ratio"] is None
    assert row["cells"][1]["ratio_error"].startswith("no ratio: the sweeps share no message size")
    assert "the sweeps share no message size (largest 1 MiB, 1 GiB): no ratio" in first_page(pdf)


LLAMA2 = ROOT / "reports" / "examples" / "h200x2-fsdp-llama"
LLAMA4 = ROOT / "reports" / "examples" / "h200x4-fsdp-llama"


@pytest.mark.skipif(not LLAMA4.is_dir(), reason="the Llama examples are not here")
def test_page_1_of_a_comparison_answers_which_machine_by_how_much(tmp_path):
    """Issue 34 item 4 of 'what to build': the measured factor with its interval, the datasheet
    ratio beside it (GPU count included for work summed over GPUs), the geometric mean and one
    sentence that says how sure (a range of 2 runs is no confidence interval)."""
    _html, pdf, js = write_comparison([LLAMA2, LLAMA4], "1", tmp_path / "out")
    (ch,) = json.loads(js.read_text())["choice"]["machines"]
    (line,) = ch["lines"]
    assert line["predicted"] == pytest.approx(2.0) and line["factor"] > 1.9
    assert ch["geomean"] == pytest.approx(line["factor"])
    text = first_page(pdf)
    assert "Which machine, for what, by how much: 4x H200 NV18 against 2x H200 NV18" in text
    # 2 runs of the 4x bundle: a screening (issue 48), the factor said without a direction
    assert line["screening"] and "Screening, no direction stated: llama-8b-lora ran fewer" in text
    assert f"4x H200 NV18 and 2x H200 NV18 are {line['apart']:.2f}x apart" in text
    assert "better than" not in text and "worse than" not in text
    assert "dense bf16 FLOP/s x 4/2 GPUs" in text and "geometric mean" in text
