"""Render a bundle into report.html (one self-contained file) and report.pdf (WeasyPrint).

The renderer reads only the bundle's own files and fetches nothing: the stylesheet and the plots
are inlined, Jinja2 escapes every string from the bundle, and WeasyPrint gets a URL fetcher that
refuses everything but data: URIs (kit.report.pdf). A failed or missing run shows
as failed, never as a number.
"""

from __future__ import annotations

import functools
import io
import platform
import re
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape
from markupsafe import Markup, escape

from kit import __version__
from kit.bundle import Bundle
from kit.inventory import summary_line
from kit.io.safe import write_bytes, write_text
from kit.io.terminal import printed
from kit.model import BundleData, load_bundle
from kit.model.hardware import Hardware, Host
from kit.refs.nccl_tests import SAME_CALL_FLOOR, SAME_CALL_FROM
from kit.refs.store import standing
from kit.report import analysis, decode, plots, sections
from kit.report.analysis.box import judge_box
from kit.report.analysis.ordered import as_ordered, gpus_ran, identity, ran_of_box
from kit.report.analysis.verdicts import folded
from kit.report.bench_view import BenchView, bench_view
from kit.report.facts.order import Order
from kit.report.facts.price import Price, parse_price
from kit.report.figure import Figure, silicon_view
from kit.report.method import method_view
from kit.report.pdf import PdfNotWritten, pdf_wanted, write_pdf
from kit.report.plot_reference import against_reference, reference_rows
from kit.report.provenance import rendering
from kit.report.sections import (
    environment_view,
    hardware_view,
    manifest_view,
    nodes_view,
)
from kit.shared import files
from kit.shared import metrics as catalog

HERE = Path(__file__).parent
TEMPLATES = HERE / "templates"
STYLE = HERE / "style.css"


# --- formatting ----------------------------------------------------------------------------


fmt_num = plots.fmt_num


def display(value: float | None, unit: str) -> tuple[str, str]:
    """(number, unit) for a table: fractions as percent, with three significant digits under
    10% (9.61, 0.178) so that a spread is not printed away ("0.2 to 0.2" at a CV of 4%)."""
    if value is None:
        return "-", unit
    if unit == "fraction":
        pct = value * 100
        if pct == 0 or abs(pct) >= 10:
            return f"{pct:.1f}", "%"
        return (f"{pct:.2f}" if abs(pct) >= 1 else f"{pct:.3g}"), "%"
    return fmt_num(value), unit


def with_unit(value: float | None, unit: str, bold: bool = False) -> Markup:
    """A figure and its unit as the pages print them: "3,546 GB/s", "73.9%" (a percent sign
    follows its number, as the pages' sentences and intervals write it: "73.7 to 74.1%"); the
    number in bold where a table's cell leads with it."""
    number, shown = display(value, unit)
    lead = Markup("<b>{}</b>").format(number) if bold else escape(number)
    return lead + ("" if shown == "%" else " ") + escape(shown)


def when(iso: Any) -> str:
    """ "2026-11-20T12:00:05+00:00" -> "2026-11-20 12:00:05 UTC"; anything else as it is."""
    s = str(iso or "")
    if len(s) >= 19 and s[10] == "T":
        zone = s[19:]
        return f"{s[:10]} {s[11:19]}" + (" UTC" if zone in ("+00:00", "Z") else f" {zone}")
    return s or "-"


human_bytes = sections.human_bytes


def breakable(value: Any) -> Markup:
    """An identifier a narrow cell may wrap only after its hyphens and colons: a GPU UUID
    ("GPU-662caade-a079-...") or bus id, never mid-hex (line breaking allows no break between a
    hyphen and a digit, so the cell broke one anywhere). <wbr> leaves copied text unchanged."""
    return Markup(re.sub(r"([-:])", r"\1<wbr>", str(escape(printed(value)))))


@functools.cache
def jinja_env() -> Environment:
    """The templates, autoescaping on, with the number and size filters both documents use.
    One per process: each template is compiled once, not once per render. Every value a page
    prints passes kit.io.terminal.printed first: a control character from a bundle is written as
    an escape on a page too, as on the terminal."""
    env = Environment(
        loader=FileSystemLoader(TEMPLATES),
        autoescape=select_autoescape(["html", "j2"]),
        trim_blocks=True,
        lstrip_blocks=True,
        finalize=printed,
    )
    env.filters["num"] = fmt_num
    env.filters["bytes"] = human_bytes
    env.filters["breakable"] = breakable
    env.filters["pct"] = lambda x: "-" if x is None else f"{x * 100:.1f}%"
    env.globals["display"] = display
    env.globals["with_unit"] = with_unit
    env.globals["folded"] = folded
    env.globals["same_call_floor"] = SAME_CALL_FLOOR
    env.globals["same_call_from"] = SAME_CALL_FROM
    env.globals["interval_rule"] = Markup(catalog.interval_words())
    env.filters["when"] = when
    return env


# --- sections ------------------------------------------------------------------------------


def machine_line(hardware: Hardware) -> str:
    """The machine in one line: the inventory's summary_line for a full inventory."""

    if hardware.topology is not None:
        return summary_line(hardware)
    if hardware.summary:
        return hardware.summary
    if hardware.gpus:
        names: dict[str, int] = {}
        for g in hardware.gpus:
            names[g.name or "GPU"] = names.get(g.name or "GPU", 0) + 1
        return ", ".join(f"{n}x {name}" for name, n in names.items())
    host = hardware.host or Host()
    cores = host.logical_cpus or host.cpu_count
    system = str(host.os or "").split("-with-")[0]
    parts = [f"{cores} CPUs" if cores else None, host.cpu_model, system or None]
    return "No GPU: " + ", ".join(p for p in parts if p) if any(parts) else "No GPU recorded"


# --- rendering -----------------------------------------------------------------------------


def load(bundle: Bundle) -> BundleData:
    """The bundle through the typed loader: a malformed bundle is one InputError line."""
    return load_bundle(bundle.path)


def ran_lines(benches: list[analysis.Benchmark], smoke: bool) -> list[str]:
    """What ran, per benchmark, from the runs' own parameters (never the recipe's prose)."""
    return [f"{b.label}: {analysis.ran_line(b, smoke)}" for b in benches]


def context(
    bundle: Bundle, price_per_gpu_hour: Price | float | None = None, order: Order | None = None
) -> dict[str, Any]:
    """Everything the report's template reads, from the bundle read once."""
    data = load(bundle)
    results = data.results
    hardware = data.hardware or Hardware()  # none recorded: an inventory that knows nothing
    benches = analysis.build_benchmarks(results, data.recipe)
    views = [bench_view(b, i, data.nccl_tests) for i, b in enumerate(benches)]
    silicon = silicon_view(benches, hardware)
    number_figures([f for v in views for f in v.figures] + (silicon["figures"] if silicon else []))
    smoke = data.results.smoke
    expected = {b.name: [] if smoke else analysis.expectations(b, hardware) for b in benches}
    summaries = _summaries(views, hardware, silicon, price_per_gpu_hour, smoke)
    return {
        "results": results,
        "bundle_name": bundle.path.name,
        "machine": machine_line(hardware),
        "benches": views,
        "silicon": silicon,
        "summaries": summaries,
        "variant_defs": analysis.variant_defs(summaries),
        "variant_subsets": analysis.variant_subsets(data.recipe, benches),
        "first_figures": {v.bench.name: [f for f in v.figures if f.first] for v in views},
        "price_per_gpu_hour": price_per_gpu_hour,
        "price": parse_price(price_per_gpu_hour),
        # shipped references only: a sealed report reads the same on every machine
        "standing": []
        if smoke
        else standing(
            data,  # the bundle as read above: one read
            headline_only=True,
            include_user=False,
            judged={b.name: analysis.verdict_metric(b) for b in benches},
        ),
        "ran": ran_lines(benches, smoke),
        # page 1's interconnect words when each run was one process
        "alone": analysis.alone(benches),
        "headlines": {b.name: analysis.headline(b) for b in benches},
        # page 1's per-GPU column, for a headline not divided per GPU (busbw, a bus rate): says why instead
        "not_per_gpu": {b.name: catalog.not_per_gpu(analysis.verdict_metric(b)) for b in benches},
        # reference figures are for full-size runs on GPUs: a smoke run is not compared with them
        "expectations": expected,
        "reference_chart": _reference_chart(expected),
        "transports": {b.name: analysis.transports(b) for b in benches},
        "run_notes": {b.name: analysis.run_notes(b) for b in benches},
        "findings": analysis.findings(results, benches, data.environment),
        "trust": analysis.trust_facts(results, hardware),
        "as_ordered": as_ordered(hardware, results, order, silicon and silicon["facts"])
        if data.hardware is not None
        else [],
        "order": order,
        "box": judge_box(benches, data.hardware, smoke),  # page 1's table, the per-GPU section
        "gpus_ran": gpus_ran(hardware, results),
        "ran_of_box": ran_of_box(hardware, results),
        "tp_speedups": decode.tp_speedups(benches),
        "identity": identity(hardware, data.environment, results) if data.hardware else [],
        "hardware": hardware_view(hardware),
        "has_hardware": data.hardware is not None,
        "nodes": nodes_view(hardware, results),
        "environment": environment_view(data.environment, results, data.software, data.runs),
        "method": method_view(benches, jinja_env()),
        "manifest": manifest_view(bundle.path),
        "runs": results.runs,
        "kit_version": __version__,
        "renderer": f"kit {__version__}, Python {platform.python_version()}",
        "rendering": rendering(results, bundle.path),
        "style": STYLE.read_text(),
    }


def number_figures(figures: list[Figure]) -> None:
    """Each figure's caption numbered in the order a reader meets them: page 1's summary holds
    each benchmark's first figure, the sections the rest."""
    first, rest = [f for f in figures if f.first], [f for f in figures if not f.first]
    for n, f in enumerate([*first, *rest], 1):
        f.caption = f"Figure {n}. {f.caption}"


def _reference_chart(expected: dict[str, list[Any]]) -> Figure | None:
    """Page 1's chart of each workload as a factor of its same-model reference, where any has
    one."""
    normalised = against_reference(reference_rows(expected), "against-reference")
    words = "Each workload as a factor of its same-model reference"
    return Figure("reference", words, normalised) if normalised else None


def _summaries(
    views: list[BenchView],
    hardware: Hardware,
    silicon: dict[str, Any] | None,
    price_per_gpu_hour: Price | float | None,
    smoke: bool,
) -> list[Any]:
    """Page 1's summary of each benchmark; decode's batch-1 reads against this bundle's copy
    ceiling, and a same-call nccl-tests run outranking a shipped one."""
    out = []
    for view in views:
        b = view.bench
        summary = analysis.summarize_bench(
            b, hardware, analysis.ran_line(b, smoke), price_per_gpu_hour, smoke=smoke
        )
        if silicon and b.figures.placed == "hbm":  # decode: reads against the copy here
            analysis.add_copy_share(summary, silicon["facts"], b)
        for vs in summary.variants:  # a same-call nccl-tests run outranks a shipped one
            if vs.plateau and (sc := view.same_call.get(vs.variant)):
                vs.below_reference = sc.first_page
        out.append(summary)
    return out


def render_html(bundle: Bundle, ctx: dict[str, Any] | None = None, pdf: bool = False) -> str:
    """The page. pdf=True: the same page with each figure as a data: URI image (for WeasyPrint)."""
    ctx = ctx if ctx is not None else context(bundle)
    return jinja_env().get_template("report.html.j2").render(**ctx, pdf=pdf)


def render_bundle(
    bundle: Bundle,
    price_per_gpu_hour: Price | float | None = None,
    acceptance: dict[str, Any] | None = None,
    order: Order | None = None,
) -> Path:
    """Write report.html and report.pdf (unless KIT_PDF=0) into the bundle; returns the HTML's path.

    `price_per_gpu_hour` (kit.report.facts.price: amount, currency, source) adds the cost of 1M units
    of work to page 1, in that currency; `acceptance` (kit.report.accept's document) puts its
    verdicts on page 1; `order` (kit.report.facts.order) checks the machine against what was ordered.
    Raises PdfNotWritten (after report.html is written) where WeasyPrint cannot run here."""
    ctx = context(bundle, price_per_gpu_hour, order)
    ctx["acceptance"] = acceptance
    out = bundle.path / files.REPORT_HTML
    html = render_html(bundle, ctx)
    if not pdf_wanted():  # KIT_PDF=0: the page alone, as asked; a PDF of an earlier rendering
        write_text(out, html)  # would be resealed beside a page it no longer matches: removed
        (bundle.path / files.REPORT_PDF).unlink(missing_ok=True)
        return out
    buffer = io.BytesIO()
    try:  # both pages made before either is written: the files change together, moments before
        # the caller's manifest (a SIGKILL while the PDF renders leaves the sealed bundle as it was)
        write_pdf(render_html(bundle, ctx, pdf=True), buffer)
    except PdfNotWritten as exc:
        write_text(out, html)
        raise PdfNotWritten(
            f"report.html written, report.pdf not: {exc.why}",
            f"for the PDF, run `kit report {bundle.path}` where WeasyPrint works ({exc.install})",
        ) from None
    # created anew and renamed into place: a link planted at either name is replaced, not followed
    write_text(out, html)
    write_bytes(bundle.path / files.REPORT_PDF, buffer.getvalue())
    return out
