"""A benchmark's section of the report as its template reads it: the benchmark, its figures in
order (the plots its figure kind lists, then its telemetry) and, for a sweep, its curves, NCCL
setup and the same-call nccl-tests check."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kit.report import analysis, decode, plots
from kit.report.analysis.same_call import SameCall, same_call
from kit.report.figure import Figure


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
