"""Issue 48: page 1 of a decode report names what ran, shows the batch-1 time per output token
and tokens/s, and gives no P2P verdict for data-parallel runs (no data moves between GPUs),
while tensor-parallel ones keep theirs. On the committed CPU smoke bundle of
recipes/llm_decode.yaml (tests/fixtures/bundles/decode-cpu-smoke, 3 repeats)."""

from __future__ import annotations

import html
import json
import re
import shutil
import statistics

import pytest
from pypdf import PdfReader

from kit.bundle import Bundle
from kit.model import load_bundle
from kit.report import analysis
from kit.report.analysis.summary import SEQUENCE
from kit.report.render import render_bundle, render_html
from kit.shared.metrics import words
from kit.stats import summarize
from tests.conftest import ROOT, needs_pdf

DECODE = ROOT / "tests" / "fixtures" / "bundles" / "decode-cpu-smoke"
RAN = "2 layers, 64 wide, fp32, batch 1/2/4, prompt 16, 8 decode steps, tp {}, eager step"
SILENT = (
    "decode-dp (LLM decode) recipe at smoke size, p2p against no-p2p: no P2P verdict: tp 1 is "
    "data parallel: every GPU serves its own copy of the model and no data moves between GPUs"
)


def _text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def _benches(device: str = "cpu", backend: str = "gloo") -> list[analysis.Benchmark]:
    data = load_bundle(DECODE)
    runs = [r.model_copy(update={"device": device, "backend": backend}) for r in data.results.runs]
    return analysis.build_benchmarks(data.results.model_copy(update={"runs": runs}), data.recipe)


def test_page_1_says_what_ran_and_the_batch_1_figures():
    first = _text(render_html(Bundle.load(DECODE)))
    first = first[: first.index("The variants")]
    assert "parameters not recorded" not in first
    for tp in (1, 2):
        assert RAN.format(tp) + " on 2 processes" in first
    assert "time per token, batch 1" in first and "p90 " in first
    assert "tokens/s at batch 1" in first
    runs = load_bundle(DECODE).results.runs
    for bench in _benches():
        summary = analysis.summarize_bench(bench, load_bundle(DECODE).hardware, "")
        assert summary.beside == [  # no HBM share on the CPU: no datasheet HBM figure
            "time per token, batch 1",  # page 1's short headings (kit.workloads.base.Beside)
            "tokens/s at batch 1",
            SEQUENCE,
        ]
        for vs in summary.variants:
            mine = [r for r in runs if (r.benchmark, r.variant) == (bench.name, vs.variant)]
            tpot = vs.beside["time per token, batch 1"]
            assert tpot["unit"] == "ms" and tpot["median"] == statistics.median(
                r.metrics["tpot_median_ms"].value for r in mine
            )
            # the p90 under the median, from its own metric
            assert tpot["under"]["words"] == "p90" and tpot["under"]["median"] == statistics.median(
                r.metrics["tpot_p90_ms"].value for r in mine
            )
            b1 = vs.beside["tokens/s at batch 1"]["median"]
            assert b1 == statistics.median(r.metrics["decode_tokens_per_s_b1"].value for r in mine)
            # one stream's speed (the report review, 1): DP's batch-1 tokens/s adds streams up
            one = vs.beside[SEQUENCE]
            assert one["unit"] == "tokens/s" and one["median"] == pytest.approx(
                statistics.median(1000 / r.metrics["tpot_median_ms"].value for r in mine)
            )


def test_no_p2p_verdict_for_data_parallel_decode_on_gpus():
    """The runs as they read on GPUs (NCCL): data parallel moves nothing between GPUs, so P2P on
    against off is no verdict on the link; tensor parallel all-reduces every layer and keeps it."""
    dp, tp2 = _benches("cuda", "nccl")
    (quiet,) = dp.verdicts  # one sentence, not one per metric
    assert quiet.p2p and quiet.ratio is None and quiet.withheld.startswith("tp 1 is data parallel")
    assert quiet.sentence.startswith(SILENT)
    assert tp2.verdicts and all(v.p2p and v.ratio is not None for v in tp2.verdicts)
    assert not any("no P2P verdict" in v.sentence for v in tp2.verdicts)


@needs_pdf
def test_the_pdf_page_1_shows_them(tmp_path):
    b = tmp_path / "decode"
    shutil.copytree(DECODE, b)
    render_bundle(Bundle.load(b))
    pages = PdfReader(b / "report.pdf").pages
    # page 1's block (it runs onto the next pages: each decode table with its figure)
    first = re.sub(r"\s+", " ", " ".join(page.extract_text() for page in pages))
    first = first[: first.index("The variants")]
    assert "parameters not recorded" not in first
    assert "time per token, batch 1" in first
    assert SILENT in first
    # every section flows on from the one before: a page break forced before each benchmark
    # section, and then before the details, left pages holding a section's last lines (the
    # report review, 9: near-empty pages); the last page holds what is left of the appendix
    lines = [len([x for x in page.extract_text().splitlines() if x.strip()]) for page in pages]
    assert min(lines[:-1]) >= 25, lines


def test_two_curves_close_together_print_their_labels_apart():
    """The report review, 10: "208.1" printed over "197.3". At each batch the higher median's
    label sits above its point and the lower one's below."""
    from kit.report.decode import label_places

    data = {"p2p": {1: [208.1], 4: [400.0]}, "no-p2p": {1: [197.3], 4: [450.0]}}
    places = {(v, b): place[1:] for v, b, _, place in label_places(data)}
    assert places[("p2p", 1)] == (4, "right", "bottom")
    assert places[("no-p2p", 1)] == (-4, "left", "top")
    assert places[("no-p2p", 4)] == (4, "right", "bottom")
    assert places[("p2p", 4)] == (-4, "left", "top")


# the medians of reports/examples/h200x2-decode-tp2-container, whose figure crossed "318.4",
# "1,979" and "7,092" with their own curve and cut "293.9" off at the bottom axis
TP2 = {
    "p2p": {1: [318.4], 8: [1979.0], 32: [7092.0], 128: [19234.0]},
    "no-p2p": {1: [293.9], 8: [1751.0], 32: [4951.0], 128: [11449.0]},
}
CLOSE = {"p2p": {1: [208.1], 8: [1400.0]}, "no-p2p": {1: [197.3], 8: [1390.0]}}


@pytest.mark.parametrize("data", [TP2, CLOSE], ids=["h200x2-tp2", "close"])
def test_no_value_label_is_crossed_by_a_curve_cut_by_the_axes_or_on_another(data):
    """Drawn as the report draws it: every label inside the axes, clear of every curve and of
    every other label and of the legend."""
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from kit.report import plots
    from kit.report.decode import decode_figure

    with matplotlib.rc_context(plots.RC):
        fig = decode_figure(data, "decode-tp2")
        canvas = FigureCanvasAgg(fig)
        canvas.draw()
        r = canvas.get_renderer()
        ax = fig.axes[0]
        boxes = {t.get_text(): t.get_window_extent(r) for t in ax.texts}
        legend = ax.get_legend().get_window_extent(r)
    assert len(boxes) == sum(len(per) for per in data.values())
    inside = ax.bbox
    for text, box in boxes.items():
        assert inside.x0 <= box.x0 and box.x1 <= inside.x1, f"{text} leaves the axes sideways"
        assert inside.y0 <= box.y0 and box.y1 <= inside.y1, f"{text} leaves the axes"
        assert not box.overlaps(legend), f"{text} under the legend"
        for line in ax.lines:
            path = line.get_transform().transform_path(line.get_path())
            assert not path.intersects_bbox(box, filled=False), f"a curve crosses {text}"
    names = list(boxes)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            assert not boxes[a].overlaps(boxes[b]), f"{a} on {b}"


def test_tensor_parallel_s_speed_for_one_sequence_against_data_parallel():
    """The report review, 1: page 1 states TP's batch-1 speed-up per sequence (the ratio of the
    median times per output token), which its batch-1 tokens/s column cannot show."""
    from kit.report.decode import tp_speedups

    dp, tp2 = _benches()
    lines = tp_speedups([dp, tp2])
    assert len(lines) == 2  # p2p and no-p2p
    for variant, line in zip(("p2p", "no-p2p"), lines, strict=True):
        mine = tp2.metrics["tpot_median_ms"][variant].summary.median
        theirs = dp.metrics["tpot_median_ms"][variant].summary.median
        r = theirs / mine  # the CPU smoke: two processes are slower than one
        how = f"{r:.2f}x faster than" if r >= 1 else f"{1 / r:.2f}x slower than"
        assert line.startswith(f"decode-tp2 (tp 2), {variant}: one sequence {how} on decode-dp")
    assert tp_speedups([dp]) == []  # nothing to hold it against
    first = _text(render_html(Bundle.load(DECODE)))
    assert "Tensor parallel, one sequence at batch 1 : " + lines[0] in first


@needs_pdf
def test_a_comparison_of_a_data_parallel_and_a_tensor_parallel_bundle_states_the_speed_up(
    tmp_path,
):
    """The report review, 1, across bundles: `kit compare` of the shipped 2x H200 decode bundles
    (data parallel; TP=2 from another machine of the same model) states TP's speed-up for one
    sequence, naming both machines, from the two medians the bundles hold, and says when the
    two bundles ran on two machines."""
    from kit.report.compare import write_comparison

    examples = ROOT / "reports" / "examples"
    dp, tp = examples / "h200x2-decode-dp-container", examples / "h200x2-decode-tp2-container"
    _, pdf, js = write_comparison([dp, tp], 1, tmp_path / "cmp")
    lines = json.loads(js.read_text())["tp_speedups"]
    medians = {}
    for bundle in (dp, tp):
        data = load_bundle(bundle)
        for b in analysis.build_benchmarks(data.results, data.recipe):
            for variant, row in b.metrics["tpot_median_ms"].items():
                medians[(b.name, variant)] = row.summary.median
    assert len(lines) == 2  # TP=2 p2p and no-p2p, each against data parallel's same variant
    for variant, line in zip(("p2p", "no-p2p"), lines, strict=True):
        mine, theirs = medians[("decode-tp2", variant)], medians[("decode-dp", variant)]
        assert line.startswith(
            f"decode-tp2 on 2x H200 NV18 [2] (tp 2), {variant}: one sequence "
            f"{theirs / mine:.2f}x faster than decode-dp on 2x H200 NV18 [1] (tp 1"
        )
        assert f"{mine:.3g} against {theirs:.3g} ms per output token" in line
        assert line.endswith("; two machines of one model: their own difference is in the ratio")
    text = " ".join(" ".join(p.extract_text() for p in PdfReader(pdf).pages).split())
    assert "Tensor parallel, one sequence at batch 1" in text and lines[0][:60] in text
    # the one-shot TP=2 bundle ran on the data-parallel bundle's machine (the same GPU UUIDs)
    one_shot = examples / "h200x2-decode-tp2-one-shot-container"
    _, _, js = write_comparison([dp, one_shot], 1, tmp_path / "same")
    lines = json.loads(js.read_text())["tp_speedups"]
    assert len(lines) == 2 and not any("two machines" in line for line in lines)
    assert lines[0].startswith("decode-tp2 on 2x H200 NV18, bundle 2 (tp 2), p2p: one sequence ")


def test_tensor_parallel_against_a_data_parallel_run_of_one_variant():
    """recipes/llm_decode.yaml runs decode-dp P2P on only (P2P moves nothing there): TP's P2P-off
    sequence is held against that one variant, which its sentence names."""
    from kit.report.decode import tp_speedups

    dp, tp2 = _benches()
    for rows in dp.metrics.values():
        rows.pop("no-p2p", None)
    on, off = tp_speedups([dp, tp2])
    assert " on decode-dp (tp 1), " in on
    assert off.startswith("decode-tp2 (tp 2), no-p2p: one sequence ")
    assert " on decode-dp (tp 1, p2p), " in off
    theirs = dp.metrics["tpot_median_ms"]["p2p"].summary.median
    assert f"against {theirs:.3g} ms per output token" in off


def test_one_model_copy_prints_its_batch_1_tokens_per_s_once():
    """One model copy on one GPU: batch-1 tokens/s and 1 / time per output token are one figure
    (237.7 twice on the H200 bundle of 2026-11-29); the second column is left out."""
    data = load_bundle(DECODE)
    runs = []
    for r in data.results.runs:
        one = r.metrics["decode_tokens_per_s_b1"].model_copy(
            update={"value": 1000 / r.metrics["tpot_median_ms"].value}
        )
        runs.append(r.model_copy(update={"metrics": {**r.metrics, "decode_tokens_per_s_b1": one}}))
    results = data.results.model_copy(update={"runs": runs})
    for bench in analysis.build_benchmarks(results, data.recipe):
        summary = analysis.summarize_bench(bench, data.hardware, "")
        assert "tokens/s at batch 1" in summary.beside
        assert SEQUENCE not in summary.beside


H200_DECODE = ROOT / "reports/measurements/2026-11-28-decode-step/call-17-h200"


def test_page_1_holds_batch_1_reads_against_the_copy_ceiling_measured_beside_them(tmp_path):
    """Issue 47: a decode bundle that ran the copy check on the same GPU states the batch-1 reads'
    share of that measured ceiling on page 1 (not only in the silicon section). The pinned H200
    bundle of 2026-11-29 as it came back: 3,586 GB/s, 85% of 4,220 GB/s."""
    import tarfile

    with tarfile.open(H200_DECODE / "c5-decode-h200x1.tar.gz") as tar:
        tar.extractall(tmp_path, filter="data")
    bundle = tmp_path / "c5-decode-h200x1" / "bundles" / "docker-llm_decode_1gpu"
    text = _text(render_html(Bundle.load(bundle)))
    first = text[: text.index("The variants")]
    line = "a batch-1 decode step reads memory at 3,586 GB/s per GPU, 85% of the 4,220 GB/s device-local copy"
    assert line in first
    assert text.count(line) == 2  # page 1 and the silicon section: one sentence, one definition
    assert first.count("237.7 tokens/s") == 1  # batch-1 tokens/s once (one model copy)
    # tokens/s against batch on page 1 (issue 47), its section pointing there
    html = render_html(Bundle.load(bundle))
    head = html[: html.index("The variants")]
    assert 'id="fig-decode-dp-decode"' in head and html.count('id="fig-decode-dp-decode"') == 1
    assert "Figure 1. LLM decode: decode throughput against batch" in _text(head)
    # the HTML links it (the PDF prints the page it landed on: test_report_render)
    assert (
        "Figure 1 (LLM decode: decode throughput against batch, all GPUs of the run) is in the "
        "summary" in text
    )
    assert '<a href="#fig-decode-dp-decode">in the summary</a>, under this benchmark' in html


def test_what_the_runs_noted_is_in_the_benchmark_section_once_with_who_said_it():
    """A run's notes (how it ran: the kernels, a fallback, a parameter a variant could not honour)
    reach the report: each note once, with the variant or the runs that said it where not every
    finished run did (a one-shot asked for, NCCL's run where P2P is off, says so there)."""
    _, tp2 = _benches()
    everyone = analysis.run_notes(tp2)
    assert everyone == [
        ("step_mode graph asked; the CPU runs the eager step", ""),
        ("largest batch that fits: measured on a GPU only", ""),
    ]
    off = next(v for v in tp2.variants if v.name == "no-p2p")
    first_on = next(v for v in tp2.variants if v.name == "p2p").ok[0]
    fallback = "all_reduce one-shot asked; NCCL's all-reduce ran: this variant has P2P off"
    picks = "batch 1: block sizes autotuned: 4 rows"
    for r in off.ok:
        r.notes.append(fallback)
    first_on.notes.append(picks)
    said = dict(analysis.run_notes(tp2))
    assert said[fallback] == "no-p2p" and said[picks] == first_on.run_id
    assert len(said) == 4  # each note once, however many runs said it
    for r in off.ok:  # said twice by a run: once
        r.notes.append(fallback)
    assert dict(analysis.run_notes(tp2))[fallback] == "no-p2p"
    # a bundle whose runs say too much: the report lists 20 notes, counts the rest, cuts the long
    first_on.notes[:] = [f"note {i} " + "x" * 2000 for i in range(30)]
    many = analysis.run_notes(tp2)
    # 33 distinct: these 30, the two every other run said, the P2P-off fallback
    assert len(many) == 21 and many[-1] == ("and 13 more notes, in the runs' result.json", "")
    assert all(len(text) < 700 for text, _ in many)
    html = _text(render_html(Bundle.load(DECODE)))
    assert "How the runs ran, as each noted it" in html
    assert html.count("step_mode graph asked; the CPU runs the eager step") == 2  # once a benchmark


TP2 = ROOT / "reports" / "examples" / "h200x2-decode-tp2-container"


def test_page_1_gives_decode_s_energy_per_token_at_the_largest_batch_and_at_batch_1():
    """The report review, 4: J per token is the inference buyer's cost figure, and page 1 had it
    for training only. Decode records its own (NVML's counter at each batch size's edges); page 1
    gives the medians of the runs' figures, the same ones the section shows."""
    data = load_bundle(TP2)
    (bench,) = analysis.build_benchmarks(data.results, data.recipe)
    summary = analysis.summarize_bench(bench, data.hardware, "")
    for vs in summary.variants:
        mine = [r for r in data.results.runs if r.variant == vs.variant and r.status == "ok"]
        e = vs.energy
        assert e.j_per_unit == statistics.median(r.metrics["j_per_token"].value for r in mine)
        assert e.under == (
            "at batch 1",
            statistics.median(r.metrics["j_per_token_b1"].value for r in mine),
        )
        assert e.unit == "output token" and e.words == "at the largest batch timed"
        # the runs' interval, as the headline's (a buyer compares J per token across machines)
        assert e.interval == summarize([r.metrics["j_per_token"].value for r in mine]).words(
            "J/output token"
        )
    p2p, no = (vs.energy.interval for vs in summary.variants)
    page1 = html.unescape(_text(render_html(Bundle.load(TP2))))
    page1 = page1[: page1.index("The variants")]
    assert (
        "Energy per output token, GPU boards only (NVML's total-energy counter of every GPU the "
        "runs drove, over the output tokens of a batch size's timed generations, their prefill "
        "included; medians of the runs): p2p 0.138 J at the largest batch timed (26.0 M output tokens/kWh; "
        f"{p2p}), 2.89 J at batch 1; no-p2p 0.165 J at the largest batch timed (21.8 M output "
        f"tokens/kWh; {no}), 2.74 J at batch 1." in page1
    )
    assert "energy*" not in page1  # a sentence, not a column: decode's table is full


def test_a_tensor_parallel_bundle_alone_says_where_its_speed_up_is_found():
    """The report review, 1: a bundle of tensor-parallel runs alone printed no speed-up and no
    word of where to find one; page 1 now names `kit compare` with a data-parallel bundle."""
    page1 = _text(render_html(Bundle.load(TP2)))
    page1 = page1[: page1.index("The variants")]
    assert (
        "Tensor parallel, one sequence at batch 1 : decode-tp2 (tp 2): no data-parallel (tp 1) "
        "benchmark in this bundle to hold it against; kit compare with a tp 1 bundle of the same "
        "GPU model, count and links states the speed-up." in page1
    )


@needs_pdf
@pytest.mark.slow
def test_no_page_of_the_decode_and_copy_example_holds_a_heading_and_a_line(tmp_path):
    """The report review, 9, as found on the H200 decode-and-copy example: page 9 of 15 held
    only "This bundle's other workloads against these ceilings" and one bullet, before a page
    break forced ahead of the Hardware section."""
    b = tmp_path / "dp-copy"
    shutil.copytree(ROOT / "reports" / "examples" / "h200x2-decode-dp-copy-container", b)
    render_bundle(Bundle.load(b))
    pages = PdfReader(b / "report.pdf").pages
    lines = [len([x for x in page.extract_text().splitlines() if x.strip()]) for page in pages]
    assert min(lines[:-1]) >= 25, lines


def test_page_1_says_the_batch_1_p2p_ratio_once():
    """A buyer's reading: "1.08x faster ... in batch-1 decode reads, share of datasheet HBM"
    repeated the batch-1 tokens/s verdict (the share is that figure times a constant) and called
    a share "faster"."""
    data = load_bundle(TP2)
    (bench,) = analysis.build_benchmarks(data.results, data.recipe)
    assert [v.metric for v in bench.verdicts] == ["decode_tokens_per_s", "decode_tokens_per_s_b1"]
    assert all(" faster " in v.sentence for v in bench.verdicts)
    assert words("hbm_share_b1") == ("higher", "lower")  # a share is higher, not faster


def test_the_largest_batch_that_fits_says_at_what_length():
    """A buyer's reading: "largest batch that fits 121 sequences" beside a headline measured at
    batch 128: the fit is searched at fit_seq_len tokens a sequence, which the heading now says
    (from the runs' recorded parameters; an edited value leaves the heading's first words)."""
    from kit.report.analysis.summary import _heading

    data = load_bundle(ROOT / "reports" / "examples" / "h200x2-decode-dp-container")
    (bench,) = analysis.build_benchmarks(data.results, data.recipe)
    summary = analysis.summarize_bench(bench, data.hardware, "")
    assert "largest batch that fits, 8,192 tokens each" in summary.beside
    assert summary.variants[0].beside["largest batch that fits, 8,192 tokens each"]["median"] == 121
    bench.params = {"fit_seq_len": "8k"}  # a bundle someone edited: no number to format
    assert _heading("largest batch that fits, {fit_seq_len:,} tokens each", bench) == (
        "largest batch that fits"
    )
