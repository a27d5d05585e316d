"""`kit refs nccl-tests`: nccl-tests output taken into a sealed bundle through the real CLI, the
bundle still verifying, and the report's per-size ratio column read back from the HTML and PDF.

The bundle is the real CPU smoke bundle (tests/fixtures/bundles/cpu-smoke, two gloo ranks), the
nccl-tests runs the real 2x H200 all_reduce_perf outputs shipped in kit/refs/nccl_tests: a
pairing no one would make on purpose (the CPU against NVLink), but both sides are recorded
measurements, and the ratios the report prints must follow from them.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from pypdf import PdfReader

from kit.model import load_bundle
from kit.refs.nccl_tests import SAME_CALL_FLOOR, SAME_CALL_FROM, parse
from kit.report.analysis import bundle_benchmarks, sweep_curves
from tests.conftest import ROOT, needs_pdf, run_kit

FIXTURE = ROOT / "tests/fixtures/bundles/cpu-smoke"
SHIPPED = ROOT / "kit/refs/nccl_tests"


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    out = tmp_path / "bundle"
    shutil.copytree(FIXTURE, out)
    return out


def _outputs(tmp_path: Path) -> list[Path]:
    """The shipped runs under the names multi_gpu.sh gives them: program-variant-rN.txt."""
    folder = tmp_path / "nccl-tests-out"
    folder.mkdir()
    out = []
    for variant in ("p2p", "no-p2p"):
        path = folder / f"all_reduce_perf-{variant}-r1.txt"
        shutil.copy(SHIPPED / f"nccl-tests-{variant}-2gpu-h200.txt", path)
        out.append(path)
    return out


def _manifest(bundle: Path) -> dict[str, str]:
    return {
        line.split("  ", 1)[1]: line.split("  ", 1)[0]
        for line in (bundle / "MANIFEST.sha256").read_text().splitlines()
    }


def test_ingest_seals_the_files_and_the_report_prints_each_ratio(bundle, tmp_path):
    outputs = _outputs(tmp_path)
    proc = run_kit("refs", "nccl-tests", str(bundle), *map(str, outputs))
    assert proc.returncode == 0, proc.stderr
    assert "added nccl-tests/all_reduce_perf-p2p-1.txt: all_reduce_perf, 2 GPUs, -w 5 -n 20" in (
        proc.stdout
    )
    assert run_kit("verify", str(bundle)).returncode == 0
    manifest = _manifest(bundle)
    stored = bundle / "nccl-tests/all_reduce_perf-p2p-1.txt"
    assert "nccl-tests/all_reduce_perf-p2p-1.txt" in manifest
    assert "nccl-tests/all_reduce_perf-no-p2p-1.txt" in manifest
    assert stored.read_text() == outputs[0].read_text()  # verbatim

    # the ratio column: the kit's curve (median over repeats) over nccl-tests' in-place busbw
    curve = sweep_curves(bundle_benchmarks(load_bundle(bundle))[0])["curves"]["p2p"]
    ref = parse(outputs[0].read_text())
    html = (bundle / "report.html").read_text()
    table = html[html.index("p2p against nccl-tests all_reduce_perf in the same call") :]
    checked = 0
    for size, point in curve.items():
        theirs = ref.in_place[size][1]
        if theirs > 0:
            cell = f"{point['busbw'] / theirs:.3f}"
            assert re.search(rf"<td class=\"num[^\"]*\">{size}</td>.*?{re.escape(cell)}", table)
            checked += 1
    assert checked >= 3
    assert "kit: torch.distributed.all_reduce" not in table  # the fixture predates the record
    assert "nccl-tests: ncclAllReduce" in table

    # the same output again (on its own or twice in one call) would weigh twice in the median
    again = run_kit("refs", "nccl-tests", str(bundle), str(outputs[0]))
    assert again.returncode == 2 and "already taken" in again.stderr
    assert run_kit("verify", str(bundle)).returncode == 0


@needs_pdf
def test_the_pdf_names_the_sizes_below_the_floor(bundle, tmp_path):
    outputs = _outputs(tmp_path)
    assert run_kit("refs", "nccl-tests", str(bundle), *map(str, outputs)).returncode == 0
    # pypdf, not poppler's pdftotext: the test needs nothing beyond Python
    text = " ".join(page.extract_text() for page in PdfReader(bundle / "report.pdf").pages)
    curve = sweep_curves(bundle_benchmarks(load_bundle(bundle))[0])["curves"]["no-p2p"]
    ref = parse(outputs[1].read_text())
    slow = [s for s, p in curve.items() if p["time"] / ref.in_place[s][0] > 1.10]
    assert slow  # the CPU is slower than NVLink at every size
    verdict = " ".join(text[text.index("no-p2p: time per call over") :].split()[:12])
    assert f"{curve[slow[0]]['time'] / ref.in_place[slow[0]][0]:.2f}x" in verdict
    # the smoke sweep ends at 32 KiB: no size from 1 MiB is judged on busbw
    assert max(curve) < SAME_CALL_FROM and f"below {SAME_CALL_FLOOR}x" not in text


def test_a_graph_run_of_nccl_tests_is_not_compared_with_an_eager_sweep(bundle, tmp_path):
    outputs = _outputs(tmp_path)
    text = outputs[0].read_text()
    assert "graph: 0" in text
    outputs[0].write_text(text.replace("graph: 0", "graph: 1"))  # as nccl-tests -G 1 prints
    proc = run_kit("refs", "nccl-tests", str(bundle), str(outputs[0]))
    assert proc.returncode == 0, proc.stderr
    html = (bundle / "report.html").read_text()
    assert (
        "p2p: 7 sizes timed without a CUDA graph not compared: every nccl-tests run used -G."
        in html
    )
    table = html[html.index("p2p against nccl-tests all_reduce_perf in the same call") :]
    assert "-w 5 -n 20 -G 1" in table[:2000]
    # the eager run of the same program and variant is stored beside it, and compared alone
    eager = tmp_path / "all_reduce_perf-p2p-r2.txt"
    eager.write_text(text)
    assert run_kit("refs", "nccl-tests", str(bundle), str(eager)).returncode == 0
    assert (bundle / "nccl-tests/all_reduce_perf-p2p-2.txt").read_text() == text
    html = (bundle / "report.html").read_text()
    table = html[html.index("p2p against nccl-tests all_reduce_perf in the same call") :]
    assert "(1 run, -w 5 -n 20; -w 5 -n 20 -G 1;" in table[:2000] and "<tbody>" in table[:4000]
    assert run_kit("verify", str(bundle)).returncode == 0


@pytest.mark.parametrize(
    "case",
    [
        "not-nccl-tests",
        "no-variant",
        "p2p-off",
        "wrong-variant",
        "edited",
        "signed",
        "gpus",
        "twice",
    ],
)
def test_refused_with_one_line_and_the_bundle_untouched(bundle, tmp_path, case):
    outputs = _outputs(tmp_path)
    args = [str(outputs[0])]
    if case == "not-nccl-tests":
        bad = tmp_path / "all_reduce_perf-p2p.txt"
        bad.write_text("# nothing measured here\n")
        args = [str(bad)]
    elif case == "no-variant":
        odd = tmp_path / "all_reduce_perf-run1.txt"
        shutil.copy(outputs[0], odd)
        args = [str(odd)]
    elif case == "p2p-off":  # a name that starts with a variant but says another thing after it
        off = tmp_path / "all_reduce_perf-p2p-off-1.txt"
        shutil.copy(outputs[1], off)
        args = [str(off)]
    elif case == "wrong-variant":
        args += ["--variant", "nvls"]
    elif case == "edited":
        (bundle / "recipe.yaml").write_text((bundle / "recipe.yaml").read_text() + "\n")
    elif case == "signed":
        (bundle / "MANIFEST.sha256.sig").write_text("not a signature, but present\n")
    elif case == "twice":
        args = [str(outputs[0]), str(outputs[1]), str(outputs[0])]
    elif case == "gpus":
        text = outputs[0].read_text()
        lines = text.splitlines(keepends=True)
        i = next(n for n, line in enumerate(lines) if "Rank  1" in line)
        lines.insert(i + 1, lines[i].replace("Rank  1", "Rank  2"))
        outputs[0].write_text("".join(lines))
    before = sorted(p.relative_to(bundle) for p in bundle.rglob("*"))
    proc = run_kit("refs", "nccl-tests", str(bundle), *args)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert sorted(p.relative_to(bundle) for p in bundle.rglob("*")) == before
    assert not (bundle / "nccl-tests").exists()


EXAMPLE = ROOT / "reports/examples/h200x2-allreduce"


def test_page_one_of_a_gpu_bundle_reads_the_same_call_comparison(tmp_path):
    """The committed 2x H200 all-reduce example with the nccl-tests run of its own session
    (kit/refs/nccl_tests, same machine and NCCL): page 1 takes the same-call sentence, sizes
    the kit replayed from a CUDA graph are left out (nccl-tests ran without -G), and the
    sizes named are those whose ratio the two recordings give."""
    bundle = tmp_path / "example"
    shutil.copytree(EXAMPLE, bundle)
    out = tmp_path / "all_reduce_perf-p2p.txt"
    shutil.copy(SHIPPED / "nccl-tests-p2p-2gpu-h200.txt", out)
    proc = run_kit("refs", "nccl-tests", str(bundle), str(out))
    assert proc.returncode == 0, proc.stderr
    assert run_kit("verify", str(bundle)).returncode == 0
    curve = sweep_curves(bundle_benchmarks(load_bundle(bundle))[0])["curves"]["p2p"]
    ref = parse(out.read_text())
    graph = [s for s, p in curve.items() if "cuda-graph" in p["timing"]]
    low = [
        s for s, p in curve.items()
        if s >= SAME_CALL_FROM and s not in graph
        and p["busbw"] / ref.in_place[s][1] < SAME_CALL_FLOOR
    ]  # fmt: skip
    assert graph and low
    html = (bundle / "report.html").read_text()
    page1 = html[: html.index("p2p against nccl-tests all_reduce_perf in the same call")]
    sentence = page1[page1.index("against nccl-tests all_reduce_perf in the same call") :]
    sentence = sentence[: sentence.index("</p>")]
    for s in low:
        ratio = curve[s]["busbw"] / ref.in_place[s][1]
        assert f"({ratio:.3f}x)" in sentence
    assert f"{len(graph)} sizes timed by CUDA-graph replay not compared" in sentence
