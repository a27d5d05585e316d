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
from collections.abc import Callable
from dataclasses import dataclass, field
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
from kit.report.analysis.same_call import SameCall, same_call
from kit.report.analysis.verdicts import folded
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


# --- figures -------------------------------------------------------------------------------


@dataclass
class BenchView:
    bench: analysis.Benchmark
    figures: list[Figure] = field(default_factory=list)
    curves: dict[str, Any] | None = None
    traces: int = 0
    telemetry: int = 0
    raw: dict[str, Any] | None = None
    nccl: dict[str, str] = field(default_factory=dict)  # sweeps: NCCL's setup per variant
    nccl_choice: dict[str, str] = field(default_factory=dict)  # how the per-size choice was read
    same_call: dict[str, SameCall] = field(default_factory=dict)  # nccl-tests in the same call
    index: int = 0

    def add(self, key: str, caption: str, svg: str | None) -> None:
        """A drawn figure, in order; nothing where its plot had nothing to draw."""
        if svg:
            self.figures.append(Figure(key, caption, svg))


def _bar_rows(bench: analysis.Benchmark, metric: str) -> list[dict[str, Any]]:
    rows = []
    for v in bench.variants:
        row = (bench.metrics.get(metric) or {}).get(v.name)
        s = row.summary if row else None
        rows.append(
            {
                "variant": v.name,
                "median": s.median if s else None,
                "low": s.ci_low if s else None,
                "high": s.ci_high if s else None,
            }
        )
    return rows


def interval_labels(bench: analysis.Benchmark, metric: str) -> str:
    """What the bars' whiskers are, in the stats module's words ("range of 2 runs")."""
    rows = (bench.metrics.get(metric) or {}).values()
    return "; ".join(
        sorted({r.summary.centred_label() for r in rows if r.summary and r.summary.label})
    )


def _methods(view: BenchView) -> list[str]:
    """The timing methods the sweep's figures show (the rows' `timing`), in the plots' words."""
    found = {
        t
        for c in (view.curves or {}).get("curves", {}).values()
        for p in c.values()
        for t in p.get("timing") or []
    }
    return [plots.TIMING_WORDS.get(t, t) for t in sorted(found)]


def _busbw(view: BenchView, salt: str) -> None:
    bench = view.bench
    if not view.curves or not view.curves["sizes"]:
        return
    if {v.gpus for v in bench.variants if v.ok} == {1}:
        return  # one rank: the bus factor is 0, a line of zeros (the method says so)
    svg = plots.sweep_busbw(view.curves, f"{bench.label}: bus bandwidth", f"{salt}-busbw")
    methods = _methods(view)
    view.add(
        "busbw",
        f"{bench.label}: bus bandwidth against "
        "message size (line: median over repeats; band: min to max of the repeats"
        + (
            "; dotted line: where the timing rule changes, so a step there is "
            "the clock's, not the link's)"
            if len(methods) > 1
            else ")"
        )
        + (f"; timed by {' and '.join(methods)}" if methods else ""),
        svg,
    )


def _time(view: BenchView, salt: str) -> None:
    bench = view.bench
    if not view.curves or not view.curves["sizes"]:
        return
    sweep = bench.spec.sweep if bench.spec else None
    op = sweep.op if sweep else "operation"
    svg = plots.sweep_time(view.curves, f"{bench.label}: time per operation", f"{salt}-time", op)
    methods = _methods(view)
    view.add(
        "time",
        f"{bench.label}: time per {op} against message size, log-log"
        + (f"; timed by {' and '.join(methods)} (not the one-call latency)" if methods else ""),
        svg,
    )


def _bars(view: BenchView, salt: str) -> None:
    bench = view.bench
    metric = analysis.verdict_metric(bench)
    rows = next(iter((bench.metrics.get(metric) or {}).values()), None)
    if rows is None:
        return
    title, axis = f"{bench.label}: {rows.label}", f"{rows.label} ({rows.unit})"
    svg = plots.metric_bars(_bar_rows(bench, metric), axis, title, f"{salt}-bars")
    words = interval_labels(bench, metric)
    view.add("bars", f"{title}, median with its interval ({words})", svg)


def _steps(view: BenchView, salt: str) -> None:
    bench = view.bench
    traces = analysis.step_traces(bench)
    view.traces = len(traces)
    svg = plots.step_traces(traces, f"{bench.label}: every step of every repeat", f"{salt}-steps")
    view.add(
        "steps",
        f"{bench.label}: step times of every repeat; the shaded warm-up steps are not measured",
        svg,
    )


PLOTS: dict[str, Callable[[BenchView, str], None]] = {
    "busbw": _busbw,
    "time": _time,
    "bars": _bars,
    "steps": _steps,
    "decode": decode.figure,
}
"""A benchmark section's plots by name: a figure kind (kit.report.kinds) lists the ones it gets."""


def bench_view(
    bench: analysis.Benchmark, index: int, nccl_tests: dict[str, str] | None = None
) -> BenchView:
    view = BenchView(bench, index=index + 1)
    salt = f"{index}-{bench.name}"
    if bench.figures.by_size:
        view.curves = analysis.sweep_curves(bench)
        view.raw = analysis.raw_sizes(bench)
        view.nccl = analysis.nccl_setup(bench)
        view.nccl_choice = analysis.nccl_choice(bench)
        view.same_call = same_call(bench, nccl_tests or {})
    for plot in bench.figures.plots:
        PLOTS[plot](view, salt)
    series = analysis.telemetry_series(bench)
    view.telemetry = len(series)
    svg = plots.telemetry(series, f"{bench.label}: GPU telemetry", f"{salt}-telemetry")
    view.add(
        "telemetry",
        f"{bench.label}: NVML telemetry during every finished run, every GPU it drove; "
        + (
            "the shaded spans between dashed lines are each run's timed window (where "
            "the figures are measured), the rest is start-up and warm-up"
            if any(x.get("window") for x in series)
            else "these runs recorded no timed window on telemetry's clock, so none is "
            "shaded: the whole run is drawn, start-up and warm-up included"
        ),
        svg,
    )
    return view


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
    data = load(bundle)
    results = data.results
    hardware = data.hardware or Hardware()  # none recorded: an inventory that knows nothing
    benches = analysis.build_benchmarks(results, data.recipe)
    views = [bench_view(b, i, data.nccl_tests) for i, b in enumerate(benches)]
    silicon = silicon_view(benches, hardware)
    figures = [f for v in views for f in v.figures] + (silicon["figures"] if silicon else [])
    # numbered in the order a reader meets them: page 1's summary holds each benchmark's first
    for n, f in enumerate([f for f in figures if f.first] + [f for f in figures if not f.first], 1):
        f.caption = f"Figure {n}. {f.caption}"
    smoke = data.results.smoke
    expected = {b.name: [] if smoke else analysis.expectations(b, hardware) for b in benches}
    normalised = against_reference(reference_rows(expected), "against-reference")
    reference_chart = (
        Figure("reference", "Each workload as a factor of its same-model reference", normalised)
        if normalised
        else None
    )
    summaries = [
        analysis.summarize_bench(
            b, hardware, analysis.ran_line(b, smoke), price_per_gpu_hour, smoke=smoke
        )
        for b in benches
    ]
    for summary, view in zip(summaries, views, strict=True):
        if silicon and view.bench.figures.placed == "hbm":  # decode: reads against the copy here
            analysis.add_copy_share(summary, silicon["facts"], view.bench)
        for vs in summary.variants:  # a same-call nccl-tests run outranks a shipped one
            if vs.plateau and (sc := view.same_call.get(vs.variant)):
                vs.below_reference = sc.first_page
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
        "reference_chart": reference_chart,
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
