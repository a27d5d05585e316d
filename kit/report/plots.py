"""The report's figures: matplotlib figures to SVG strings, inlined into the HTML and the PDF.

Deterministic: a fixed hash salt per figure (so ids differ between figures in one page but not
between renders), no date in the metadata, text kept as SVG text in the page's own font.
Labels that come from a bundle (benchmark and variant names) are escaped for mathtext.
"""

from __future__ import annotations

import io
import itertools
import math
import re
import textwrap
from typing import Any

from kit.report.mpl import (
    Figure,
    FixedLocator,
    FuncFormatter,
    MaxNLocator,
    NullFormatter,
    NullLocator,
    matplotlib,
)
from kit.report.plot_colors import colors
from kit.shared.metrics import figure

RC = {
    "svg.fonttype": "none",
    "font.family": "DejaVu Sans",
    "font.size": 8.5,
    "axes.titlesize": 9.5,
    "axes.labelsize": 8.5,
    "legend.fontsize": 8,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.color": "#dddddd",
    "grid.linewidth": 0.6,
    "figure.dpi": 100,
}
WIDTH_IN = 7.0


def text(label: Any, width: int = 60, lines: int = 1) -> str:
    """A bundle's string, safe for matplotlib: no mathtext, at most `lines` of `width`
    characters (a title takes two: "all at o..." was cut), the rest cut with "..."."""
    s = str(label).replace("\\", "\\\\").replace("$", r"\$")
    if len(s) <= width:
        return s
    rows = textwrap.wrap(s, width) or [s[:width]]
    if len(rows) > lines:
        rows = [*rows[: lines - 1], rows[lines - 1][: width - 3] + "..."]
    return "\n".join(rows)


def fmt_num(x: Any) -> str:
    """A value as the pages print it: a number as kit.shared.metrics.figure writes it (one
    definition for the terminal and the pages), "-" for none, anything else as it is."""
    if x is None:
        return "-"
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return str(x)
    return figure(x)


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if n == int(n) else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def to_svg(fig: Any, salt: str) -> str:
    """The figure as an <svg> element (no XML prolog), then closed."""
    buf = io.StringIO()
    with matplotlib.rc_context({"svg.hashsalt": f"kit-{salt}"}):
        fig.savefig(buf, format="svg", metadata={"Date": None}, bbox_inches="tight")
    svg = buf.getvalue()
    svg = svg[svg.index("<svg") :]
    # fixed pt sizes out, the viewBox stays: the page's CSS sets the width
    svg = re.sub(r'<svg([^>]*?) width="[^"]*" height="[^"]*"', r"<svg\1", svg, count=1)
    return svg


def _figure(height_in: float, ncols: int = 1, nrows: int = 1, **kw: Any) -> tuple[Any, Any]:
    with matplotlib.rc_context(RC):
        fig = Figure(figsize=(WIDTH_IN, height_in))
        ax = fig.subplots(nrows, ncols, **kw)
    return fig, ax


def _size_axis(ax: Any, sizes: list[int]) -> None:
    ax.set_xscale("log", base=2)
    lo, hi = min(sizes), max(sizes)
    exps = range(int(math.log2(lo)), int(math.log2(hi)) + 1)
    step = max(1, math.ceil(len(exps) / 10))
    ticks = [2**e for e in exps if (e - exps[0]) % step == 0]
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticklabels([human_bytes(t) for t in ticks])
    ax.set_xlim(lo / 1.3, hi * 1.3)
    ax.set_xlabel("message size (bytes, log2 scale)")


TIMING_WORDS = {
    "spin-held": "spin-held events",
    "cuda-graph": "CUDA graph",
    "cuda-events": "CUDA events",
    "host-clock": "host clock",
}


def _timing_edges(curves: dict[str, Any]) -> list[tuple[float, str, str]]:
    """Where the timing rule changes from one size to the next (small sizes replayed from a
    CUDA graph, larger ones timed with CUDA events): (edge, rule left of it, rule right of it)."""
    per_size: dict[int, set[str]] = {}
    for c in curves["curves"].values():
        for size, point in (c or {}).items():
            per_size.setdefault(size, set()).update(point.get("timing") or [])
    sizes = [x for x in sorted(per_size) if per_size[x]]
    words = lambda rules: "/".join(TIMING_WORDS.get(t, t) for t in sorted(rules))  # noqa: E731
    return [
        (math.sqrt(a * b), words(per_size[a]), words(per_size[b]))
        for a, b in itertools.pairwise(sizes)
        if per_size[a] != per_size[b]
    ]


def _mark_timing(ax: Any, curves: dict[str, Any]) -> None:
    """A dotted line at each timing edge, named on both sides above the plot (one row each, clear
    of the legend and the curves): a step in the curve there is the clock's, not the link's."""
    for row, (edge, left, right) in enumerate(_timing_edges(curves)):
        ax.axvline(edge, color="#777", linewidth=0.8, linestyle=":")
        ax.text(
            edge,
            1.01 + 0.075 * row,
            f"timed by {left} | {right}",
            transform=ax.get_xaxis_transform(),
            ha="center",
            va="bottom",
            fontsize=6.5,
            color="#555",
            clip_on=False,
        )


def _failed_note(ax: Any, curves: dict[str, Any]) -> None:
    """Say in the plot which variants have no line because none of their runs finished."""
    failed = [v for v, c in curves["curves"].items() if not c]
    if failed:
        ax.text(
            0.99,
            0.02,
            "FAILED, no line: " + ", ".join(text(v) for v in failed),
            transform=ax.transAxes,
            ha="right",
            va="bottom",
            color="#b00020",
            fontweight="bold",
        )


def _sweep_lines(ax: Any, curves: dict[str, Any], key: str, median_label: bool) -> None:
    """One line per variant (the median of `key` at each size) over the min..max band of repeats."""
    col = colors(list(curves["curves"]))
    for v, c in curves["curves"].items():
        if not c:
            continue
        xs = sorted(c)
        label = f"{text(v)} (median)" if median_label else text(v)
        ax.plot(
            xs,
            [c[x][key] for x in xs],
            marker="o",
            markersize=2.5,
            linewidth=1.4,
            color=col[v],
            label=label,
        )
        ax.fill_between(
            xs,
            [c[x][f"{key}_min"] for x in xs],
            [c[x][f"{key}_max"] for x in xs],
            color=col[v],
            alpha=0.2,
            linewidth=0,
        )
    _size_axis(ax, curves["sizes"])
    _mark_timing(ax, curves)
    _failed_note(ax, curves)


LEGEND_INSIDE = 12
"""Most legend entries drawn over the plot; a fleet's comparison puts its legend below."""


def _legend(ax: Any) -> None:
    """Upper left over the plot, or, with more entries than fit there, below it in columns."""
    entries = len(ax.get_legend_handles_labels()[1])
    if entries <= LEGEND_INSIDE:
        ax.legend(loc="upper left", frameon=False)
        return
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.22), frameon=False, ncol=3, fontsize=6)


def sweep_busbw(curves: dict[str, Any], title: str, salt: str) -> str | None:
    """Bus bandwidth against size, one line per variant, the min..max band of the repeats."""
    return _sweep(curves, "busbw", "busbw (GB/s)", title, salt, height=2.9, log=False)


def sweep_time(curves: dict[str, Any], title: str, salt: str, op: str = "operation") -> str | None:
    """Time per operation against size, log-log (where small messages are read)."""
    ylabel = f"time per {text(op)} (us, log)"
    return _sweep(curves, "time", ylabel, title, salt, height=2.4, log=True)


def _sweep(
    curves: dict[str, Any], key: str, ylabel: str, title: str, salt: str, height: float, log: bool
) -> str | None:
    """One sweep figure of `key` per size; linear from 0 with the median labelled, or log."""
    if not any(curves["curves"].values()):
        return None
    with matplotlib.rc_context(RC):
        fig, ax = _figure(height)
        _sweep_lines(ax, curves, key, median_label=not log)
        if log:
            ax.set_yscale("log")
            ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _: fmt_num(y)))
            ax.yaxis.set_minor_formatter(NullFormatter())
        else:
            ax.set_ylim(bottom=0)
        ax.set_ylabel(ylabel)
        pad = 6 + 10 * len(_timing_edges(curves))  # above the timing rows
        ax.set_title(text(title, lines=2), pad=pad)
        _legend(ax)
        return to_svg(fig, salt)


def metric_bars(rows: list[dict[str, Any]], ylabel: str, title: str, salt: str) -> str | None:
    """One bar per variant: the median, with its 95% interval; a failed variant says so, and
    one its bundle never ran (a comparison's) says that instead.

    rows: [{"variant", "median" | None, "low", "high", "absent" (optional)}]
    """
    if not rows:
        return None
    with matplotlib.rc_context(RC):
        fig, ax = _figure(0.45 * len(rows) + 1.0)
        col = colors([r["variant"] for r in rows])
        ys = list(range(len(rows)))[::-1]
        top = max((r["high"] for r in rows if r.get("median") is not None), default=1.0)
        for y, r in zip(ys, rows, strict=True):
            if r.get("median") is None and r.get("absent"):
                ax.text(0, y, "  not run: not in this bundle's recipe", va="center", color="#555")
                continue
            if r.get("median") is None:
                ax.text(
                    0,
                    y,
                    "  FAILED: no finished run",
                    va="center",
                    color="#b00020",
                    fontweight="bold",
                )
                continue
            err = [[r["median"] - r["low"]], [r["high"] - r["median"]]]
            ax.barh(
                y,
                r["median"],
                color=col[r["variant"]],
                height=0.6,
                # one run has no interval: no whisker, rather than caps that read as a tight one
                xerr=err if r["high"] > r["low"] else None,
                error_kw={"ecolor": "#222", "capsize": 3, "linewidth": 1},
            )
            ax.text(r["high"] + top * 0.01, y, f" {fmt_num(r['median'])}", va="center")
        ax.set_yticks(ys)
        ax.set_yticklabels([text(r["variant"]) for r in rows])
        ax.set_ylim(-0.6, len(rows) - 0.4)  # a row of words alone (no bar) stays off the axis
        ax.set_xlim(0, top * 1.18)
        ax.set_xlabel(text(ylabel))
        ax.grid(axis="y", visible=False)
        ax.set_title(text(title, lines=2))
        return to_svg(fig, salt)


def step_traces(traces: list[dict[str, Any]], title: str, salt: str) -> str | None:
    """Every step time of every repeat; warm-up steps shaded and drawn hollow."""
    if not traces:
        return None
    with matplotlib.rc_context(RC):
        fig, ax = _figure(3.0)
        col = colors(list(dict.fromkeys(t["variant"] for t in traces)))
        styles = ["-", "--", ":", "-."]
        warm = max(t["warmup"] for t in traces)
        if warm:
            ax.axvspan(-0.5, warm - 0.5, color="#eeeeee", zorder=0)
            # a narrow warm-up (5 of 480 steps): the centred words would spill over the y axis
            narrow = warm - 0.5 < 0.1 * max(len(t["steps"]) for t in traces)
            ax.text(
                warm - 0.5,
                0.03,
                "| measured (shaded warm-up dropped)" if narrow else "warm-up (dropped) | measured",
                ha="left" if narrow else "center",
                va="bottom",
                transform=ax.get_xaxis_transform(),
                fontsize=7,
                color="#555",
                bbox={"facecolor": "white", "edgecolor": "none", "pad": 1},
            )
        measured = []
        seen = set()
        for t in traces:
            steps = t["steps"]
            measured += steps[t["warmup"] :]
            label = text(t["variant"]) if t["variant"] not in seen else None
            seen.add(t["variant"])
            ax.plot(
                range(len(steps)),
                steps,
                color=col[t["variant"]],
                linewidth=0.9,
                linestyle=styles[t["repeat"] % len(styles)],
                label=label,
            )
        if measured:  # the warm-up's first step can be 10x the rest: keep the measured readable
            lo, hi = min(measured), max(measured)
            pad = (hi - lo) * 0.25 or hi * 0.05
            ax.set_ylim(max(0, lo - pad), hi + pad * 3)
        # the line styles named: one grey proxy line per repeat drawn
        for rep in sorted({t["repeat"] for t in traces}):
            ax.plot(
                [],
                [],
                color="#555",
                linewidth=0.9,
                linestyle=styles[rep % len(styles)],
                label=f"repeat {rep}",
            )
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # steps are whole numbers
        ax.set_xlabel("step (colour: variant; line style: repeat)")
        ax.set_ylabel("step time (s)")
        ax.set_title(text(title, lines=2))
        ax.legend(loc="upper right", frameon=False, ncol=2, fontsize=7)
        return to_svg(fig, salt)


TELEMETRY_PANELS = [
    ("sm_clock_mhz", "SM clock (MHz)"),
    ("power_w", "power (W)"),
    ("temp_c", "temperature (C)"),
    ("util_gpu", "GPU util. (%)"),
]


def _mark_windows(ax: Any, series: list[dict[str, Any]], col: dict[str, str]) -> None:
    """Shade each run's timed window (series[i]["window"]: (start, end) s, when known) in its
    variant's colour, with dashed edges: the figures are measured there, the rest is warm-up."""
    done = set()
    for s in series:
        w = s.get("window")
        if not w or (s["run_id"], w) in done:
            continue
        done.add((s["run_id"], w))
        ax.axvspan(w[0], w[1], color=col[s["variant"]], alpha=0.07, linewidth=0)
        for edge in w:
            ax.axvline(edge, color=col[s["variant"]], linewidth=0.5, linestyle="--", alpha=0.6)


def telemetry(series: list[dict[str, Any]], title: str, salt: str) -> str | None:
    """NVML samples over each run's time: clocks, power, temperature, utilisation; each run's
    timed window shaded (series[i]["window"])."""
    panels = [
        (k, lab)
        for k, lab in TELEMETRY_PANELS
        if any(any(x is not None for x in s["samples"].get(k) or []) for s in series)
    ]
    if not series or not panels:
        return None
    with matplotlib.rc_context(RC):
        fig, axes = _figure(0.95 * len(panels) + 0.7, nrows=len(panels), sharex=True)
        axes = axes if len(panels) > 1 else [axes]
        col = colors(list(dict.fromkeys(s["variant"] for s in series)))
        seen = set()
        for ax, (key, label) in zip(axes, panels, strict=True):
            for s in series:
                t, ys = s["samples"]["t_s"], s["samples"].get(key) or []
                pts = [(a, b) for a, b in zip(t, ys, strict=False) if b is not None]
                pts = pts[:: max(1, len(pts) // 400)]  # a long run: every n-th sample suffices
                if not pts:
                    continue
                lab = text(s["variant"]) if s["variant"] not in seen else None
                seen.add(s["variant"])
                ax.plot(
                    *zip(*pts, strict=True),
                    color=col[s["variant"]],
                    linewidth=0.7,
                    alpha=0.8,
                    label=lab,
                )
            ax.set_ylabel(label, fontsize=7.5)
            _mark_windows(ax, series, col)
        axes[0].set_title(text(title, lines=2), pad=16)
        axes[0].legend(
            loc="lower left", bbox_to_anchor=(0, 1.0), frameon=False, ncol=4, borderaxespad=0.1
        )
        axes[-1].set_xlabel(
            "seconds since the run's telemetry started (every run, every GPU it drove)"
        )
        return to_svg(fig, salt)
