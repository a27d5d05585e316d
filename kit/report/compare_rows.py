"""The comparison's rows: per benchmark, variant and metric, each machine's median and interval,
its ratio over the baseline (unpaired: repeats on two machines have nothing in common), per GPU
and the scaling efficiency when the GPU counts differ, sharding named for memory, the cost at
each machine's price; and each machine's own P2P effect (paired). kit.report.compare assembles
the page from them."""

from __future__ import annotations

import dataclasses
import statistics
from dataclasses import dataclass, field
from typing import Any

from kit.io.errors import InputError
from kit.report import analysis
from kit.report.analysis.summary import ends
from kit.report.choice import screening, screening_words
from kit.report.common_size import SIZE_METRICS, common_sweep, run_sizes, value_at
from kit.report.facts.efficiency import cost_per_million, per_gpu, scaling_efficiency
from kit.report.facts.price import Price, parse_price
from kit.report.machines import Machine
from kit.shared import metrics as catalog
from kit.stats import Ratio, StatsError, summarize, unpaired_ratio
from kit.stats.acceptance import scale_mismatch, scale_of


def _scaled(r: Ratio, k: float) -> Ratio:
    """The ratio times a constant (GPU counts): per-GPU ratio with the same interval kind."""
    lo, hi, est = r.ci_low * k, r.ci_high * k, r.estimate * k
    includes = lo <= 1.0 <= hi if r.ci_available else est == 1.0
    return dataclasses.replace(r, estimate=est, ci_low=lo, ci_high=hi, includes_one=includes)


def _per_gpu_summary(s: dict[str, Any], gpus: int) -> dict[str, Any]:
    return {
        "median": per_gpu(s["median"], gpus),
        "ci_low": per_gpu(s["ci_low"], gpus),
        "ci_high": per_gpu(s["ci_high"], gpus),
        "label": s.get("label", ""),
        "n": s["n"],
    }


def _ratio_dict(r: Ratio, metric: str) -> dict[str, Any]:
    """The ratio and its sentence; with fewer than MIN_RUNS runs a side, a screening's words
    (how far apart, no direction: kit.report.choice.screening_words) instead of "faster"."""
    few = screening(r.n_a, r.n_b)
    sentence = (
        screening_words(r.n_a, r.n_b, r.estimate) if few else r.sentence(*catalog.words(metric))
    )
    return {**r.to_dict(), "sentence": sentence, "screening": few}


def _summary_dict(values: list[float], unit: str) -> dict[str, Any] | None:
    """A cell's summary as compare.json holds it, with its interval's words as the single
    report prints them: the ends (a fraction in percent, a significant zero kept) and the label
    naming the centre the interval bounds."""
    try:
        s = summarize(values)
    except StatsError:
        return None
    return {**s.to_dict(), "ends": ends(s, unit), "centred_label": s.centred_label()}


@dataclass
class MetricRow:
    benchmark: str
    variant: str
    metric: str
    unit: str
    higher_is_better: bool
    cells: list[dict[str, Any]] = field(default_factory=list)  # one per machine
    label: str = ""
    headline: bool = False  # the workload's headline metric (the report's verdict metric)
    rate: bool = False  # work per second over all GPUs: per-GPU figures and cost apply
    notes: list[str] = field(default_factory=list)  # sharding sentences (memory per GPU)
    size_note: str = ""  # the sweeps differ: the size they are compared at (kit.report.common_size)


def _samples(m: Machine) -> dict[tuple[str, str, str], tuple[analysis.MetricRow, int]]:
    """(benchmark, variant, metric) -> (the report's row, failed runs of that variant)."""
    out = {}
    for b in m.benches:
        for name, per_variant in b.metrics.items():
            for v in b.variants:
                row = per_variant.get(v.name)
                if row is not None:
                    out[(b.name, v.name, name)] = (row, len(v.failed))
    return out


def unlike(m: Machine, base: Machine) -> str | None:
    """Why no factor over the baseline can be stated for a machine: runs on another device kind
    (a CPU against GPUs) or at another scale (a smoke run, its sizes shrunk to check the method,
    against a full one) do not measure the same thing. The tables still show both sides."""
    mine, theirs = m.results, base.results
    if mine.device != theirs.device:
        return (
            f"no ratio: {mine.device} runs against the baseline's {theirs.device} runs "
            "are not like for like"
        )
    scale = scale_mismatch(scale_of(theirs.smoke), scale_of(mine.smoke))
    if scale:  # the rule acceptance judges by (kit.stats.acceptance.mismatches)
        return f"no ratio against the baseline: {scale}"
    return None


@dataclass
class _Across:
    """What every cell of a comparison needs: the machines, the baseline's index, each machine's
    samples, which benchmarks and variants each ran, and each machine's price per GPU-hour."""

    machines: list[Machine]
    base: int
    per: list[dict[tuple[str, str, str], tuple[analysis.MetricRow, int]]]
    ran: list[set[tuple[str, str]]]
    prices: list[Price | None]


def workload_rows(
    machines: list[Machine],
    base: int,
    price_per_gpu_hour: Price | float | None = None,
    prices: dict[int, Price] | None = None,
) -> list[MetricRow]:
    """Each benchmark, variant and metric: per machine median, interval, n, ratio to baseline;
    for rates also per GPU, the scaling efficiency and the cost at that machine's price (one
    price for all, or `prices` per machine); sharding named for memory."""
    per = [_samples(m) for m in machines]
    ran = [{(b.name, v.name) for b in m.benches for v in b.variants} for m in machines]
    across = _Across(
        machines, base, per, ran, machine_prices(len(machines), price_per_gpu_hour, prices)
    )
    same: dict[tuple[str, str], list[analysis.Benchmark]] = {}
    for m in machines:
        for b in m.benches:
            same.setdefault((b.name, b.kind), []).append(b)
    headline = {key: analysis.shared_verdict_metric(bs) for key, bs in same.items()}
    kinds = {b.name: b.kind for m in machines for b in m.benches}
    keys: dict[tuple[str, str, str], analysis.MetricRow] = {}
    for data in [per[base], *per[:base], *per[base + 1 :]]:  # the baseline's order first
        for key, (row, _) in data.items():
            keys.setdefault(key, row)
    rows: list[MetricRow] = []
    for (bench, variant, name), first in keys.items():
        row = MetricRow(
            bench,
            variant,
            name,
            first.unit,
            first.higher_is_better,
            label=first.label,
            headline=headline.get((bench, kinds.get(bench, ""))) == name,
            rate=first.per_gpu,
        )
        sweep = _common_sweep(machines, bench, variant) if name in SIZE_METRICS else None
        if sweep:  # said once, under the metric's name in the tables
            row.size_note = sweep["sentence"]
        base_values = _values(per[base], bench, variant, name, machines[base], sweep)
        row.cells = [_cell(across, i, row, sweep, base_values) for i in range(len(machines))]
        rows.append(row)
    return rows


def _cell(
    across: _Across,
    i: int,
    row: MetricRow,
    sweep: dict[str, Any] | None,
    base_values: list[float],
) -> dict[str, Any]:
    """Machine i's cell of a row: its summary, failed runs, per-GPU figure and cost, and its
    ratio to the baseline's values (read once per row) or why there is none."""
    bench, variant, name = row.benchmark, row.variant, row.metric
    m, data = across.machines[i], across.per[i]
    values = _values(data, bench, variant, name, m, sweep)
    failed = next((f for (b, v, _), (_, f) in data.items() if (b, v) == (bench, variant)), 0)
    gpus = m.gpus_used(bench)
    summary = _summary_dict(values, row.unit) if values else None
    cell: dict[str, Any] = {
        "summary": summary,
        "failed": failed,
        # the bundle's recipe never ran this benchmark and variant: not a failure
        "absent": (bench, variant) not in across.ran[i],
        "baseline": i == across.base,
        "ratio": None,
        "gpus": gpus,
    }
    price = across.prices[i]
    if row.rate and summary and gpus:
        cell["per_gpu"] = _per_gpu_summary(summary, gpus)
        if price is not None and summary["median"] > 0:
            cell["cost_per_million"] = cost_per_million(summary["median"], gpus, price.amount)
    if i != across.base:
        _ratio_to_baseline(across, i, row, cell, values, base_values, sweep)
    return cell


def _ratio_to_baseline(
    across: _Across,
    i: int,
    row: MetricRow,
    cell: dict[str, Any],
    values: list[float],
    base_values: list[float],
    sweep: dict[str, Any] | None,
) -> None:
    """The cell's ratio to the baseline (and, where the GPU counts differ, the per-GPU ratio and
    scaling), or `ratio_error`: why there is none."""
    bench, variant, name = row.benchmark, row.variant, row.metric
    base, m = across.machines[across.base], across.machines[i]
    why_not = unlike(m, base)
    if why_not:
        cell["ratio_error"] = why_not
    elif cell["absent"] or (bench, variant) not in across.ran[across.base]:
        who = m.label if cell["absent"] else f"the baseline {base.label}"
        cell["ratio_error"] = f"no ratio: {who} did not run {bench} {variant}"
    elif sweep and not sweep["sizes"]:
        cell["ratio_error"] = f"no ratio: {sweep['sentence']}"
    elif values and base_values:
        try:
            ratio = unpaired_ratio(values, base_values, row.higher_is_better)
        except StatsError:
            cell["ratio_error"] = "no ratio: a side has zero or negative values"
            return
        cell["ratio"] = _ratio_dict(ratio, name)
        gpus, base_gpus = cell["gpus"], base.gpus_used(bench)
        if gpus and base_gpus and gpus != base_gpus:
            base_median = float(statistics.median(base_values))
            _scale_facts(row, cell, ratio, base_median, m, base, bench)


def machine_prices(
    count: int, price_per_gpu_hour: Price | float | None, prices: dict[int, Price] | None
) -> list[Price | None]:
    """Each machine's price per GPU-hour: its own (--price), else the one for all."""
    if prices and price_per_gpu_hour is not None:
        raise InputError("--price and --price-per-gpu-hour: give one price for all or one each")
    one = parse_price(price_per_gpu_hour)
    return [(prices or {}).get(i, one) for i in range(count)]


def _scale_facts(
    row: MetricRow,
    cell: dict[str, Any],
    ratio: Ratio,
    base_median: float,
    m: Machine,
    ref: Machine,
    bench: str,
) -> None:
    """GPU counts differ: the per-GPU ratio and scaling efficiency of a rate; for memory under a
    sharding parallelism, the sentence that says the difference is the sharding."""
    g, gb = m.gpus_used(bench), ref.gpus_used(bench)
    if row.rate:
        per = _scaled(ratio, gb / g)  # per-GPU figure of m over the baseline's
        cell["per_gpu_ratio"] = _ratio_dict(per, row.metric)
        if not m.gpu_models or m.gpu_models != ref.gpu_models:
            return  # scaling is one model's across counts: an H200 pair over one H100 is not
        mine, theirs = cell["summary"]["median"], base_median
        if g > gb:
            eff, lo, hi = scaling_efficiency(mine, g, theirs, gb), per.ci_low, per.ci_high
        else:
            eff, lo, hi = scaling_efficiency(theirs, gb, mine, g), 1 / per.ci_high, 1 / per.ci_low
        interval = f"; {per.label} {lo:.0%} to {hi:.0%}" if per.ci_available else ""
        cell["scaling"] = {
            "efficiency": eff,
            "from_gpus": min(g, gb),
            "to_gpus": max(g, gb),
            "sentence": (
                f"scaling efficiency {eff:.1%} from {min(g, gb)} to {max(g, gb)} GPUs (per-GPU "
                f"{row.label} of the {max(g, gb)}-GPU run over the {min(g, gb)}-GPU run's"
                f"{interval})"
            ),
        }
        return
    how = m.sharding(bench)
    if how and "mem" in row.metric and ratio.estimate != 1.0:
        fewer = ratio.estimate < 1.0
        factor = 1 / ratio.estimate if fewer else ratio.estimate
        sentence = (
            f"{row.label} {factor:.2f}x {'lower' if fewer else 'higher'}: {how} shards over {g} "
            f"GPUs instead of {gb}; not a hardware difference"
        )
        cell["sharding"] = sentence
        row.notes.append(f"{m.label}, {row.benchmark} {row.variant}: {sentence}.")


def _values(
    data: dict[Any, Any],
    bench: str,
    variant: str,
    metric: str,
    machine: Machine | None = None,
    sweep: dict[str, Any] | None = None,
) -> list[float]:
    """The metric's per-run values; with `sweep` (the machines' sweeps differ), recomputed at
    the sizes every machine ran (kit.report.common_size)."""
    entry = data.get((bench, variant, metric))
    if not entry:
        return []
    if not sweep or not sweep["sizes"] or machine is None:
        return list(entry[0].values)
    runs = _runs(machine, bench, variant)
    return [v for r in runs if (v := value_at(r, metric, sweep["sizes"])) is not None]


def _runs(m: Machine, bench: str, variant: str) -> list[Any]:
    b = next((x for x in m.benches if x.name == bench), None)
    block = next((v for v in b.variants if v.name == variant), None) if b else None
    return list(block.ok) if block else []


def _common_sweep(machines: list[Machine], bench: str, variant: str) -> dict[str, Any] | None:
    return common_sweep([run_sizes(_runs(m, bench, variant)) for m in machines])


def p2p_effects(machines: list[Machine]) -> list[dict[str, Any]]:
    """Per machine and benchmark: its report's P2P verdict on the headline metric (paired)."""
    out = []
    for m in machines:
        for b in m.benches:
            metric = analysis.verdict_metric(b)
            v = next((x for x in b.verdicts if x.metric == metric and x.p2p), None)
            if v is None:
                continue
            row = next(iter((b.metrics.get(metric) or {}).values()), None)
            entry: dict[str, Any] = {
                "machine": m.label,
                "index": m.index,
                "benchmark": b.name,
                "metric": metric,
                "label": catalog.label(metric),
                "unit": row.unit if row else "",
                "pairs": v.pairs,
                "ratio": _ratio_dict(v.ratio, metric) if v.ratio is not None else None,
            }
            if v.ratio is None:
                entry["error"] = v.sentence
                entry["withheld"] = v.withheld  # e.g. no data moved between GPUs: no verdict
            out.append(entry)
    return out
