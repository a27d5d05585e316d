"""Render the fixture bundles to real HTML and PDF files and read them back as a reader would:
the PDF's text and pages (pypdf), the HTML in headless Chromium (where Debian's chromium is
installed), and that nothing is fetched whatever a bundle's strings contain."""

from __future__ import annotations

import functools
import http.server
import json
import os
import re
import shutil
import subprocess
import threading
from html.parser import HTMLParser
from pathlib import Path
from typing import ClassVar

import pytest
from pypdf import PdfReader

from kit.bundle import Bundle, verify_manifest, write_manifest
from kit.model import load_bundle
from kit.report.facts.price import parse_price
from kit.report.pdf import offline_fetcher, write_pdf
from kit.report.render import render_bundle
from kit.stats import summarize
from tests.conftest import copy_bundle, needs_pdf, run_kit

pytestmark = [pytest.mark.slow, needs_pdf]

ROOT = Path(__file__).resolve().parent.parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "bundles"
H200 = ROOT / "reports" / "examples" / "allreduce-h200x2-first"  # a real 2x H200 run
# fixture -> (min pages, max pages, figure keys that must be there)
EXPECTED = {
    "synthetic-2gpu": (8, 20, ["busbw", "time", "bars", "steps", "telemetry"]),
    "synthetic-failures": (8, 22, ["busbw", "time", "bars", "steps", "telemetry"]),
    "cpu-smoke": (3, 10, ["busbw", "time"]),
    "h200": (4, 14, ["busbw", "time", "telemetry"]),
}


def rendered(tmp_path: Path, name: str) -> Path:
    dst = tmp_path / name
    source = {"h200": H200, "h100-container": H100_CONTAINER}.get(name, FIXTURES / name)
    shutil.copytree(source, dst)
    render_bundle(Bundle.load(dst))
    return dst


@pytest.fixture(scope="module")
def once(tmp_path_factory):
    """Each fixture bundle rendered once for the tests that only read the result (CI has 2 cores)."""
    cache: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in cache:
            cache[name] = rendered(tmp_path_factory.mktemp("once"), name)
        return cache[name]

    return get


@functools.lru_cache(maxsize=32)
def _page_texts(path: str, written: tuple[int, int, int], layout: bool) -> tuple[str, ...]:
    """Each page's text, read once per written file (`written`: its inode, size and mtime, so a
    re-rendered PDF is read again): pypdf takes seconds a PDF, and tests read one PDF often."""
    mode = {"extraction_mode": "layout"} if layout else {}
    return tuple(page.extract_text(**mode) for page in PdfReader(path).pages)


def _written(path: Path) -> tuple[int, int, int]:
    st = path.stat()
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def pdf_text(path: Path) -> str:
    """The PDF's text as laid out on the page (table rows stay rows), pages split by a form feed
    as pdftotext writes them; pypdf, so no system tool is needed."""
    return "\f".join(_page_texts(str(path), _written(path), True))


def figure_text(path: Path) -> str:
    """Every string drawn on the pages, the plots' own text included (pypdf's layout mode skips
    the form objects WeasyPrint draws an inline SVG into)."""
    return "\f".join(_page_texts(str(path), _written(path), False))


class Cells(HTMLParser):
    """The text of every <tr> with a class, by class."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[tuple[str, str]] = []
        self._cls: str | None = None
        self._buf: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag == "tr":
            self._cls, self._buf = dict(attrs).get("class") or "", []

    def handle_endtag(self, tag):
        if tag == "tr" and self._cls is not None:
            self.rows.append((self._cls, " ".join("".join(self._buf).split())))
            self._cls = None

    def handle_data(self, data):
        if self._cls is not None:
            self._buf.append(data)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_renders_to_html_and_pdf(once, name):
    low, high, keys = EXPECTED[name]
    # no time limit here: a render's speed is measured as a benchmark
    # (reports/measurements/2026-11-23-report-speed), never as a timed test that fails under load
    b = once(name)
    html = (b / "report.html").read_text()
    pdf = b / "report.pdf"
    pages = len(PdfReader(pdf).pages)
    assert low <= pages <= high, pages
    text = pdf_text(pdf)
    assert "Interconnect: peer-to-peer on against off" in text
    assert "Before you trust these numbers" in text
    for section in ("Hardware", "Environment", "Method", "Reproduce", "Appendix: manifest"):
        assert section in text
    # every figure: in the HTML as inline SVG, in the PDF by its caption and the plot's own title
    figures = re.findall(r'<figure class="plot" id="fig-([^"]+)">', html)
    assert html.count("<svg") == len(figures) >= len(keys)
    for key in keys:
        assert any(f.endswith("-" + key) for f in figures), (key, figures)
    for n in range(1, len(figures) + 1):
        assert f"Figure {n}." in text
    drawn = figure_text(pdf)
    assert "bus bandwidth" in drawn and "busbw (GB/s)" in drawn  # the all-reduce plot's axis label
    assert "kit reproduce " + b.name in text.replace("\n", " ")
    # the manifest appendix lists the bundle's files with their hashes, but not the report
    assert "results.json" in text and "report.pdf" not in re.findall(r"^\s*(\S+)", text, re.M)
    assert not re.search(r"\bnan\b|\bNone\b|Undefined", text)
    # the report review, 9: the colophon's page holds the manifest's last 8 rows (or all of
    # it), never one row and the colophon alone
    assert_manifest_ends_with_its_colophon(text)


MANIFEST_ROW = re.compile(r"^\s*\S+\s+\d+\s+[0-9a-f]{64}\s*$", re.M)


def assert_manifest_ends_with_its_colophon(text: str) -> None:
    """The report review, 9: the colophon's page holds the manifest's last 8 rows (or all of
    it), never one to three rows and the colophon alone."""
    (last,) = [page for page in text.split("\f") if re.search(r"^Rendered on \d{4}-", page, re.M)]
    assert len(MANIFEST_ROW.findall(last)) >= min(8, len(MANIFEST_ROW.findall(text))) > 0


def test_the_colophons_page_holds_the_manifests_last_rows(tmp_path):
    """The 2x H200 container all-reduce bundle's manifest broke with three rows and the colophon
    on its last page (the report review, 9: a near-empty page)."""
    b = tmp_path / "allreduce"
    shutil.copytree(ROOT / "reports" / "examples" / "h200x2-allreduce-container", b)
    render_bundle(Bundle.load(b))
    assert_manifest_ends_with_its_colophon(pdf_text(b / "report.pdf"))


def test_failed_runs_show_as_failed_never_as_numbers(once):
    b = once("synthetic-failures")
    html = (b / "report.html").read_text()
    parser = Cells()
    parser.feed(html)
    failed_rows = [t for c, t in parser.rows if "failed-row" in c]
    assert len(failed_rows) == 4  # the appendix: one row per run that did not finish
    for row in failed_rows:
        metrics = row.split("failed: no numbers", 1)
        assert len(metrics) == 2, row
        assert "busbw" not in row and "throughput" not in row
    text = pdf_text(b / "report.pdf")
    # page 1 (its figures run onto page 2): the failed variant's cell says failed, 0 of 3 runs
    first = "\n".join(text.split("\f")[:2])
    assert re.search(
        r"all-reduce: no comparison of p2p and no-p2p: every run of no-p2p\s+failed", first
    )
    # page 1's all-reduce summary: the failed variant's cell says failed, 0 of 3 runs
    assert re.search(r"no-p2p\s+failed \(0 of 3\s+runs\)", first), first
    assert "failed: none of 3 runs finished" in text
    assert "FAILED, no line: no-p2p" in figure_text(b / "report.pdf")  # inside the all-reduce plots
    assert "timeout" in text and "CUDA out of memory" in text


@pytest.mark.skipif(not H200.is_dir(), reason="the real 2x H200 example bundle is not here")
def test_real_h200_bundle_proves_the_transport(once):
    text = pdf_text(once("h200") / "report.pdf")
    first = "\n".join(text.split("\f")[:2])  # page 1, whose workload notes run onto page 2
    assert "2x NVIDIA H200, NV18" in first
    # two repeats: a screening, so the P2P ratio is no finding, and never called a 95% CI
    flat = " ".join(first.split())
    assert "2 runs a side is a screening, not a finding" in flat, flat
    assert "Peer-to-peer makes" not in flat
    assert "95% CI" not in text
    assert re.search(r"\d+% of the NVLink raw rate", flat) and "18 NVLink links x 25 GB/s" in flat
    assert "p2p: P2P/CUMEM; no-p2p: SHM" in " ".join(text.split())
    assert "the NCCL transport contradicts" not in text


LLAMA = ROOT / "reports" / "examples" / "h200x2-fsdp-llama"


@pytest.mark.skipif(not LLAMA.is_dir(), reason="the Llama example bundle is not here")
def test_llama_first_page_is_the_buyers_summary(tmp_path):
    """Page 1 of the committed 2x H200 Llama bundle: per GPU, J/token (GPU board power), MFU with
    its peak, the reference with its source, power capping sized, the variants defined."""
    from kit.report.facts.efficiency import energy_per_unit

    b = tmp_path / "llama"
    shutil.copytree(LLAMA, b)
    render_bundle(Bundle.load(b))
    pages = pdf_text(b / "report.pdf").split("\f")
    first = " ".join(pages[0].split())
    # page 1 leads with the machine (identity, as-ordered checklist, reference chart, P2P
    # verdict); each workload's figures and notes follow on it and run onto page 2
    both = first + " " + " ".join(pages[1].split())
    # page 1 answers how fast per GPU, how sure, against which published machine and whether
    # it passes; the variants' definitions and the trust facts follow on page 2
    second = " ".join(pages[1].split())
    bundle = Bundle.load(b)
    hw = bundle.read_typed("hardware.json")
    p2p = [r for r in load_bundle(b).results.runs if r.variant == "p2p"]
    # the runs sat at the 700 W cap: the headline is the whole window's throughput
    tput = sorted(r.metrics["throughput_window"].value for r in p2p)[1]
    joules = sorted(energy_per_unit(r, hw).j_per_unit for r in p2p)[1]
    assert f"{tput / 2:,.0f} tokens/s" in both  # per GPU
    assert (
        f"{joules:#.3g} J/token".replace(". J", " J") in both
        and "GPU board power sampled every ~0.25 s" in both
    )
    assert "recorded no energy counter" in both  # recorded before the counter was read
    assert "MFU, bf16" in both and "989 TFLOP/s bf16 dense per GPU" in both
    assert "source: plain FSDP2 loop" in both
    assert "power-limited: 100% of the window's power readings within 5% of the 700 W cap" in both
    assert "SwPowerCap clock reason in 48% of its samples" in both  # no-p2p: not "0% at the cap"
    assert "clears the threshold 12,807 tokens/s" in both
    # the reference is a median step: judged on the median step, never on the whole window
    assert (
        "Acceptance against the recipe's throughput 14,230 tokens/s less 10%, measured on 2x H200"
        in both
    )
    assert (
        "judged on the median step, as the reference was measured; the figure above is the whole timed window"
        in both
    )
    steps = [r.metrics["throughput"].value for r in p2p]
    s = summarize(steps)
    assert f"{s.ci_low:,.0f} to {s.ci_high:,.0f} tokens/s" in both
    # published figures are not page 1's: it says where they are and that none compares
    assert "llama-8b-lora, throughput over the whole window: PASS against 14,230" not in first
    assert "llama-8b-lora, throughput: PASS against 14,230 tokens/s less 10% (2x H200)" in first
    assert "Published figures for this workload (1, none measured by kit)" in both
    assert "none measured under the same conditions as this run, so no ratio is given" in both
    assert "Llama 3.1 8B pretraining" not in both
    every = " ".join(" ".join(pages).split())
    assert "Llama 3.1 8B pretraining" in every and "(no ratio: 8 GPUs there, 2 here" in every
    # is this the machine ordered: identity and the checklist, each line with its evidence
    assert "Is this the machine ordered?" in first
    assert "GPUs 2x NVIDIA H200 (H200 SXM in kit's datasheet table)" in first
    assert "power limit 700 W (default 700 W)" in first and "GPU-599acda9" in first
    assert "NVLinks up yes 18 of 18 (H200 SXM datasheet) on every GPU" in first
    assert "ECC on, no uncorrected errors yes enabled on every GPU, 0 uncorrected" in first
    assert "Interconnect: peer-to-peer on against off" in first
    # one chart of every workload against its same-model reference, with whiskers and n
    assert (
        "Each workload as a factor of its same-model reference: the median, the whiskers" in first
    )
    html = (b / "report.html").read_text()
    at = html.index("Against the same-model reference")
    assert html.index("<svg", at) < html.index("Interconnect: peer-to-peer", at)
    assert "inside this one session" in both and "SwPowerCap: NVML's clock reason" in both
    assert "SM clock" in both and "against 1,980 max" in both
    assert "traffic is staged through host shared memory" in second and "lower bound" in second
    assert "NCCL_NVLS_ENABLE=0" in second and "P2P/CUMEM" in both and "SHM" in both
    assert "preflight passed" in second and "ECC on" in second and "VBIOS 96.00" in second
    assert "geometric mean" in both and "13,992" in both  # the interval's centre, wrapped
    assert "95% CI 1.33 to 1.38; t-interval, n=3" in first
    assert "micro batch 1" in both and "cost per 1M" not in both
    assert "not divided per GPU" not in both  # tokens/s is divided per GPU instead
    # Reproduce stays on one page: its last 3 lines made a near-empty page before the appendix
    (repro,) = [p for p in pages if "Rerun exactly this bundle's recipe" in p]
    assert "The command line that first made this bundle" in repro


@pytest.mark.skipif(not LLAMA.is_dir(), reason="the Llama example bundle is not here")
def test_a_price_adds_cost_per_million(tmp_path, monkeypatch):
    monkeypatch.setenv("KIT_PDF", "0")  # the page's words are read, not its PDF
    b = tmp_path / "llama"
    shutil.copytree(LLAMA, b)
    render_bundle(Bundle.load(b), price_per_gpu_hour=parse_price("2.50USD", "list price, 2026"))
    html = (b / "report.html").read_text()
    assert "cost per 1M (USD)" in html
    assert "at 2.5 USD per GPU-hour, source: list price, 2026" in html
    render_bundle(Bundle.load(b), price_per_gpu_hour=2.5)  # a bare number: said to lack both
    html = (b / "report.html").read_text()
    assert "cost per 1M (currency units)" in html and "(currency not given)" in html
    assert "source: not given (--price-source)" in html


def test_method_page_defines_the_headline_as_the_median_step_time(once):
    text = " ".join(pdf_text(once("synthetic-2gpu") / "report.pdf").split())
    assert "divided by the median step time of the timed window" in text
    assert "work per second over the measured steps" not in text  # the old, wrong definition
    assert not re.search(r"peak\.Weights|\.[A-Z][a-z]+: random", text)  # no glued sentences


def test_cpu_bundle_says_smoke_and_cpu(once):
    text = pdf_text(once("cpu-smoke") / "report.pdf")
    assert "smoke scale" in text and "ran on the CPU (gloo)" in text
    assert "No GPU" in text and "host environment, not pinned" in text
    # the recipe's environment (an image's) is not what the host runtime ran: not named there
    assert "host environment, not pinned)" in text


def test_rendering_is_deterministic(tmp_path, once, monkeypatch):
    a = once("synthetic-2gpu")  # with its PDF: the other tests read it
    monkeypatch.setenv("KIT_PDF", "0")  # the second rendering's page is compared, not a PDF
    b = rendered(tmp_path / "b", "synthetic-2gpu")
    assert (a / "report.html").read_bytes() == (b / "report.html").read_bytes()


class _Counter(http.server.BaseHTTPRequestHandler):
    hits: ClassVar[list[str]] = []

    def do_GET(self):
        _Counter.hits.append(self.path)
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def web():
    """A local web server that counts requests: the report must make none."""
    _Counter.hits = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Counter)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", _Counter.hits
    server.shutdown()


def test_hostile_strings_are_escaped_and_nothing_is_fetched(tmp_path, web):
    url, hits = web
    b = tmp_path / "b"
    shutil.copytree(FIXTURES / "cpu-smoke", b)
    evil = (
        f'<img src="{url}/img.png"><script>alert(1)</script>'
        f'<link rel=stylesheet href="{url}/x.css"><style>@import url({url}/y.css);</style>'
    )
    recipe = (b / "recipe.yaml").read_text()
    import yaml

    data = yaml.safe_load(recipe)
    data["description"] = evil
    (b / "recipe.yaml").write_text(yaml.safe_dump(data))
    results = (
        (b / "results.json")
        .read_text()
        .replace('"command": "kit reproduce', f'"command": "{evil.replace(chr(34), "")} kit')
    )
    (b / "results.json").write_text(results)
    render_bundle(Bundle.load(b))
    html = (b / "report.html").read_text()
    assert "<script>alert" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<img src=" not in html and "<link" not in html
    fetcher = offline_fetcher()
    write_pdf(html, tmp_path / "x.pdf", fetcher)
    assert fetcher.refused == []
    # Chromium opens the page offline (it exists only where CI installs it)
    if shutil.which("chromium"):
        dom, _ = chromium(b / "report.html", tmp_path)
        assert "Is this the machine ordered?" in dom
    assert hits == []


def test_the_pdf_fetcher_refuses_the_network(tmp_path, web):
    """The control for the test above: raw HTML that asks for resources gets none of them."""
    url, hits = web
    fetcher = offline_fetcher()
    write_pdf(
        f'<link rel=stylesheet href="{url}/x.css"><img src="{url}/a.png">'
        '<img src="file:///etc/passwd"><p>x</p>',
        tmp_path / "x.pdf",
        fetcher,
    )
    assert f"{url}/x.css" in fetcher.refused and f"{url}/a.png" in fetcher.refused
    assert "file:///etc/passwd" in fetcher.refused
    assert hits == []


def chromium(page: Path, tmp: Path) -> tuple[str, str]:
    proc = subprocess.run(
        [
            "chromium",
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            f"--user-data-dir={tmp / 'chromium-profile'}",
            "--enable-logging=stderr",
            "--v=0",
            "--dump-dom",
            page.resolve().as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    console = [ln for ln in proc.stderr.splitlines() if ":CONSOLE" in ln]
    return proc.stdout, "\n".join(console)


@pytest.mark.skipif(
    not shutil.which("chromium"),
    reason="needs chromium: apt-get install chromium",
)
def test_html_opens_in_headless_chromium(tmp_path, once):
    bad = tmp_path / "bad.html"
    bad.write_text("<html><body><script>undefined_function()</script></body></html>")
    _, console = chromium(bad, tmp_path)
    assert "Uncaught" in console  # the check below would see an error
    b = once("synthetic-failures")
    dom, console = chromium(b / "report.html", tmp_path)
    assert console == "", console
    assert dom.count("<svg") == dom.count('<figure class="plot"') >= 5
    # one of its runs failed, so the browser shows the withheld verdict, not a ratio
    assert re.search(r"Llama-3.1-8B LoRA FSDP, [^:<]+: verdict withheld", dom)
    assert "Peer-to-peer makes Llama-3.1-8B LoRA FSDP" not in dom


def test_kit_report_cli_rerenders_and_reseals(tmp_path):
    b = tmp_path / "b"
    shutil.copytree(FIXTURES / "synthetic-2gpu", b)
    write_manifest(b)
    proc = run_kit("report", str(b))
    assert proc.returncode == 0, proc.stderr
    assert (b / "report.pdf").stat().st_size > 10_000
    assert verify_manifest(b).ok
    # it says both files it wrote (it named the page alone)
    assert proc.stdout.split() == [str(b / "report.html"), str(b / "report.pdf")]
    # KIT_PDF=0: the page alone; the earlier PDF, which no longer matches it, is not resealed
    proc = run_kit("report", str(b), env={**os.environ, "KIT_PDF": "0"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [str(b / "report.html")]
    assert not (b / "report.pdf").exists() and verify_manifest(b).ok


class StackTables(HTMLParser):
    """For every <table class="... stack">: its header texts and, per body row, each cell's
    data-label (None where a cell has none)."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[dict[str, list]] = []
        self._in: dict[str, list] | None = None
        self._th: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "table" and "stack" in (a.get("class") or "").split():
            self._in = {"heads": [], "rows": []}
            self.tables.append(self._in)
        elif self._in is not None and tag == "th":
            self._th = []
        elif self._in is not None and tag == "tr":
            self._in["rows"].append([])
        elif self._in is not None and tag == "td":
            self._in["rows"][-1].append(a.get("data-label"))

    def handle_data(self, data):
        if self._th is not None:
            self._th.append(data)

    def handle_endtag(self, tag):
        if tag == "th" and self._in is not None and self._th is not None:
            self._in["heads"].append("".join(self._th).strip())
            self._th = None
        elif tag == "table":
            self._in = None


@pytest.mark.parametrize("name", ["h200", "synthetic-failures"])
def test_page_one_tables_name_every_cell_for_phones(once, name):
    """At phone width page 1's tables become one card per row and each cell shows its column's
    name (data-label): every cell but the first must carry exactly its header's text."""
    parser = StackTables()
    parser.feed((once(name) / "report.html").read_text())
    assert parser.tables, "page 1 has no stacked table"
    for table in parser.tables:
        rows = [r for r in table["rows"] if r]
        assert rows
        for cells in rows:
            assert len(cells) == len(table["heads"]), table
            assert cells[1:] == table["heads"][1:], (cells, table["heads"])


ALLREDUCE_EXAMPLE = ROOT / "reports" / "examples" / "h200x2-allreduce"


@pytest.mark.skipif(not ALLREDUCE_EXAMPLE.is_dir(), reason="the all-reduce example is not here")
def test_kit_report_against_puts_the_acceptance_verdict_on_page_1(tmp_path):
    b = tmp_path / "allreduce"
    shutil.copytree(ALLREDUCE_EXAMPLE, b)
    alone = run_kit("report", str(b), "--tolerance", "0.05")
    assert alone.returncode == 2 and "--tolerance applies to --against" in alone.stderr
    bare = run_kit("report", str(b), "--judge-anyway")
    assert bare.returncode == 2 and "--judge-anyway applies to --against" in bare.stderr
    proc = run_kit("report", str(b), "--against", "azure-ndh200v5-allreduce-floor")
    assert proc.returncode == 0, proc.stderr
    first = " ".join(pdf_text(b / "report.pdf").split("\f")[0].split())
    # an 8-GPU NVLS floor does not apply to 2 GPUs with NVLS off: neither pass nor fail
    assert "Acceptance: NOT COMPARABLE against Azure ND H200 v5 acceptance floor" in first
    # busbw is not divided per GPU: the table says why, where that column would be (a bus
    # rate, not a per-GPU one); the "as ordered" checklist comes first, so it runs onto page 2
    two = " ".join(" ".join(pdf_text(b / "report.pdf").split("\f")[:2]).split())
    assert "not divided per GPU" in two and "busbw is a bus rate" in two  # the cell wraps
    # page 1 runs over a page here: the intervals' scope sits under the verdict, on page 1
    assert "Every interval on this page covers repeat-to-repeat noise inside this one" in first
    cells = " ".join((b / "report.html").read_text().split())
    assert (
        '<td class="already" data-label="per GPU"><span class="ci">not divided per GPU: busbw '
        "is a bus rate (nccl-tests&#39; algbw x 2(n-1)/n)</span></td>"
    ) in cells
    assert (
        "is no reference for this run: 8 GPUs there, 2 here; NVLink SHARP (NVLS) on there" in first
    )
    assert "threshold 431" not in first
    anyway = run_kit(
        "report", str(b), "--against", "azure-ndh200v5-allreduce-floor", "--judge-anyway"
    )
    assert anyway.returncode == 0, anyway.stderr
    judged = " ".join(pdf_text(b / "report.pdf").split("\f")[0].split())
    assert "Acceptance: FAIL against Azure ND H200 v5 acceptance floor" in judged
    assert "judged despite: 8 GPUs there, 2 here" in judged
    assert "does not reach the threshold 431 GB/s" in judged
    # the benchmark's own block points at that verdict instead of saying there is none
    assert "No acceptance reference" not in first
    assert "its acceptance is the one above, against Azure ND H200 v5" in two
    assert run_kit("verify", str(b)).returncode == 0  # the re-rendered report is re-sealed
    # the published-figure section says how this machine's GPUs meet from its recorded topology
    # (its Hardware page: NV18, links to NVSwitch), never "without NVSwitch"
    text = " ".join(pdf_text(b / "report.pdf").split())
    assert "recorded topology (Hardware section): the GPUs meet through NVSwitch" in text
    assert "without NVSwitch joins" not in text and "NV18" in text


H100 = ROOT / "reports" / "measurements"
H100_SILICON = H100 / "2026-11-23-h100x1-silicon-vs-nvbandwidth" / "bundle"  # real 1x H100 runs
H100_ENERGY = H100 / "2026-11-24-h100x1-energy-counter-and-window" / "bundle"


def text_past_right_margin(path: Path, margin_pt: float = 14 / 25.4 * 72) -> list[str]:
    """Strings that run right of the page's content box (the CSS margin is 14 mm): a table
    too wide for the page, drawn into the margin or off the paper. Where each string ends is
    read through pypdf's layout-mode text operations (it knows the glyph widths); a pypdf
    without them leaves only where each string starts to be checked."""
    out: list[str] = []
    reader = PdfReader(path)
    for page in reader.pages:
        edge = float(page.mediabox.width) - margin_pt
        ends = _text_ends(reader, page)
        if ends is not None:  # layout mode leaves out the page's translation by its left
            # margin (14 mm, as the right): a run it ends at 545 pt ends at 585 pt on paper
            out.extend(text for text, end in ends if text.strip() and end + margin_pt > edge + 1)
            continue

        def visit(text, cm, tm, _font, _size, edge=edge):
            if text.strip() and cm[0] * tm[4] + cm[2] * tm[5] + cm[4] > edge + 1:
                out.append(text.strip())

        page.extract_text(visitor_text=visit)
    return out


def _text_ends(reader: PdfReader, page) -> list[tuple[str, float]] | None:  # type: ignore[no-untyped-def]
    """(text, x where it ends) of every text run on the page, or None where this pypdf has no
    layout-mode internals to read it with."""
    try:
        from pypdf._text_extraction import _layout_mode
        from pypdf.generic import ContentStream

        ops = iter(ContentStream(page["/Contents"].get_object(), reader, "bytes").operations)
        groups = _layout_mode.text_show_operations(ops, page._layout_mode_fonts(), True, None)
    except (ImportError, AttributeError, TypeError):
        return None
    return [(g["text"], g["displaced_tx"]) for g in groups]


def test_real_h100_silicon_bundle_fits_the_page_and_says_what_ran(tmp_path):
    """The 1x H100 silicon bundle: its seven-column silicon tables stay on the page, page 1
    names what ran (not "parameters not recorded"), and a one-process run raises no caution
    about NCCL connection lines (there is no peer to connect to)."""
    dst = tmp_path / "silicon"
    shutil.copytree(H100_SILICON, dst)
    render_bundle(Bundle.load(dst))
    pdf = dst / "report.pdf"
    assert text_past_right_margin(pdf) == []
    text = " ".join(pdf_text(pdf).split())
    assert "copy bandwidth: 512 MiB copies on 1 GPU;" in text
    assert "matmul ceiling: bf16/fp16/tf32/fp8 on 1 GPU." in text
    assert "parameters not recorded" not in text
    assert "HBM datasheet" in text and "3,350 GB/s" in text
    assert "NCCL transport was not recorded" not in text
    assert "1 repeat per variant" in text and "Every benchmark ran once per variant" in text


H100_ACCEPTANCE = ROOT / "reports" / "examples" / "h100x1-acceptance-container"


@pytest.mark.skipif(not H100_ACCEPTANCE.is_dir(), reason="the H100 acceptance example is not here")
def test_the_table_of_every_gpu_stays_on_the_page(tmp_path):
    """A reader of the one-H100 acceptance report: its per-GPU table ran off the page's right
    edge ("against the model's referenc", the verdicts' words cut), its headers kept on one
    line each and its repeats unbroken. Its GPU's UUID wraps only after a hyphen: the narrow
    first column broke it mid-hex ("GPU-a72df94a-d5b6-dbf8-db64-2a52b", "538ecb3")."""
    dst = tmp_path / "acceptance"
    shutil.copytree(H100_ACCEPTANCE, dst)
    render_bundle(Bundle.load(dst))
    assert text_past_right_margin(dst / "report.pdf") == []
    pdf = dst / "report.pdf"
    text = "\n".join(_page_texts(str(pdf), _written(pdf), False))  # a cell's lines stay together
    uuids = [g["uuid"] for g in json.loads((dst / "hardware.json").read_text())["gpus"]]
    for uuid in uuids:
        # the UUID as printed anywhere, a line break allowed between any two of its characters
        wrapped = [m.group() for m in re.finditer(r"\s*".join(map(re.escape, uuid)), text)]
        assert len(wrapped) >= 2, uuid  # page 1's identity line and the per-GPU table
        for found in wrapped:
            pieces = found.split()
            assert all(piece.endswith("-") for piece in pieces[:-1]), found
    # its three matmul repeats found different best shapes (near-equal ones trade places): the
    # table named the first run's alone beside the median of all three, page 1 "several"
    flat = " ".join(text.split())
    bf16 = "8192x4096x16384 in 2 of 3 runs, 4096x4096x8192 in 1"
    assert f"shape 4096x4096x16384 there, not the same in every repeat ({bf16}) here" in flat
    assert f"bf16 {bf16}" in flat  # the silicon table's best-shape cell
    # the buyer's reading, 2026-12-03: one GPU has no others to be "within half a percent" of,
    # and the note under the ceilings cited bf16's datasheet figure alone beside fp8's share
    assert "Each figure is the median of 3 repeats (every repeat counts). Clocks:" in flat
    assert "half a percent" not in flat and "Weakest pair" not in flat
    assert "H100 SXM fp8 dense 1,979 TFLOP/s" in flat
    assert "several" not in flat


def test_real_h100_energy_bundle_method_covers_both_windows(tmp_path):
    """One method paragraph covers a 2 s and a 30 s benchmark of the same workload: it must
    hold for both, not only for the first (which set no minimum window)."""
    dst = tmp_path / "energy"
    shutil.copytree(H100_ENERGY, dst)
    render_bundle(Bundle.load(dst))
    text = " ".join(pdf_text(dst / "report.pdf").split())
    assert "Timed window: 2.0 to 30.1 s (at least 30 steps and at least 30 s" in text
    assert "This bundle set no minimum window" not in text
    assert "35 or 464 or 465 steps in all" in text
    # its variant "one-gpu" is one word in every table (it wrapped as "one-" / "gpu")
    lines = pdf_text(dst / "report.pdf").splitlines()
    assert not [line for line in lines if line.rstrip().endswith(" one-")]
    assert sum(" one-gpu " in line for line in lines) >= 8


H100_CONTAINER = H100 / "2026-11-23-h100x1-containers" / "docker-same-call"


def test_real_h100_one_gpu_all_reduce_is_not_placed_against_published_machines(once):
    """On one GPU an all-reduce's bus bandwidth is 0 by definition: page 1 says so instead of
    printing '0.00x' against published 8-GPU machines; the container run, built FROM a local
    base, says it was not pinned."""
    dst = once("h100-container")
    text = " ".join(pdf_text(dst / "report.pdf").split())
    assert "On one GPU a collective moves no data between GPUs" in text
    assert "0.00x its figure" not in text
    assert "0% of the PCIe raw rate" not in text  # no link crossed: no share of a link's peak
    # one GPU: no NVLink peer, so no link is expected up (was "NVLinks up NO 0 of 18")
    assert (
        "NVLinks up not applicable 0 of 18 (H100 SXM datasheet): one GPU in this machine, no peer"
        in text
    )
    # built FROM kit-host-stack:local, an imported stack: never called pinned (issue 49)
    assert (
        "docker runtime (in a docker container, image not pinned: local base image, not by digest"
        in text
    )
    assert "gpu_request cdi" in text and "from an unpinned image" in text
    # the environment's name beside those words does not say them again
    assert "environment ngc-pytorch FROM kit-host-stack:local)" in text
    assert "FROM kit-host-stack:local (local base image" not in text
    assert "container, pinned image" not in text and "from a pinned image" not in text
    # its environment.json, written before the rule, recorded pinned: true; the Fingerprint
    # table shows that beside the rule's reading, never a bare "pinned True"
    assert (
        "pinned True as recorded; by the rule this report applies: not pinned (local base" in text
    )


def test_energy_per_unit_keeps_three_significant_figures(once):
    """0.1003 J/token prints as 0.100, not 0.1 (the other figures beside it carry three)."""
    dst = once("h100-container")
    text = " ".join(pdf_text(dst / "report.pdf").split())
    assert "0.100 J/token" in text and "0.1 J/token" not in text


def test_the_sizes_table_names_each_placement_and_times_both_where_torch_has_both(
    cpu_collectives_bundle, tmp_path
):
    """A real CPU run of an all-gather and an all-reduce sweep (the suite's shared collectives
    bundle, its PDF made here): the all-gather table has nccl-tests' two column groups
    (out-of-place, then in-place, each with its #wrong) and fits the page; the all-reduce is
    labelled in-place, with why no out-of-place form is timed."""
    b = copy_bundle(cpu_collectives_bundle, tmp_path / "b")
    proc = run_kit("report", str(b))
    assert proc.returncode == 0, proc.stderr[-2000:]
    html = (tmp_path / "b" / "report.html").read_text()
    assert (
        '<th colspan="2">float32, sum</th><th colspan="4">out-of-place</th>'
        '<th colspan="4">in-place</th>' in html
    )
    assert '<th colspan="4"></th><th colspan="4">in-place</th>' in html  # the all-reduce
    text = " ".join(pdf_text(tmp_path / "b" / "report.pdf").split())
    placement = "all_gather_single (all_gather_into_tensor on a torch without it) gathers"
    assert f"Timed out-of-place: {placement} a separate send buffer" in text
    assert "The second group of columns: the in-place form" in text
    assert "Timed in-place: torch's dist.all_reduce reduces its one buffer in place" in text
    assert "torch has no out-of-place all-reduce" in text
    assert "does not time in-place" not in text
    # what the columns and "timed by" mean comes before the tables it explains (it stood after
    # the last one: on the H100 pair's report, alone on a page)
    for part in text.split("By message size, as nccl-tests prints it")[1:]:
        assert re.match(r" Timed (in|out-of)-place:", part), part[:300]
    assert text_past_right_margin(tmp_path / "b" / "report.pdf") == []


def as_model(src: Path, dst: Path, name: str) -> Path:
    """A copy of a real bundle whose hardware.json names another GPU model, resealed: the same
    runs, as if measured on that model."""
    import json

    shutil.copytree(src, dst)
    hw = json.loads((dst / "hardware.json").read_text())
    for g in hw["gpus"]:
        g["name"] = name
    (dst / "hardware.json").write_text(json.dumps(hw, indent=1))
    # the workers' record of their GPU too: the loader refuses runs of a model hardware.json
    # does not list (kit.model.consistency.check_hardware)
    for path in [dst / "results.json", *dst.glob("runs/*/result.json")]:
        data = json.loads(path.read_text())
        for run in data.get("runs", [data]):
            if run.get("versions", {}).get("gpu"):
                run["versions"]["gpu"] = name
        path.write_text(json.dumps(data, indent=1))
    for sig in dst.glob("MANIFEST.sha256.sig"):
        sig.unlink()
    write_manifest(dst)
    return dst


@pytest.mark.skipif(not LLAMA.is_dir(), reason="the Llama example bundle is not here")
def test_a_reference_of_another_model_gives_no_verdict_on_page_1(tmp_path):
    """One rule for every reference: the recipe's 2x H200 figure judges no 2x H100 run; page 1
    says there is no reference for this model, and `kit accept` against a 2x H200 bundle is
    NOT COMPARABLE (exit 4), naming the model."""
    b = as_model(LLAMA, tmp_path / "h100", "NVIDIA H100 80GB HBM3")
    render_bundle(Bundle.load(b))
    first = " ".join(pdf_text(b / "report.pdf").split("\f")[0].split())
    assert (
        "llama-8b-lora, throughput: no reference for this model: the recipe's figure was "
        "measured on 2x H200, this run on 2x NVIDIA H100 80GB HBM3; no verdict." in first
    )
    first = " ".join(" ".join(pdf_text(b / "report.pdf").split("\f")[:2]).split())
    assert "No reference for this model: the recipe's throughput 14,230 tokens/s" in first
    # the bundle's recipe predates gpu_model: its source's "2x H200" names the model and count
    assert "was measured on 2x H200; these runs ran on 2x NVIDIA H100 80GB HBM3" in first
    assert "H200 there, NVIDIA H100 80GB HBM3 here" in first and "no verdict" in first
    assert "clears the threshold" not in first and "straddles" not in first
    assert "No reference for this model and GPU count ships with the recipe" in first
    assert "Each workload as a factor of its same-model reference" not in first
    sealed = as_model(LLAMA, tmp_path / "h100-sealed", "NVIDIA H100 80GB HBM3")  # unrendered
    proc = run_kit("accept", str(sealed), "--against", str(LLAMA))
    assert proc.returncode == 4, proc.stderr
    assert (
        "NOT COMPARABLE" in proc.stdout
        and "NVIDIA H200 there, NVIDIA H100 80GB HBM3 here" in proc.stdout
    )


RESNET = ROOT / "reports" / "examples" / "h200x2-resnet-ddp"


def one_run_a_side(src: Path, dst: Path) -> Path:
    """A copy of a real bundle keeping only each variant's first repeat, as a `--repeats 1`
    run would have recorded it; resealed."""
    import json

    shutil.copytree(src, dst)
    doc = json.loads((dst / "results.json").read_text())
    doc["runs"] = [r for r in doc["runs"] if r["repeat"] == 0]
    doc["repeats"], doc["planned_runs"] = 1, len(doc["runs"])
    (dst / "results.json").write_text(json.dumps(doc, indent=1))
    recipe = (dst / "recipe.yaml").read_text()
    (dst / "recipe.yaml").write_text(re.sub(r"(?m)^repeats: \d+$", "repeats: 1", recipe))
    write_manifest(dst)
    return dst


@pytest.mark.skipif(not RESNET.is_dir(), reason="the ResNet example bundle is not here")
def test_one_run_a_side_is_a_screening_and_no_finding(tmp_path, monkeypatch):
    """Issue 34 item 4: page 1 of a one-repeat bundle says it is a screening, not an
    acceptance, and states no P2P finding from one run a side."""
    b = one_run_a_side(RESNET, tmp_path / "one")
    render_bundle(Bundle.load(b))
    first = " ".join(pdf_text(b / "report.pdf").split("\f")[0].split())
    assert "Evidence: Screening: 1 finished run per variant at the fewest" in first
    assert "not an acceptance" in first
    assert "one run a side is a screening, not a finding" in first
    assert "Peer-to-peer makes" not in first and "x faster" not in first
    assert "spread is within" not in first
    # the two-repeat original: still a screening (fewer than 3), said the same way (its page's
    # words are the PDF's, read above for the one-run copy: the HTML alone, a render saved)
    monkeypatch.setenv("KIT_PDF", "0")
    full = render_bundle(Bundle.load(shutil.copytree(RESNET, tmp_path / "full")))
    text = " ".join(re.sub(r"<[^>]+>", "", full.read_text()).split())
    assert "Evidence: Screening: 2 finished runs per variant" in text


def test_a_decode_reports_page_1_holds_its_decode_figures(tmp_path):
    """2x H200, decode-tp2 in the kit's Docker container (2026-11-29): page 1 ended at the P2P verdicts
    and the decode table, ten columns of the catalog's full words, went whole to page 2. Page 1
    holds both variants' batch-1 time per token (with its p90), tokens/s and HBM share now."""
    dst = tmp_path / "decode"
    shutil.copytree(ROOT / "reports" / "examples" / "h200x2-decode-tp2-container", dst)
    render_bundle(Bundle.load(dst))
    first = " ".join(figure_text(dst / "report.pdf").split("\f")[0].split())
    assert "LLM decode variant" in first
    for variant, tpot, p90 in (
        ("p2p", "3.14 ms", "p90 3.146 ms"),
        ("no-p2p", "3.404 ms", "p90 3.414 ms"),
    ):
        assert f"{variant} 3 of 3 runs" in first and tpot in first and p90 in first
    assert "50.0%" in first and "46.2%" in first  # batch-1 reads against the datasheet HBM
    # the benchmark's section points at its first figure by the page it landed on (it said
    # "page 1" while the figure had flowed to page 2)
    pages = [" ".join(p.split()) for p in figure_text(dst / "report.pdf").split("\f")]
    at = next(i for i, t in enumerate(pages) if "Figure 1. LLM decode: decode throughput" in t)
    # "under this benchmark's table" alone read as the section's own table (a buyer's reading)
    pointer = re.search(
        r"Figure 1 \(LLM decode: [^)]*\) is on page (\d+), in the summary, under this "
        r"benchmark's table there",
        " ".join(pages),
    )
    assert pointer and int(pointer.group(1)) == at + 1, (pointer, at)
    html = (dst / "report.html").read_text()
    assert "in the summary</a>, under this benchmark's table there" in html


DECODE_COPY = ROOT / "reports" / "examples" / "h200x2-decode-dp-copy-container"


@pytest.mark.skipif(not DECODE_COPY.is_dir(), reason="the decode bundle with its copy is not here")
def test_a_decode_bundle_with_its_own_copy_shows_the_share_of_it_in_its_table(tmp_path):
    """Issue 47: a decode bundle that ran hbm-copy (2x H200, 2026-11-30, call c38) shows the
    batch-1 reads against the copy it measured in the decode table, under the datasheet's share,
    and the silicon section says the same share from the same definition (copy_share); the
    share's interval is printed in percent as its median is, never as a raw fraction."""
    dst = tmp_path / "decode"
    shutil.copytree(DECODE_COPY, dst)
    render_bundle(Bundle.load(dst))
    text = " ".join(" ".join(p.split()) for p in figure_text(dst / "report.pdf").split("\f"))
    # a percent sign follows its number in the median, the interval and the copy's share alike
    assert "73.9%" in text and "73.7 to 74.1%" in text and "0.737 to 0.741" not in text
    assert re.search(r"/ copy here 84\.1%", text), text[:3000]
    assert not re.search(r"\d %", text)
    assert (
        "reads memory at 3,546 GB/s per GPU, 84% of the 4,216 GB/s device-local copy traffic"
        in text
    )
    # a buyer's reading, 2026-12-03: the known-machines note named the copy's headline alone for
    # rows of both benchmarks, and called the decode rows' figure another than page 1's
    assert (
        "on each benchmark's headline (hbm-copy: device-local copy (weakest GPU); decode-dp: "
        "decode throughput (largest batch timed))" in text
    )
    assert "-0.0%" not in text  # a GPU at the others' median is "0.0%", unsigned
    assert "GPU pairs: not measured (the recipe set pairs: false)." in text  # no pair copies
    # figures numbered as a reader meets them: decode's in the summary on page 3 was Figure 3,
    # ahead of the copy section's Figures 1 and 2
    captions = [int(n) for n in re.findall(r"Figure (\d+)\. ", text)]
    assert captions == sorted(captions) == list(range(1, len(captions) + 1)), captions
    # decode's recorded window spans the whole batch sweep, warm-ups included: its power says so
    assert (
        "p2p power in the batch sweep (every batch size, its warm-up and CUDA-graph capture "
        "included), ~56.9 s:" in text
    )


@pytest.mark.slow
@pytest.mark.parametrize("name", ["h200x2-allreduce-container", "h200x2-decode-dp-copy-container"])
def test_the_widest_tables_of_real_bundles_stay_inside_the_margin(tmp_path, name):
    """A buyer measured the decode table's "P2P/CUMEM" at 585 pt on a page whose text ends at
    556 pt; the sizes tables with NCCL's algorithm column reached 564 pt and the per-GPU section
    578 pt. This check had passed them: pypdf's layout mode leaves out the page's translation by
    its left margin, which text_past_right_margin now adds."""
    dst = tmp_path / name
    shutil.copytree(ROOT / "reports" / "examples" / name, dst)
    render_bundle(Bundle.load(dst))
    assert text_past_right_margin(dst / "report.pdf") == []
