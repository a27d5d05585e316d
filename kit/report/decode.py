"""The report's decode figure: tokens/s against batch, a curve per variant, and the words on what
a batch-1 step reads against the memory's datasheet bandwidth (figure kind "decode").

Read from the runs' own per-batch records (kit/workloads/llm_decode/worker.py writes `batches`);
every point is the median over the variant's finished runs, the band their min to max.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

from kit.report import plots
from kit.report.analysis.model import Benchmark
from kit.report.mpl import matplotlib


def _number(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and x > 0


def _rows(run: Any) -> list[dict[str, Any]]:
    """A run's per-batch rows that hold a positive batch size (a received bundle may hold
    anything in a workload's own fields: what is not a row is left out, never drawn)."""
    rows = run.data.extra("batches")
    if not isinstance(rows, list):
        return []
    return [
        row
        for row in rows
        if isinstance(row, dict) and isinstance(row.get("batch"), int) and _number(row["batch"])
    ]


def curves(bench: Benchmark) -> dict[str, dict[int, list[float]]]:
    """variant -> batch -> decode tokens/s of every finished run."""
    out: dict[str, dict[int, list[float]]] = {}
    for v in bench.variants:
        for r in v.ok:
            for row in _rows(r):
                if _number(row.get("decode_tokens_per_s")):
                    per = out.setdefault(v.name, {})
                    per.setdefault(row["batch"], []).append(float(row["decode_tokens_per_s"]))
    return out


def batch_one(bench: Benchmark) -> list[str]:
    """Per variant: what a batch-1 decode step reads per second, against the datasheet."""
    lines = []
    for v in bench.variants:
        rows = [
            (row, r.data.extra("hbm_gbs")) for r in v.ok for row in _rows(r) if row["batch"] == 1
        ]
        gbps = [row["read_gbps"] for row, _ in rows if _number(row.get("read_gbps"))]
        if not gbps:
            continue
        median = statistics.median(gbps)
        hbm = next((h for _, h in rows if _number(h)), None)
        if hbm:
            share = f", {median / hbm:.0%} of the datasheet's {hbm:,.0f} GB/s HBM bandwidth"
        elif all(r.device == "cpu" for r in v.ok):
            share = " (a CPU run: host memory, no HBM figure)"
        else:
            share = " (no datasheet HBM figure for this GPU)"
        read = f"{median:,.0f}" if median >= 100 else f"{median:.3g}"  # as the silicon section
        lines.append(f"{v.name}: a batch-1 step reads memory at {read} GB/s per GPU{share}")
    return lines


def label_places(
    data: dict[str, dict[int, list[float]]],
) -> list[tuple[str, int, float, tuple[int, int, str, str]]]:
    """(variant, batch, median, (dx, dy, ha, va)) of each value label, in points from its point:
    at each batch the highest median's label above and left of its point, the next one's below
    and right, the rest further up, so curves close together never print one label over another
    (the report review, 10). Decode's curves rise with batch: each line reaches a point from
    below left and leaves it up right, so neither corner is crossed by the label's own curve."""
    out = []
    for b in sorted({b for per in data.values() for b in per}):
        meds = sorted(
            ((statistics.median(per[b]), v) for v, per in data.items() if b in per), reverse=True
        )
        for rank, (m, v) in enumerate(meds):
            place = (
                (-4, 4, "right", "bottom")
                if rank == 0
                else (4, -4, "left", "top")
                if rank == 1
                else (-4, 4 + 9 * rank, "right", "bottom")
            )
            out.append((v, b, m, place))
    return out


def decode_figure(data: dict[str, dict[int, list[float]]], title: str) -> Any:
    """Decode tokens/s against batch (log-log), a line per variant, the band min to max, each
    point's median labelled (drawn under the caller's plots.RC)."""
    fig, ax = plots._figure(2.8)
    col = plots.colors(list(data))
    for variant, per in data.items():
        batches = sorted(per)
        med = [statistics.median(per[b]) for b in batches]
        ax.plot(batches, med, marker="o", color=col[variant], label=plots.text(variant))
        ax.fill_between(
            batches,
            [min(per[b]) for b in batches],
            [max(per[b]) for b in batches],
            color=col[variant],
            alpha=0.2,
            linewidth=0,
        )
    for variant, b, m, (dx, dy, ha, va) in label_places(data):
        ax.annotate(
            plots.fmt_num(m),
            (b, m),
            textcoords="offset points",
            xytext=(dx, dy),
            ha=ha,
            va=va,
            fontsize=7,
            color=col[variant],
        )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    # room inside the axes for the first point's label on its left and the lowest one's below
    ax.margins(x=0.1, y=0.15)
    every = sorted({b for per in data.values() for b in per})
    ax.set_xticks(every)
    ax.set_xticklabels([str(b) for b in every])
    ax.minorticks_off()
    ax.set_xlabel("batch (sequences decoded together)")
    ax.set_ylabel("decode tokens/s (all GPUs)")
    ax.set_title(plots.text(title, lines=2))
    ax.legend(frameon=False, loc="lower right")
    return fig


def decode_plot(data: dict[str, dict[int, list[float]]], title: str, salt: str) -> str | None:
    """decode_figure as the report's <svg>; None without data."""
    if not data:
        return None
    with matplotlib.rc_context(plots.RC):
        return plots.to_svg(decode_figure(data, title), salt)


def _tp(bench: Benchmark) -> int | None:
    """The tensor-parallel degree the runs recorded (their data's `tp`)."""
    for r in bench.runs:
        tp = r.data.extra("tp") if r.data is not None else None
        if isinstance(tp, int) and not isinstance(tp, bool) and tp >= 1:
            return tp
    return None


def tp_speedups(
    benches: list[Benchmark],
    where: dict[int, str] | None = None,
    apart: Callable[[Benchmark, Benchmark], bool] | None = None,
) -> list[str]:
    """Tensor parallel's speed for one sequence at batch 1 against the data-parallel benchmark
    (tp 1) of the same bundle, per variant both ran, or against its one variant where the
    data-parallel benchmark runs one (P2P moves nothing there: recipes/llm_decode.yaml runs it
    P2P on only): the ratio of their median times per output token (the report review, 1: per
    user, TP=2 was faster while its batch-1 tokens/s read lower than data parallel's two
    streams added up).

    `where`: id(benchmark) -> the machine it ran on, for a comparison's benchmarks from several
    bundles of one hardware (kit.report.compare): each name is followed by its machine, and a
    tensor-parallel benchmark is held against the data-parallel one of its own bundle first;
    `apart(a, b)`: the two ran on different machines, which the line then says. A single
    bundle without a tp 1 benchmark gets a line saying where its speed-up is found."""
    one_bundle, where = where is None, where or {}
    decode = [b for b in benches if "tpot_median_ms" in b.metrics]  # the decode benchmarks
    ones = [b for b in decode if _tp(b) == 1]
    out = []
    for b in decode:
        tp = _tp(b)
        if tp is None or tp < 2:
            continue
        if not ones:  # a bundle of tensor-parallel runs alone: where its speed-up is found
            if one_bundle:
                out.append(
                    f"{b.name} (tp {tp}): no data-parallel (tp 1) benchmark in this bundle to "
                    "hold it against; kit compare with a tp 1 bundle of the same GPU model, "
                    "count and links states the speed-up"
                )
            continue
        here = where.get(id(b), "")
        one = next((o for o in ones if where.get(id(o), "") == here), ones[0])
        bases = one.metrics.get("tpot_median_ms") or {}
        for variant, row in (b.metrics.get("tpot_median_ms") or {}).items():
            against = variant if variant in bases or len(bases) != 1 else next(iter(bases))
            base = bases.get(against)
            if base is None or row.summary is None or base.summary is None:
                continue
            mine, theirs = row.summary.median, base.summary.median
            if mine <= 0:
                continue
            r = theirs / mine
            how = f"{r:.2f}x faster than" if r >= 1 else f"{1 / r:.2f}x slower than"
            out.append(
                f"{b.name}{_on(where, b)} (tp {tp}), {variant}: one sequence {how} "
                f"{'' if where else 'on '}{one.name}{_on(where, one)} (tp 1"
                + (f", {against}" if against != variant else "")
                + "), "
                f"{mine:.3g} against {theirs:.3g} ms per output token "
                f"(medians of {row.summary.n} and {base.summary.n} runs)"
                + (
                    "; two machines of one model: their own difference is in the ratio"
                    if apart is not None and apart(b, one)
                    else ""
                )
            )
    return out


def _on(where: dict[int, str], bench: Benchmark) -> str:
    return f" on {where[id(bench)]}" if id(bench) in where else ""


def figure(view: Any, salt: str) -> None:
    """The decode section's figure (kit.report.bench_view.PLOTS["decode"])."""
    bench = view.bench
    svg = decode_plot(
        curves(bench), f"{bench.name}: decode tokens/s against batch", f"{salt}-decode"
    )
    words = batch_one(bench)
    view.add(
        "decode",
        f"{bench.label}: decode throughput against batch, all GPUs of the run (line: median over "
        "repeats; band: min to max of the repeats)" + (f". {'; '.join(words)}" if words else ""),
        svg,
    )
