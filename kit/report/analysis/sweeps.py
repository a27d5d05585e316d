"""Message-size sweeps (every collective): per variant and size, the medians and bands."""

from __future__ import annotations

import statistics
from collections import defaultdict
from typing import Any

from kit.model import Hardware, RunResult
from kit.refs.nccl_tests import (
    ABOVE,
    BELOW,
    SHIPPED_VARIANTS,
    SPIN_HELD_WHY,
    above,
    below,
    other_mode,
    reference_for,
    size_words,
)
from kit.report.analysis.model import Benchmark, VariantBlock, is_ok
from kit.shared.nccl_log import choice_words


def sweep_curves(bench: Benchmark) -> dict[str, Any]:
    """Per variant and size: busbw and time, median over repeats of each repeat's median, and
    the min..max of those per-repeat medians (the band in the plot)."""
    sizes: list[int] = []
    curves: dict[str, dict[int, dict[str, Any]]] = {}
    for v in bench.variants:
        per: dict[int, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        for r in v.ok:
            for row in r.data.sizes or []:
                b = row.bytes
                if b not in sizes:
                    sizes.append(b)
                per[b]["busbw"].append(statistics.median(row.busbw_gbps))
                per[b]["time"].append(statistics.median(row.time_us))
                per[b]["algbw"].append(statistics.median(row.algbw_gbps or [0.0]))
                per[b]["wrong"].append(row.wrong)
                per[b]["timing"].append(row.timing or "")
                if lat := row.extra("latency_us"):  # the one-call latency, its own measurement
                    per[b]["latency"].append(statistics.median(lat))
                per[b]["dropped"].append(int(row.extra("dropped") or 0))
                per[b]["unheld"].append(int(row.extra("unheld") or 0))
                per[b]["count"].append(row.count or 0)
                per[b]["nccl"].extend(choice_words(c) for c in row.extra("nccl_calls") or [])
                if other := row.extra("other"):  # the other placement, timed after this one
                    per[b]["other"].append(other)
        curves[v.name] = {
            b: {
                "busbw": statistics.median(d["busbw"]),
                "busbw_min": min(d["busbw"]),
                "busbw_max": max(d["busbw"]),
                "algbw": statistics.median(d["algbw"]),
                "time": statistics.median(d["time"]),
                "time_min": min(d["time"]),
                "time_max": max(d["time"]),
                "wrong": sum(d["wrong"]),
                "n": len(d["busbw"]),
                "timing": sorted({t for t in d["timing"] if t}),
                "count": max(d["count"]) or None,
                # what NCCL's TUNING log said it picked, every distinct answer over the repeats
                "nccl": sorted(set(d["nccl"])),
                "other": _other(d["other"]),
                "latency": statistics.median(d["latency"]) if d["latency"] else None,
                # spin-held trials dropped (queueing outlasted the spin) and kept unheld
                "dropped": sum(d["dropped"]),
                "unheld": sum(d["unheld"]),
            }
            for b, d in per.items()
        }
    return {"sizes": sorted(sizes), "curves": curves}


def size_table(bench: Benchmark, variant: str) -> dict[int, tuple[float, float]]:
    """{bytes: (time us, busbw GB/s)} of one variant's curve (sweep_curves' medians): the pairs
    an nccl-tests column holds (kit.refs.nccl_tests), to set the two side by side."""
    curve = sweep_curves(bench)["curves"].get(variant, {})
    return {size: (point["time"], point["busbw"]) for size, point in curve.items()}


def _other(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The other placement at one size over the repeats (median of each repeat's median), or
    None where no run timed it."""
    if not rows:
        return None
    return {
        "placement": rows[0].get("placement") or "in-place",
        "time": statistics.median(statistics.median(r["time_us"]) for r in rows),
        "algbw": statistics.median(statistics.median(r["algbw_gbps"]) for r in rows),
        "busbw": statistics.median(statistics.median(r["busbw_gbps"]) for r in rows),
        "wrong": sum(int(r.get("wrong") or 0) for r in rows),
    }


def nccl_setup(bench: Benchmark) -> dict[str, str]:
    """Per variant, what NCCL's own log of its finished runs says it set up: version, channels
    (coll, NVLS, p2p), transports (the algorithm per size: `nccl_choice`)."""
    out = {}
    for v in bench.variants:
        records = [r.nccl for r in v.ok if r.nccl is not None]
        if not records:
            out[v.name] = "NCCL's log was not recorded for these runs"
            continue
        versions = sorted({x.version for x in records if x.version})
        chans = sorted(
            {(c["coll"], c["nvls"], c["p2p"]) for x in records if (c := x.extra("channels"))}
        )
        used = sorted({k for x in records for k in x.transports})
        parts = [f"NCCL {', '.join(versions)}" if versions else "NCCL (version not logged)"]
        parts.append(
            "; ".join(
                f"{c} coll channels, {n} NVLS channels, {p} p2p channels" for c, n, p in chans
            )
            if chans
            else "channels not recorded in this bundle's results (its logs/ hold NCCL's lines)"
        )
        parts.append(f"transport {', '.join(used) or 'not logged'}")
        out[v.name] = "; ".join(parts)
    return out


def nccl_choice(bench: Benchmark) -> dict[str, str]:
    """Per variant, how its runs read NCCL's per-size algorithm and protocol (the worker's
    words: kit/workloads/collective_sweep.py), or that runs before that did not record it."""
    out = {}
    for v in bench.variants:
        notes = sorted({n for r in v.ok if (n := r.data.extra("nccl_choice"))})
        out[v.name] = "; ".join(notes) or "not recorded by these runs (a kit before the log)"
    return out


def raw_sizes(bench: Benchmark) -> dict[str, Any] | None:
    """busbw of every finished run per size (median of its trials), for the appendix."""
    ok = [r for r in bench.runs if is_ok(r) and r.data.sizes]
    if not ok:
        return None
    sizes = sorted({row.bytes for r in ok for row in r.data.sizes or []})
    cells = []
    for size in sizes:
        line = []
        for r in ok:
            row = next((x for x in r.data.sizes or [] if x.bytes == size), None)
            line.append(statistics.median(row.busbw_gbps) if row else None)
        cells.append((size, line))
    return {"columns": [f"{r.variant} r{r.repeat}" for r in ok], "rows": cells}


# The name earlier versions used, while the all-reduce was the only sweep.
allreduce_curves = sweep_curves


PLATEAU_RISE = 0.02
"""Bus bandwidth still rising by more than this from the size before the largest: the sweep
stopped before the plateau."""
PEAK_ABOVE = 0.05
"""A sweep's best size more than this above its largest: said beside the headline."""


def plateau_words(runs: list[RunResult]) -> str:
    """Whether the largest size of a sweep sits on the bandwidth plateau, in words, from the
    median busbw over the runs at the last two sizes."""
    per_size: dict[int, list[float]] = {}
    for r in runs:
        for row in r.data.sizes or []:
            if row.busbw_gbps:
                per_size.setdefault(row.bytes, []).append(statistics.median(row.busbw_gbps))
    sizes = sorted(per_size)
    if len(sizes) < 2:
        return ""
    last, before = sizes[-1], sizes[-2]
    b_last, b_before = (statistics.median(per_size[x]) for x in (last, before))
    if b_before <= 0:
        return ""
    rise = b_last / b_before - 1
    if rise > PLATEAU_RISE:
        return (
            f"taken at {size_words(last)}, where bus bandwidth was still rising ({rise:+.1%} from "
            f"{size_words(before)}): below the plateau, so it understates the link; nccl-tests "
            "practice sweeps to 8 or 16 GiB where memory allows"
        )
    if abs(rise) < 0.0005:  # "+.1%" would print it "-0.0%" or "+0.0%"
        said = f"taken at {size_words(last)}, on the plateau (within 0.05% of {size_words(before)})"
    else:
        said = (
            f"taken at {size_words(last)}, on the plateau ({rise:+.1%} from {size_words(before)})"
        )
    # a path whose best size lies mid-sweep (host memory staging, no-p2p): "on the plateau"
    # alone read as its best (a buyer found page 3's peak 13% above the headline)
    peak = max(sizes, key=lambda x: statistics.median(per_size[x]))
    top = statistics.median(per_size[peak])
    if b_last > 0 and top / b_last - 1 > PEAK_ABOVE:
        said += (
            f"; its peak, {top:,.4g} GB/s at {size_words(peak)}, is {top / b_last - 1:.0%} above it"
        )
    return said


def below_nccl_tests(
    bench: Benchmark, v: VariantBlock, gpus: int | None, hardware: Hardware
) -> str:
    """The sizes where this variant's busbw is below the shipped nccl-tests run of the same
    program on the same GPU model and count (kit/refs/nccl_tests), in words; "" without one."""
    names = sorted({g.name for g in hardware.gpus if g.name})
    tool = bench.spec.sweep.tool if bench.spec and bench.spec.sweep else ""
    ref = reference_for(tool, names[0] if len(names) == 1 else None, gpus, v.name)
    if ref is None:
        if len(names) == 1 and gpus and gpus > 1 and tool and v.name in SHIPPED_VARIANTS:
            return (
                f"no {tool} run of {gpus}x {names[0]} ships with kit (kit/refs/nccl_tests), so "
                "no size is checked against nccl-tests"
            )
        return ""
    curve = sweep_curves(bench)["curves"].get(v.name) or {}
    placement = bench.spec.sweep.placement if bench.spec and bench.spec.sweep else "out-of-place"
    low, high = below(curve, ref, placement), above(curve, ref, placement)
    where = (
        f"nccl-tests {ref.test} on {gpus}x {ref.gpu}, its {placement} column "
        f"(kit/refs/nccl_tests/{ref.name})"
    )
    apart = other_mode(curve, ref, placement)
    if not low:
        said = f"within {1 - BELOW:.0%} of {where} at every size it moved 1 GB/s or more"
        said += " and the kit timed the same way" if apart else ""
        if high:
            said = f"no size below {BELOW:.0%} of {where} (of the sizes it moved 1 GB/s or more)"
    else:
        said = (
            f"below {BELOW:.0%} of {where} at {_sizes(low, BELOW)} (of the sizes where "
            "nccl-tests moved 1 GB/s or more; under that the figure is latency: see the time "
            "column)"
        )
    if high:  # above it by more than noise: the reason, which is the timing mode
        said += f"; above {ABOVE:.2f}x at {_sizes(high, ABOVE)}: {SPIN_HELD_WHY}"
    if apart:
        eager = ref.mode == "eager"
        said += (
            f"; {_span(apart)}, which the kit timed "
            f"{'as a CUDA graph' if eager else 'without a CUDA graph'}, "
            f"{'is' if len(apart) == 1 else 'are'} not held against this run, taken "
            f"{'without' if eager else 'with'} -G (another timing mode)"
        )
    return said


def _sizes(named: list[tuple[int, float]], edge: float) -> str:
    """ "1 MiB (0.55x), 256 KiB (0.946x)": two decimals, three where two would read as the
    edge itself ("below 95% ... (0.95x)")."""
    return ", ".join(
        f"{size_words(size)} ({ratio:.{3 if round(ratio, 2) == round(edge, 2) else 2}f}x)"
        for size, ratio in named
    )


def _span(sizes: list[int]) -> str:
    """ "8 KiB to 512 KiB (7 sizes)", or the one size."""
    if len(sizes) == 1:
        return size_words(sizes[0])
    return f"{size_words(sizes[0])} to {size_words(sizes[-1])} ({len(sizes)} sizes)"
