"""Page 1 of a comparison, for a choice between machines: per workload the measured ratio over
the baseline (at a common size: kit.report.common_size) with its interval, the ratio the
datasheets predict beside it (the figure that bounds the workload, from the metric catalog:
memory bandwidth, link bandwidth or dense FLOP/s) and all three datasheet ratios per GPU, the
geometric mean across workloads, and one plain sentence: which machine is faster for what, by how much, how
sure. Ratios are stated as "better" factors (over 1: this machine does more, or takes less); the
sentence states the larger over the smaller, so A against B and B against A read the same number,
and with fewer than kit.stats.acceptance.MIN_RUNS runs a side it is a screening that states no direction."""

from __future__ import annotations

import math
from typing import Any

from kit.report.machines import same_machine
from kit.shared import metrics as catalog
from kit.shared.gpu_specs import spec_for
from kit.stats import percent
from kit.stats.acceptance import MIN_RUNS

BOUND_WORDS = {
    "link": "NVLink bandwidth",
    "memory": "HBM bandwidth",
    "none": "no datasheet figure",
}


def bound_of(unit: str, metric: str = "") -> tuple[str, str]:
    """What bounds a workload's headline: the catalog's `bound` for the metric where it names
    one (HBM copies: memory bandwidth; matmul ceilings: that dtype's FLOP/s; host copies: no
    datasheet figure), else read from the unit (never the kind's name): a rate of bytes is held
    against the GPUs' link bandwidth, anything else against dense bf16 FLOP/s."""
    entry = catalog.metric(metric)
    what = (entry.bound if entry else "") or ("link" if unit.endswith("B/s") else "flops:bf16")
    if what.startswith("flops:"):
        return what, f"dense {what.split(':', 1)[1]} FLOP/s"
    return what, BOUND_WORDS.get(what, what)


def _datasheet(name: str | None, what: str) -> float | None:
    spec = spec_for(name)
    if spec is None or what == "none":
        return None
    if what.startswith("flops:"):
        return spec.peak_flops.get(what.split(":", 1)[1]) or None
    value = {"link": spec.nvlink_total_gbs, "memory": spec.hbm_gbs}.get(what, 0.0)
    return value or None


def _gpu_name(machine: Any) -> str | None:
    names = {g.name for g in machine.hardware.gpus if g.name}
    return names.pop() if len(names) == 1 else None


def predicted(unit: str, machine: Any, base: Any, metric: str = "") -> tuple[float | None, str]:
    """(the datasheet ratio machine / base for what bounds this workload, its words)."""
    what, words = bound_of(unit, metric)
    mine, theirs = _datasheet(_gpu_name(machine), what), _datasheet(_gpu_name(base), what)
    if not mine or not theirs:
        return None, words
    return mine / theirs, words


DATASHEET_LINE = (
    ("memory", "memory bandwidth"),
    ("flops:bf16", "dense bf16 FLOP/s"),
    ("link", "NVLink bandwidth"),
)


def datasheets(machine: Any, base: Any) -> list[dict[str, Any]]:
    """Per GPU, the three datasheet ratios a buyer weighs (machine / base), whatever ran: where
    the extra money shows. None where a side's model is not in the kit's table."""
    out = []
    for what, words in DATASHEET_LINE:
        mine, theirs = _datasheet(_gpu_name(machine), what), _datasheet(_gpu_name(base), what)
        out.append({"words": words, "ratio": mine / theirs if mine and theirs else None})
    return out


def screening(n_a: int, n_b: int) -> bool:
    """Fewer than MIN_RUNS runs on a side: no interval, so a ratio is a first look whose direction
    is not stated (one run a side read "1.08x worse" where the next run could read better)."""
    return min(n_a, n_b) < MIN_RUNS


def apart(factor: float) -> float:
    """A ratio as the larger over the smaller: the same number whichever side is the baseline."""
    return factor if factor >= 1 else 1 / factor


def screening_words(n_a: int, n_b: int, estimate: float) -> str:
    """A screening ratio's words: how many runs, how far apart, and no direction."""
    runs = "one run a side" if n_a == n_b == 1 else f"{n_a} and {n_b} runs"
    return (
        f"screening ({runs}, fewer than {MIN_RUNS} a side): {_times(apart(estimate))} apart, "
        "the larger over the smaller; no direction is stated"
    )


def choice(rows: list[Any], machines: list[Any], base: int) -> dict[str, Any]:
    """Per non-baseline machine: one line per workload (its headline metric, the first
    variant), the geometric mean of the measured factors and the sentence."""
    out = []
    for i, m in enumerate(machines):
        if i == base:
            continue
        lines, seen = [], set()
        for row in rows:
            if not row.headline or row.benchmark in seen:
                continue
            cell = row.cells[i]
            ratio = cell.get("ratio")
            seen.add(row.benchmark)
            if not ratio:
                why = cell.get("ratio_error") or "no ratio: a side has no finished run"
                lines.append(
                    {
                        "benchmark": row.benchmark,
                        "label": row.label,
                        "factor": None,
                        "why": why,
                        # a side never ran it: no failure, said in grey (compare_rows)
                        "absent": cell.get("absent") or row.cells[base].get("absent", False),
                    }
                )
                continue
            flip = not row.higher_is_better
            est, lo, hi = ratio["estimate"], ratio["ci_low"], ratio["ci_high"]
            factor = 1 / est if flip else est
            low, high = (1 / hi, 1 / lo) if flip else (lo, hi)
            pred, bound = predicted(row.unit, m, machines[base], row.metric)
            gpus, base_gpus = cell.get("gpus"), row.cells[base].get("gpus")
            if pred and row.rate and gpus and base_gpus and gpus != base_gpus:
                pred, bound = pred * gpus / base_gpus, f"{bound} x {gpus}/{base_gpus} GPUs"
            interval = bool(ratio.get("ci_available")) and bool(ratio.get("is_ci", True))
            lines.append(
                {
                    "benchmark": row.benchmark,
                    "variant": row.variant,
                    "label": row.label,
                    "factor": factor,
                    "apart": apart(factor),
                    "screening": screening(ratio["n_a"], ratio["n_b"]),
                    "low": low if ratio.get("ci_available") else None,
                    "high": high if ratio.get("ci_available") else None,
                    "sure": interval and not ratio.get("includes_one"),
                    "sentence": ratio["sentence"],
                    "predicted": pred,
                    "bound": bound,
                    "note": row.size_note,
                    # each side at its own price (kit compare --price): what a unit costs
                    "cost": cell.get("cost_per_million"),
                    "base_cost": row.cells[base].get("cost_per_million"),
                    "unit": row.unit.replace("/s", ""),
                }
            )
        for x in lines:  # a cost ratio is a direction too: none from a screening (issue 48)
            if x.get("cost") and x.get("base_cost"):
                r = x["cost"] / x["base_cost"]
                x["cost_ratio"], x["cost_apart"] = (None, apart(r)) if x["screening"] else (r, None)
        factors = [x["factor"] for x in lines if x["factor"]]
        gmean = math.exp(sum(math.log(f) for f in factors) / len(factors)) if factors else None
        one = same_machine(m.hardware, machines[base].hardware)
        sentence = _sentence(m.label, machines[base].label, lines, gmean)
        if one:  # two bundles of one machine: its runs differ, never its hardware
            sentence = f"The same machine (the same GPU UUIDs), two bundles: {sentence}"
        out.append(
            {
                "machine": m.label,
                "lines": lines,
                "geomean": gmean,
                "apart": apart(gmean) if gmean else None,
                "screening": any(x.get("screening") for x in lines),
                "datasheets": datasheets(m, machines[base]),
                "same_machine": one,
                "sentence": sentence,
            }
        )
    return {"baseline": machines[base].label, "machines": out}


def _sentence(mine: str, base: str, lines: list[dict[str, Any]], gmean: float | None) -> str:
    """One rule both ways: the machine ahead first and the larger over the smaller, so swapping
    the baseline swaps nothing but the order of the table's columns; a screening (fewer than
    MIN_RUNS runs a side on any workload) names no machine ahead."""
    measured = [x for x in lines if x["factor"]]
    if not measured or gmean is None:
        return f"No workload has a ratio between {mine} and {base}: nothing to choose on."
    n = len(measured)
    workloads = f"{n} workload{'s' if n > 1 else ''}"
    few = [x["benchmark"] for x in measured if x["screening"]]
    if few:
        return (
            f"Screening, no direction stated: {', '.join(few)} ran fewer than {MIN_RUNS} runs "
            f"a side, so no interval and no finding; {mine} and {base} are {_times(apart(gmean))} "
            f"apart (the larger over the smaller, geometric mean across {workloads}). Rerun "
            f"with --repeats {MIN_RUNS} or more for a direction with an interval."
        )
    ahead, behind = (mine, base) if gmean >= 1 else (base, mine)
    sure = [x for x in measured if x["sure"]]
    how_sure = (
        f"{len(sure)} of {n} ratio{'s' if n > 1 else ''} with a confidence interval that excludes 1"
    )

    def where(named: bool) -> str:
        """The workloads, each with its spread; the machine ahead only where one is stated."""
        if n == 1:  # the variant too: the other variants' rows may read otherwise
            return f"on {_one(measured[0])}"
        parts = (
            f"{_one(x)} {_times(x['apart'])} apart"
            + (f", {mine if x['factor'] >= 1 else base} ahead" if named else "")
            for x in sorted(measured, key=lambda x: x["benchmark"])
        )
        return f"across {workloads} (geometric mean; {'; '.join(parts)})"

    if not sure:  # every interval holds 1: a spread, not a direction (silicon, 2026-11-29)
        return (
            f"No measurable difference between {mine} and {base} {where(False)}: "
            + (
                f"none of the {n} ratios has a confidence interval that excludes 1"
                if n > 1
                else "the ratio's confidence interval holds 1"
            )
            + f"; they are {_times(apart(gmean))} apart, the larger over the smaller."
        )
    return f"{ahead} is {_times(apart(gmean))} better than {behind} {where(True)}; {how_sure}."


def _one(line: dict[str, Any]) -> str:
    """A workload as the sentence names it: its benchmark and the variant its line compares."""
    return f"{line['benchmark']} ({line['variant']})"


def _times(factor: float) -> str:
    """ "1.08x", or a percentage below 0.5% (as kit.stats words a ratio: "0.41%", not "1.00x";
    "under 0.01%", never "2e-05%")."""
    return f"{percent((factor - 1) * 100)}%" if factor < 1.005 else f"{factor:.2f}x"
