"""Issue 34 item 3: page 1 answers "is this the machine we ordered": a machine whose power limit
sits below its default and one of whose NVLinks is down gets a cross with the evidence."""

from __future__ import annotations

import json
import re
import shutil

import pytest
from pypdf import PdfReader

from kit.bundle import Bundle, write_manifest
from kit.report.render import render_bundle
from tests.conftest import ROOT, needs_pdf

pytestmark = [pytest.mark.slow, needs_pdf]

LLAMA = ROOT / "reports" / "examples" / "h200x2-fsdp-llama"


@pytest.mark.skipif(not LLAMA.is_dir(), reason="the Llama example is not here")
def test_a_machine_not_as_ordered_gets_a_cross_with_its_evidence(tmp_path):
    b = tmp_path / "short"
    shutil.copytree(LLAMA, b)
    hw = json.loads((b / "hardware.json").read_text())
    hw["gpus"][1]["power_limit_w"] = 500.0
    links = hw["gpus"][0].get("nvlinks")
    if links:
        links[0]["active"] = False
    hw["gpus"][0]["nvlink_active"] = 17
    (b / "hardware.json").write_text(json.dumps(hw, indent=1))
    write_manifest(b)
    render_bundle(Bundle.load(b))
    first = re.sub(r"\s+", " ", PdfReader(b / "report.pdf").pages[0].extract_text())
    assert "power limit at its default NO below the default: GPU 1 500 W" in first
    assert "NVLinks up NO GPU 0 17, GPU 1 18 of 18 (H200 SXM datasheet)" in first
    assert "GPU model and count yes 2x NVIDIA H200" in first
