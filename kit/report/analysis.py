"""What the report says, computed from a bundle's runs: tables, verdicts, warnings.

Pure functions over plain dicts (results.json, hardware.json), so every sentence of the report can
be tested without rendering. A run that did not finish contributes no number anywhere: it is
counted, named and shown as failed.

Training results are read from `data["step_times_s"]` (every step, warm-up included) and
`data["warmup_steps"]` (how many leading steps are warm-up); all-reduce results from
`data["sizes"]` (kit/worker/allreduce.py).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from kit.stats import StatsError, is_noisy, paired_ratio, summarize
from kit.worker.nccl_log import contradiction

CV_THRESHOLD = 0.03
# A training run whose median step time differs this much between the first and second half
# of its timed window had not settled (on 2x H200 every steady run stayed within 2%).
DRIFT_THRESHOLD = 0.05
DRIFT_MIN_STEPS = 8
# Metrics whose "median over repeats" means nothing; shown elsewhere (#wrong as a count).
NOT_SUMMARIZED = {"wrong_total"}
# The verdict metric per kind: all-reduce busbw at the largest size, training throughput.
VERDICT_METRIC = {"allreduce": "busbw_largest"}
DEFAULT_VERDICT_METRIC = "throughput"
METRIC_LABELS = {
    "busbw_peak": "bus bandwidth, peak",
    "busbw_largest": "bus bandwidth at the largest size",
    "time_small_us": "time of the smallest message",
    "throughput": "throughput",
    "step_time_s": "step time (median)",
    "peak_mem_gib": "peak GPU memory",
    "mfu": "model FLOPs utilisation",
}
KIND_LABELS = {
    "allreduce": "all-reduce",
    "gpt2_ddp": "GPT-2 124M DDP",
    "llama_lora_fsdp": "Llama-3.1-8B LoRA FSDP",
    "resnet_ddp": "ResNet DDP",
}


def is_ok(run: dict[str, Any]) -> bool:
    return run.get("status") == "ok"


def p2p_disabled(run: dict[str, Any]) -> bool:
    return str((run.get("env") or {}).get("NCCL_P2P_DISABLE", "0")).strip() in ("1", "true")


@dataclass
class MetricRow:
    """One metric of one variant over its finished repeats (summary None: nothing finished)."""

    name: str
    label: str
    unit: str
    higher_is_better: bool
    values: list[float]
    summary: Any = None  # kit.stats.Summary
    noisy: bool = False


@dataclass
class VariantBlock:
    name: str
    description: str
    runs: list[dict[str, Any]]
    ok: list[dict[str, Any]]
    failed: list[dict[str, Any]]
    missing: int = 0  # repeats planned but never run


@dataclass
class Verdict:
    """A sentence comparing two variants on one metric, or why it cannot be said."""

    benchmark: str
    metric: str
    sentence: str
    ratio: Any = None  # kit.stats.Ratio
    pairs: int = 0
    failed: bool = False


@dataclass
class Benchmark:
    name: str
    kind: str
    label: str
    params: dict[str, Any]
    variants: list[VariantBlock]
    metrics: dict[str, dict[str, MetricRow]] = field(default_factory=dict)  # metric -> variant
    verdicts: list[Verdict] = field(default_factory=list)
    wrong_total: int = 0
    expect: dict[str, Any] = field(default_factory=dict)

    @property
    def runs(self) -> list[dict[str, Any]]:
        return [r for v in self.variants for r in v.runs]


def benchmark_label(name: str, kind: str) -> str:
    base = KIND_LABELS.get(kind, kind)
    return base if name in (kind, base) else f"{name} ({base})"


def _variant_info(recipe: dict[str, Any], runs: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """Variant names in recipe order (then any the runs add), with their descriptions."""
    out: dict[str, str] = {}
    for v in recipe.get("variants") or []:
        if isinstance(v, dict) and v.get("name"):
            out[v["name"]] = v.get("description") or ""
        elif isinstance(v, str):
            out[v] = ""
    for r in runs:
        out.setdefault(r.get("variant", "?"), "")
    return list(out.items())


def build_benchmarks(results: dict[str, Any], recipe: dict[str, Any]) -> list[Benchmark]:
    """Group runs by benchmark and variant; summarize each metric over the finished repeats."""
    runs = results.get("runs") or []
    repeats = int(results.get("repeats") or recipe.get("repeats") or 0)
    declared = [b for b in recipe.get("benchmarks") or [] if isinstance(b, dict)]
    names = [b.get("name") or b.get("kind") for b in declared]
    for r in runs:
        if r.get("benchmark") not in names:
            names.append(r.get("benchmark"))
    out = []
    for name in names:
        decl = next((b for b in declared if (b.get("name") or b.get("kind")) == name), {})
        mine = [r for r in runs if r.get("benchmark") == name]
        kind = decl.get("kind") or (mine[0].get("kind") if mine else "?")
        blocks = []
        for vname, desc in _variant_info(recipe, mine):
            vr = sorted(
                (r for r in mine if r.get("variant") == vname), key=lambda r: r.get("repeat", 0)
            )
            ok = [r for r in vr if is_ok(r)]
            blocks.append(
                VariantBlock(
                    vname,
                    desc,
                    vr,
                    ok,
                    [r for r in vr if not is_ok(r)],
                    missing=max(0, repeats - len(vr)),
                )
            )
        same_kind = sum(1 for b in declared if b.get("kind") == kind) > 1
        label = benchmark_label(name, kind) if same_kind else KIND_LABELS.get(kind, name)
        bench = Benchmark(
            name, kind, label, decl.get("params") or {}, blocks, expect=decl.get("expect") or {}
        )
        _summarize_metrics(bench)
        bench.wrong_total = sum(_wrong(r) for r in mine if is_ok(r))
        bench.verdicts = verdicts(bench)
        out.append(bench)
    return out


def _wrong(run: dict[str, Any]) -> int:
    rows = (run.get("data") or {}).get("sizes") or []
    if rows:
        return int(sum(int(r.get("wrong") or 0) for r in rows))
    m = (run.get("metrics") or {}).get("wrong_total")
    return int(m["value"]) if m else 0


def _summarize_metrics(bench: Benchmark) -> None:
    order: list[str] = []
    info: dict[str, dict[str, Any]] = {}
    for v in bench.variants:
        for r in v.ok:
            for name, m in (r.get("metrics") or {}).items():
                if name in NOT_SUMMARIZED or not isinstance(m, dict) or "value" not in m:
                    continue
                if name not in info:
                    order.append(name)
                    info[name] = m
    for name in order:
        unit, hib = info[name].get("unit", ""), bool(info[name].get("higher_is_better", True))
        per_variant = {}
        for v in bench.variants:
            values = [
                float(r["metrics"][name]["value"]) for r in v.ok if name in (r.get("metrics") or {})
            ]
            row = MetricRow(
                name, METRIC_LABELS.get(name, name.replace("_", " ")), unit, hib, values
            )
            if values:
                try:
                    row.summary = summarize(values)
                    row.noisy = is_noisy(values, CV_THRESHOLD)
                except StatsError:
                    row.summary = None
            per_variant[v.name] = row
        bench.metrics[name] = per_variant


def _pairs(a: VariantBlock, b: VariantBlock, metric: str) -> tuple[list[float], list[float]]:
    """Values of repeat i of a and repeat i of b, for every i where both finished."""
    bv = {r.get("repeat"): r for r in b.ok if metric in (r.get("metrics") or {})}
    xs, ys = [], []
    for r in a.ok:
        other = bv.get(r.get("repeat"))
        if other is not None and metric in (r.get("metrics") or {}):
            xs.append(float(r["metrics"][metric]["value"]))
            ys.append(float(other["metrics"][metric]["value"]))
    return xs, ys


def compare(bench: Benchmark, a: VariantBlock, b: VariantBlock, metric: str) -> Verdict:
    """Paired ratio a / b on one metric, as a sentence ("1.37x faster (95% CI ...)")."""
    rows = bench.metrics.get(metric) or {}
    hib = next((r.higher_is_better for r in rows.values()), True)
    label = METRIC_LABELS.get(metric, metric)
    p2p_pair = a.name == "p2p" and b.name == "no-p2p"
    missing = [v.name for v in (a, b) if not v.ok]
    if missing:
        return Verdict(
            bench.name,
            metric,
            f"{bench.label}: no comparison of {a.name} and "
            f"{b.name}: every run of {' and '.join(missing)} failed.",
            failed=True,
        )
    xs, ys = _pairs(a, b, metric)
    if not xs:
        return Verdict(
            bench.name,
            metric,
            f"{bench.label}: no repeat finished for both "
            f"{a.name} and {b.name}, so there is no paired comparison.",
            failed=True,
        )
    try:
        ratio = paired_ratio(xs, ys, higher_is_better=hib)
    except StatsError as exc:
        return Verdict(bench.name, metric, f"{bench.label}: no comparison ({exc}).", failed=True)
    text = ratio.sentence()
    n = f"{len(xs)} paired repeat{'s' if len(xs) > 1 else ''}"
    if text.startswith("no "):
        if p2p_pair:
            sentence = f"Peer-to-peer makes {text} to {bench.label} in {label} ({n})."
        else:
            sentence = f"{bench.label}, {a.name} against {b.name}: {text} in {label} ({n})."
    elif p2p_pair:
        sentence = f"Peer-to-peer makes {bench.label} {text} in {label} ({n})."
    else:
        sentence = f"{bench.label} is {text} with {a.name} than with {b.name}, in {label} ({n})."
    if all(r.get("backend") == "gloo" for r in a.ok + b.ok):
        sentence = (
            f"{bench.label} on the CPU (gloo, where NCCL settings have no effect), "
            f"{a.name} against {b.name}: {text} in {label} ({n}); both variants ran "
            "the same code, so this difference is noise."
        )
    return Verdict(bench.name, metric, sentence, ratio, len(xs))


def verdict_metric(bench: Benchmark) -> str:
    """The metric a benchmark is judged by (busbw for all-reduce, throughput for training)."""
    metric = VERDICT_METRIC.get(bench.kind, DEFAULT_VERDICT_METRIC)
    return metric if metric in bench.metrics else next(iter(bench.metrics), metric)


def verdicts(bench: Benchmark) -> list[Verdict]:
    """The headline comparison: p2p (or the first variant) against each other variant."""
    metric = verdict_metric(bench)
    if len(bench.variants) < 2:
        return []
    ref = next((v for v in bench.variants if v.name == "p2p"), bench.variants[0])
    out = []
    for other in bench.variants:
        if other is not ref:
            out.append(compare(bench, ref, other, metric))
    if bench.kind == "allreduce" and "time_small_us" in bench.metrics:
        for other in bench.variants:
            if other is not ref and ref.ok and other.ok:
                v = compare(bench, ref, other, "time_small_us")
                if not v.failed:
                    out.append(v)
    return out


def headline(bench: Benchmark) -> list[dict[str, Any]]:
    """Per variant: the verdict metric's median with its interval, or failed."""
    metric = verdict_metric(bench)
    rows = bench.metrics.get(metric) or {}
    out = []
    for v in bench.variants:
        row = rows.get(v.name)
        out.append(
            {
                "variant": v.name,
                "row": row,
                "metric": metric,
                "failed": row is None or row.summary is None,
                "n_ok": len(v.ok),
                "n": len(v.runs) + v.missing,
            }
        )
    return out


# --- all-reduce ------------------------------------------------------------------------------


def allreduce_curves(bench: Benchmark) -> dict[str, Any]:
    """Per variant and size: busbw and time, median over repeats of each repeat's median, and
    the min..max of those per-repeat medians (the band in the plot)."""
    sizes: list[int] = []
    curves: dict[str, dict[int, dict[str, Any]]] = {}
    for v in bench.variants:
        per: dict[int, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        for r in v.ok:
            for row in (r.get("data") or {}).get("sizes") or []:
                b = int(row["bytes"])
                if b not in sizes:
                    sizes.append(b)
                per[b]["busbw"].append(statistics.median(row["busbw_gbps"]))
                per[b]["time"].append(statistics.median(row["time_us"]))
                per[b]["algbw"].append(statistics.median(row.get("algbw_gbps") or [0.0]))
                per[b]["wrong"].append(int(row.get("wrong") or 0))
                per[b]["timing"].append(row.get("timing") or "")
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
            }
            for b, d in per.items()
        }
    return {"sizes": sorted(sizes), "curves": curves}


# --- training --------------------------------------------------------------------------------


def step_traces(bench: Benchmark) -> list[dict[str, Any]]:
    """Every step time of every finished repeat, with its warm-up count."""
    out = []
    for v in bench.variants:
        for r in v.ok:
            data = r.get("data") or {}
            steps = data.get("step_times_s")
            if not steps:
                continue
            out.append(
                {
                    "variant": v.name,
                    "repeat": r.get("repeat", 0),
                    "run_id": r["run_id"],
                    "steps": [float(s) for s in steps],
                    "warmup": int(data.get("warmup_steps") or 0),
                }
            )
    return out


def window_drift(steps: list[float], warmup: int) -> tuple[float, float] | None:
    """Median step time (s) of the first and of the second half of a run's timed window.

    None when there are fewer than DRIFT_MIN_STEPS timed steps (halves too short to say).
    """
    timed = steps[warmup:]
    if len(timed) < DRIFT_MIN_STEPS:
        return None
    half = len(timed) // 2
    return statistics.median(timed[:half]), statistics.median(timed[half:])


def _ms(seconds: float) -> str:
    ms = seconds * 1e3
    return f"{ms:.3g}" if ms < 100 else f"{ms:,.0f}"


def drifting(bench: Benchmark) -> list[str]:
    """The finished runs whose step time moved more than DRIFT_THRESHOLD inside the window."""
    out = []
    for trace in step_traces(bench):
        halves = window_drift(trace["steps"], trace["warmup"])
        if halves is None or halves[0] <= 0:
            continue
        change = halves[1] / halves[0] - 1
        if abs(change) > DRIFT_THRESHOLD:
            first, second = (_ms(t) for t in halves)
            out.append(
                f"{bench.label} {trace['variant']} r{trace['repeat']}: "
                f"{first} → {second} ms ({change:+.0%})"
            )
    return out


def telemetry_series(bench: Benchmark) -> list[dict[str, Any]]:
    """Telemetry samples of every finished run that has them, per GPU."""
    out = []
    for v in bench.variants:
        for r in v.ok:
            tel = r.get("telemetry") or {}
            if not tel.get("available"):
                continue
            for g in tel.get("gpus") or []:
                s = g.get("samples") or {}
                if s.get("t_s"):
                    out.append(
                        {
                            "variant": v.name,
                            "run_id": r["run_id"],
                            "gpu": g.get("index"),
                            "samples": s,
                        }
                    )
    return out


# --- trust -----------------------------------------------------------------------------------


def nccl_contradiction(run: dict[str, Any]) -> str | None:
    """One line when the NCCL transport recorded for the run contradicts its variant.

    Judged again from the recorded transports by the same rule the run was judged by, so a
    bundle edited by hand or made by an older kit cannot carry a stale verdict into the report.
    """
    nccl = run.get("nccl")
    counts = nccl.get("transports") if isinstance(nccl, dict) else None
    if not isinstance(counts, dict) or not counts:
        return None
    single_node = len(run.get("nodes") or []) < 2
    why = contradiction(counts, p2p_disabled(run), single_node)
    return f"{run['run_id']}: {why}" if why else None


def transports(bench: Benchmark) -> dict[str, list[str]]:
    """Per variant: the NCCL transports its finished runs used, from NCCL's own log."""
    out: dict[str, list[str]] = {}
    for v in bench.variants:
        seen: set[str] = set()
        for r in v.ok:
            t = (r.get("nccl") or {}).get("transports")
            seen.update(t if isinstance(t, (dict, list)) else [])
        if seen:
            out[v.name] = sorted(str(x) for x in seen)
    return out


@dataclass
class Finding:
    level: str  # "error" (a number is missing or wrong) | "warn" (a number is less sure)
    title: str
    detail: str = ""


def findings(results: dict[str, Any], benches: list[Benchmark]) -> list[Finding]:
    """Everything that affects how far the numbers can be trusted, worst first."""
    out: list[Finding] = []
    runs = results.get("runs") or []
    failed = [r for r in runs if not is_ok(r)]
    if failed:
        names = ", ".join(f"{r.get('run_id')} ({r.get('status')})" for r in failed)
        out.append(
            Finding(
                "error",
                f"{len(failed)} of {len(runs)} runs did not finish; they contribute no number",
                names,
            )
        )
    planned = results.get("planned_runs")
    if isinstance(planned, int) and planned > len(runs):
        gone = planned - len(runs)
        out.append(
            Finding(
                "error",
                f"{gone} planned run{'s' if gone > 1 else ''} never ran",
                f"the bundle's status is {results.get('status')!r}",
            )
        )
    elif results.get("status") not in (None, "complete"):
        out.append(Finding("error", f"the bundle is {results.get('status')}, not complete"))
    wrong = [(b.label, b.wrong_total) for b in benches if b.wrong_total]
    for label, n in wrong:
        out.append(
            Finding(
                "error",
                f"{label}: {n} wrong elements (#wrong > 0)",
                "the all-reduce returned wrong sums: its bandwidth is not trustworthy",
            )
        )
    contradictions = [c for r in runs if is_ok(r) and (c := nccl_contradiction(r))]
    if contradictions:
        out.append(
            Finding(
                "error", "the NCCL transport contradicts the variant", "; ".join(contradictions)
            )
        )
    unproven = [
        r["run_id"]
        for r in runs
        if is_ok(r)
        and isinstance(r.get("nccl"), dict)
        and str(r["nccl"].get("verdict") or "").startswith("NCCL printed no connection lines")
    ]
    if unproven:
        out.append(
            Finding(
                "warn",
                "the NCCL transport was not recorded: NCCL printed no connection lines",
                ", ".join(unproven),
            )
        )
    if results.get("smoke"):
        out.append(
            Finding(
                "warn",
                "smoke scale: sizes were shrunk to check the method",
                "these numbers do not measure the hardware",
            )
        )
    if results.get("device") == "cpu":
        out.append(
            Finding(
                "warn",
                "ran on the CPU (gloo), not on GPUs",
                "nothing here describes GPU or NVLink performance",
            )
        )
    if not results.get("pinned"):
        out.append(
            Finding(
                "warn",
                "unpinned environment: the host's own Python packages",
                "another machine may not have the same versions; use the docker "
                "runtime for a pinned image",
            )
        )
    throttled = []
    for r in runs:
        tel = r.get("telemetry") or {}
        if is_ok(r) and tel.get("throttled"):
            seen = ", ".join(tel.get("throttle_reasons_seen") or []) or "slowdown"
            throttled.append(f"{r['run_id']} ({seen})")
    if throttled:
        were = "run was" if len(throttled) == 1 else "runs were"
        out.append(
            Finding("warn", f"{len(throttled)} {were} throttled while busy", ", ".join(throttled))
        )
    noisy = [
        f"{b.label} {v} {row.label} (CV {row.summary.cv:.1%})"
        for b in benches
        for rows in b.metrics.values()
        for v, row in rows.items()
        if row.noisy and row.summary is not None and row.summary.cv is not None
    ]
    if noisy:
        out.append(
            Finding(
                "warn",
                f"noisy results: coefficient of variation over {CV_THRESHOLD:.0%}",
                "; ".join(noisy),
            )
        )
    drift = [d for b in benches for d in drifting(b)]
    if drift:
        out.append(
            Finding(
                "warn",
                "not at steady state: the step time changed by more than "
                f"{DRIFT_THRESHOLD:.0%} between the two halves of the timed window",
                "; ".join(drift) + ". More warm-up steps or a longer window would measure "
                "the settled pace.",
            )
        )
    for f in results.get("preflight") or []:
        level = "error" if f.get("level") == "error" else "warn"
        out.append(Finding(level, f"preflight {f.get('check')}: {f.get('message')}"))
    return out


def expectations(bench: Benchmark) -> list[dict[str, Any]]:
    """The recipe's `expect:` references against the first variant's median (p2p by default)."""
    out = []
    ref = next((v for v in bench.variants if v.name == "p2p"), None) or (
        bench.variants[0] if bench.variants else None
    )
    for metric, exp in (bench.expect or {}).items():
        if not isinstance(exp, dict) or "value" not in exp:
            continue
        row = (bench.metrics.get(metric) or {}).get(ref.name) if ref else None
        tol = float(exp.get("tolerance") or 0.0)
        value = float(exp["value"])
        measured = row.summary.median if row is not None and row.summary is not None else None
        if measured is None:
            verdict = "failed: no finished run"
        else:
            hib = row.higher_is_better
            low_ok = measured >= value * (1 - tol)
            high_ok = measured <= value * (1 + tol)
            verdict = (
                "within tolerance"
                if low_ok and high_ok
                else (
                    "better than the reference"
                    if (hib and not high_ok) or (not hib and not low_ok)
                    else "WORSE than the reference"
                )
            )
        out.append(
            {
                "metric": metric,
                "label": METRIC_LABELS.get(metric, metric),
                "value": value,
                "unit": exp.get("unit") or (row.unit if row else ""),
                "tolerance": tol,
                "variant": ref.name if ref else "-",
                "measured": measured,
                "verdict": verdict,
            }
        )
    return out
