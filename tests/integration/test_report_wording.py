"""Issue 34 item 6: each wording that contradicted its own numbers, rendered from a real bundle
(or a resealed copy with one recorded field changed) and read back from the PDF."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from pypdf import PdfReader

from kit.bundle import Bundle, write_manifest
from kit.report.compare import write_comparison
from kit.report.render import render_bundle
from kit.stats import unpaired_ratio
from tests.conftest import ROOT, copy_bundle, needs_pdf

pytestmark = [pytest.mark.slow, needs_pdf]

EXAMPLES = ROOT / "reports" / "examples"
LLAMA = EXAMPLES / "h200x2-fsdp-llama"
ALLREDUCE = EXAMPLES / "h200x2-allreduce"
RESNET = EXAMPLES / "h200x2-resnet-ddp"


def text(pdf: Path, page: int | None = 0) -> str:
    pages = PdfReader(pdf).pages
    chosen = pages if page is None else [pages[page]]
    return re.sub(r"\s+", " ", " ".join(p.extract_text() for p in chosen))


def copy_with(src: Path, dst: Path, name: str, change) -> Path:  # type: ignore[no-untyped-def]
    """A copy of a real bundle with one recorded JSON file changed by `change`, resealed."""
    shutil.copytree(src, dst)
    doc = json.loads((dst / name).read_text())
    change(doc)
    (dst / name).write_text(json.dumps(doc, indent=1))
    write_manifest(dst)
    return dst


def rendered(path: Path) -> Path:
    render_bundle(Bundle.load(path))
    return path / "report.pdf"


@pytest.mark.skipif(not LLAMA.is_dir(), reason="the Llama example is not here")
def test_power_words_match_the_readings_and_a_power_cap_is_no_caution(tmp_path):
    """no-p2p: 0% of readings at the cap with the SwPowerCap reason in 48% of samples is
    'below the power cap ..., though', never 'power-capped'; and SwPowerCap alone raises no
    'runs were throttled' caution."""
    b = tmp_path / "llama"
    shutil.copytree(LLAMA, b)
    pdf = rendered(b)
    first = text(pdf) + " " + text(pdf, 1)  # page 1's power notes run onto page 2
    assert (
        "below the power cap: 0% of the window's power readings within 5% of the 700 W "
        "cap, though NVML's SwPowerCap clock reason in 48% of its samples"
    ) in first
    assert "power-capped in part of the window: 0%" not in first
    every = text(pdf, None)
    assert "throttled" not in every.replace("throttle reasons", "")


@pytest.mark.skipif(not ALLREDUCE.is_dir(), reason="the all-reduce example is not here")
def test_link_shares_name_the_raw_rate_and_none_for_the_staged_path(tmp_path):
    b = tmp_path / "ar"
    shutil.copytree(ALLREDUCE, b)
    every = text(rendered(b), None)
    assert "of the NVLink raw rate (450 GB/s)" in every
    assert "raw signalling rate" in every and "so 100% is not the expectation" in every
    assert "NVLink spec" not in every and "PCIe spec" not in every
    assert "of the PCIe raw rate" not in every  # no-p2p went through host memory (SHM)


def test_a_ratio_under_half_a_percent_is_said_as_a_percentage():
    r = unpaired_ratio([1000.10, 1000.11, 1000.10], [1000.0, 1000.01, 1000.0], True)
    s = r.sentence()
    assert not re.search(r"1\.000\dx", s) and s.startswith("0.01% faster")
    one = unpaired_ratio([10.0], [9.0, 9.1, 8.9], True)
    assert "1 and 3 samples, no interval" in one.sentence()
    assert "one sample per side" not in one.sentence()


@pytest.mark.skipif(not LLAMA.is_dir(), reason="the Llama example is not here")
def test_a_kit_that_was_no_git_checkout_is_not_said_to_predate_the_commit(tmp_path):
    def no_commit(doc):  # type: ignore[no-untyped-def]
        doc["kit_commit"] = None

    b = copy_with(LLAMA, tmp_path / "nogit", "results.json", no_commit)
    every = text(rendered(b), None)
    assert "commit not recorded (the kit that ran was not a git checkout)" in every
    assert "bundle made before kit recorded it" not in every
    old = tmp_path / "old"
    shutil.copytree(LLAMA, old)  # recorded before the field existed
    assert "bundle made before kit recorded it" in text(rendered(old), None)


@pytest.mark.skipif(not LLAMA.is_dir(), reason="the Llama example is not here")
def test_a_slurm_run_in_pyxis_is_not_said_to_run_on_the_host(tmp_path):
    def pyxis(doc):  # type: ignore[no-untyped-def]
        doc["runtime"], doc["launcher"] = "slurm", "pyxis"

    b = copy_with(LLAMA, tmp_path / "pyxis", "environment.json", pyxis)
    pdf = rendered(b)
    first = text(pdf)
    assert "slurm runtime (in a pyxis container" in first
    every = text(pdf, None)
    assert "The runs ran in a pyxis container from an unpinned image (slurm runtime)" in every
    assert "The runs ran on the host" not in every


@pytest.mark.skipif(not LLAMA.is_dir(), reason="the Llama example is not here")
def test_a_schema_2_environment_names_its_engine_and_placement(tmp_path):
    """environment.json schema 2 records the placement and the engine apart: a Podman run on
    this machine reads as one, whatever its runtime is called."""

    def podman(doc):  # type: ignore[no-untyped-def]
        doc.update(schema=2, runtime="podman", placement="local", engine="podman", pinned=True)

    b = copy_with(LLAMA, tmp_path / "podman", "environment.json", podman)
    pdf = rendered(b)
    assert "podman runtime (in a podman container" in text(pdf)
    every = text(pdf, None)
    assert "The runs ran in a podman container from a pinned image (podman runtime, local" in every


@pytest.mark.skipif(not RESNET.is_dir(), reason="the ResNet example is not here")
def test_a_build_tag_difference_does_not_lead_the_different_environments_box(tmp_path):
    def versions(doc):  # type: ignore[no-untyped-def]
        doc["container"]["torchvision"] = "0.26.0"
        doc["container"]["torch"] = "2.12.0+cu130"

    b = copy_with(RESNET, tmp_path / "other", "environment.json", versions)
    _html, pdf, _js = write_comparison([RESNET, b], "1", tmp_path / "out")
    first = text(pdf)
    torch = first.index("torch 2.12.0+cu130 vs 2.11.0+cu130")
    vision = first.index("torchvision 0.26.0 on both, build none vs cu130")
    assert torch < vision


@pytest.mark.skipif(not (EXAMPLES / "h200x4-fsdp-llama").is_dir(), reason="examples not here")
def test_known_machines_that_are_not_like_for_like_are_said_to_be(tmp_path):
    """Issue 34 item 5: 'Against known machines' says plainly where the run count and GPU count
    differ from the known machine's."""
    b = tmp_path / "x4"
    shutil.copytree(EXAMPLES / "h200x4-fsdp-llama", b)
    every = text(rendered(b), None)
    assert (
        "Not like for like: llama-8b-lora / p2p against h200x2-fsdp-llama-container-rerun "
        "(shipped): 2 runs here against 3 there, 4 GPUs here against 2 there" in every
    )
    # each known machine by the name its row in the table gives (the hardware names them alike),
    # and pinned by the one rule: the container bundle built FROM a local base recorded pinned
    assert "against h200x2-fsdp-llama-container (shipped): 2 runs" in every
    assert "docker runtime (pinned)" not in every


LLAMA4 = EXAMPLES / "h200x4-fsdp-llama"


@pytest.mark.skipif(not LLAMA4.is_dir(), reason="the 4x H200 Llama example is not here")
def test_the_colophon_never_holds_a_page_alone(tmp_path):
    """The report review, 9: the 4x H200 Llama report's last page held the colophon's one
    paragraph; it keeps the manifest's last row with it."""
    b = tmp_path / "llama4"
    shutil.copytree(LLAMA4, b)
    pages = [re.sub(r"\s+", " ", p.extract_text()) for p in PdfReader(rendered(b)).pages]
    last = pages[-1]
    assert "Rendered on" in last and re.search(r"\b[0-9a-f]{64}\b", last)


H100_DECODE = EXAMPLES / "h100x1-decode-dp-copy-container"
H200_DECODE = EXAMPLES / "h200x2-decode-dp-copy-container"


@pytest.mark.skipif(not (H100_DECODE.is_dir() and H200_DECODE.is_dir()), reason="examples not here")
def test_one_gpu_against_two_reads_as_one_gpu_and_the_headline_table_keeps_its_heading(tmp_path):
    """One H100 against the 2x H200 bundles (2026-12-02): '1 GPUs' in three sentences, and the
    comparison's "Headline results" heading with its header row alone at the foot of page 1,
    the rows on page 2. And page 1's interconnect section said "only one variant was run", as
    if one had been left out: on one GPU nothing crosses a link, and it says so."""
    every = " ".join(text(rendered(copy_bundle(H100_DECODE, tmp_path / "h100")), None).split())
    assert "1 GPU here against 2 there" in every and "1 GPU, n=3" in every
    assert "1 GPUs" not in every
    assert (
        "No comparison between variants: each run used one GPU, so nothing crossed a link" in every
    )
    assert "only one variant was run" not in every
    _html, pdf, _js = write_comparison([H200_DECODE, H100_DECODE], "1", tmp_path / "cmp")
    pages = [" ".join(page.extract_text().split()) for page in PdfReader(pdf).pages]
    assert "ran the same workloads on 1 GPU, the baseline" in " ".join(pages)
    assert "1 GPUs" not in " ".join(pages)
    (headline,) = [p for p in pages if "Headline results" in p]
    assert "hbm-copy / p2p device-local copy" in headline.split("Headline results")[1]
