"""Page 1's buyer's summary: per benchmark and variant, the figures a buyer asks for.

Throughput in total and per GPU, energy per unit of work (kit.report.analysis.energy), share
of peak (MFU against a named peak, bus bandwidth against the link's spec figure), the reference
with its source, power capping sized, and cost per 1M units when a price is given.
Every number comes from kit.report.facts (the one place that computes them) over the finished runs.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

from kit.model import Hardware, RunResult
from kit.refs.published import for_kind, place, run_conditions
from kit.report.analysis.energy import Energy, Power, recorded_energy, window_energy
from kit.report.analysis.model import Benchmark, VariantBlock
from kit.report.analysis.sweeps import below_nccl_tests, plateau_words
from kit.report.analysis.trust import transports
from kit.report.analysis.verdicts import expectations, verdict_metric
from kit.report.facts.efficiency import (
    cost_per_million,
    link_share,
    mfu_basis,
)
from kit.report.facts.price import Price, parse_price
from kit.report.facts.window import POWER_CAP_REASON
from kit.shared import p2p
from kit.stats import Summary
from kit.stats import summarize as summarize_values
from kit.workloads.base import TIMED_WINDOW

LOGGING_ONLY = {"NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE"}
SETTING_PREFIXES = ("NCCL_", "NVSHMEM_", "TORCH_SYMM_MEM_", "TORCH_NCCL_", "CUDA_DEVICE_MAX_")


@dataclass
class VariantSummary:
    variant: str
    definition: str
    n_ok: int
    n: int
    gpus: int | None
    metric_label: str
    unit: str
    median: float | None
    per_gpu: float | None = None
    interval: str = ""
    ends: str = ""  # the interval's ends alone, for a table that names its kind once
    interval_kind: str = ""  # "95% t-interval of the geometric mean, n=3"
    energy: Energy | None = None
    energy_note: str = ""  # why there is no energy figure, where there is none
    power: Power | None = None
    mfu: str = ""  # "26% MFU, bf16"
    link: str = ""  # "73% of the NVLink raw rate (450 GB/s)"
    peak_basis: str = ""  # what the share divides by, and its source
    cost_per_million: float | None = None
    transports: list[str] = field(default_factory=list)
    settings: list[str] = field(default_factory=list)
    plateau: str = ""  # sweeps: whether the headline size sits on the bandwidth plateau
    below_reference: str = ""  # sweeps: the sizes where the kit reads below nccl-tests
    beside: dict[str, dict[str, Any]] = field(default_factory=dict)  # label -> the spec's page1


@dataclass
class BenchSummary:
    name: str
    label: str
    kind: str
    ran: str
    variants: list[VariantSummary]
    references: list[dict[str, Any]]
    common_settings: list[str]
    published: list[dict[str, Any]] = field(default_factory=list)
    published_note: str = ""
    terms: list[tuple[str, str]] = field(default_factory=list)  # words page 1 uses, explained
    beside: list[str] = field(default_factory=list)  # the labels of the page1 metrics shown


def beside(bench: Benchmark, variant: str) -> dict[str, dict[str, Any]]:
    """The metrics the workload shows beside its headline on page 1 (WorkloadSpec.page1: decode's
    batch-1 time per output token and tokens/s), by page 1's heading: median, unit, interval
    words, and the figure said under it (`under`: words, median, unit) where the column has one."""
    out: dict[str, dict[str, Any]] = {}
    for col in bench.spec.page1 if bench.spec else ():
        row = (bench.metrics.get(col.metric) or {}).get(variant)
        if row is None or row.summary is None:
            continue
        s = row.summary
        heading = _heading(col.heading, bench)
        out[heading] = {"median": s.median, "unit": row.unit, "interval": ends(s, row.unit)}
        low = (bench.metrics.get(col.under) or {}).get(variant) if col.under else None
        if low is not None and low.summary is not None:
            out[heading]["under"] = {
                "words": col.under_words,
                "median": low.summary.median,
                "unit": low.unit,
            }
    tpot = (bench.metrics.get("tpot_median_ms") or {}).get(variant)
    b1 = (bench.metrics.get("decode_tokens_per_s_b1") or {}).get(variant)
    if tpot is not None and tpot.values and all(x > 0 for x in tpot.values):
        # what one user sees (the report review, 1): data parallel's batch-1 tokens/s adds up
        # independent streams, tensor parallel's is one stream; 1/TPOT compares them. Where
        # they agree (one model copy on one GPU) the column would print one figure twice.
        s = summarize_values([1000 / x for x in tpot.values])
        same = b1 is not None and b1.summary is not None and _within(s.median, b1.summary.median)
        if not same:
            out[SEQUENCE] = {"median": s.median, "unit": "tokens/s", "interval": s.ends()}
    return out


def _heading(heading: str, bench: Benchmark) -> str:
    """A page-1 heading with the parameters it names filled in from the runs' record ("largest
    batch that fits, {fit_seq_len:,} tokens each"); the words before the first one where a run
    recorded none of them."""
    if "{" not in heading:
        return heading
    recorded = next((r.data.params for r in bench.runs if r.data and r.data.params), None) or {}
    try:
        return heading.format_map({**recorded, **bench.params})
    except (KeyError, ValueError, TypeError, IndexError):
        return heading.split("{")[0].rstrip(" ,")


def ends(s: Summary, unit: str) -> str:
    """The interval's ends as the table prints its median: a fraction in percent ("73.7 to
    74.1%"), never "0.737 to 0.741" under "73.9 %"."""
    if unit != "fraction" or not s.ci_available or s.ci_low is None or s.ci_high is None:
        return s.ends()
    digits = 1 if min(abs(s.ci_low), abs(s.ci_high)) >= 0.1 else 2
    return f"{s.ci_low * 100:.{digits}f} to {s.ci_high * 100:.{digits}f}%"


def _within(a: float, b: float, share: float = 0.005) -> bool:
    return abs(a - b) <= share * max(abs(a), abs(b))


SEQUENCE = "one sequence's tokens/s, batch 1 (1 / time per token)"


def variant_definition(v: VariantBlock) -> str:
    """One sentence defining the variant: the kit's own for p2p/no-p2p, else the recipe's."""
    builtin = p2p.VARIANTS.get(v.name)
    text = builtin[1] if builtin else v.description or "as the recipe defines it"
    if v.ok and all(r.backend == "gloo" for r in v.ok):
        text += " Here the runs used gloo on the CPU, where NCCL settings have no effect."
    return text


def settings(runs: list[RunResult]) -> list[str]:
    """NCCL and multicast settings the runs set (K=V), logging switches left out."""
    seen: dict[str, str] = {}
    for r in runs:
        for k, val in r.env.items():
            if k.startswith(SETTING_PREFIXES) and k not in LOGGING_ONLY:
                seen[k] = str(val)
    return [f"{k}={v}" for k, v in sorted(seen.items())]


def _sweep_link(vs: VariantSummary, hardware: Hardware) -> None:
    """Bus bandwidth against the spec figure of the link the variant's transport used (none on
    one GPU: a collective there crosses no link, its busbw is 0 by definition)."""
    if vs.median is None or vs.gpus == 1:
        return
    used = " ".join(vs.transports)
    nvlinks = any(x.active for g in hardware.gpus for x in g.nvlinks or [])
    link = "nvlink" if "P2P" in used and nvlinks else "pcie" if hardware.gpus else None
    if link == "pcie" and "SHM" in used and "P2P" not in used:
        return  # staged through host memory: no single link's rate bounds it, so no share
    share = link_share(vs.median, hardware, link) if link else None
    if share is None:
        return
    name = "NVLink" if link == "nvlink" else "PCIe"
    vs.link = f"{share['share']:.0%} of the {name} raw rate ({share['figure_gbs']:,.0f} GB/s)"
    vs.peak_basis = (
        f"bus bandwidth against the raw signalling rate, {share['basis']}; what a collective "
        "can reach is below it (protocol overhead), so 100% is not the expectation"
    )


def summarize_bench(
    bench: Benchmark,
    hardware: Hardware,
    ran: str,
    price_per_gpu_hour: Price | float | None = None,
    smoke: bool = False,
) -> BenchSummary:
    metric = verdict_metric(bench)
    rows = bench.metrics.get(metric) or {}
    used = transports(bench)
    out = []
    all_settings = [settings(v.ok or v.runs) for v in bench.variants]
    common = (
        [s for s in all_settings[0] if all(s in o for o in all_settings)] if all_settings else []
    )
    for v, mine in zip(bench.variants, all_settings, strict=True):
        row = rows.get(v.name)
        s = row.summary if row is not None else None
        gpus = v.gpus
        vs = VariantSummary(
            variant=v.name,
            definition=variant_definition(v),
            n_ok=len(v.ok),
            n=len(v.runs) + v.missing,
            gpus=gpus,
            metric_label=row.label if row is not None else metric,
            unit=row.unit if row is not None else "",
            median=s.median if s is not None else None,
            interval=s.words() if s is not None else "",
            ends=s.ends() if s is not None else "",
            interval_kind=s.centred_label() if s is not None else "",
            transports=used.get(v.name, []),
            settings=[x for x in mine if x not in common],
            beside=beside(bench, v.name),
        )
        if bench.figures.page1 == "link":
            if not smoke:
                _sweep_link(vs, hardware)
                vs.plateau = plateau_words(v.ok)
                vs.below_reference = below_nccl_tests(bench, v, gpus, hardware)
        elif s is not None:
            if row.per_gpu and gpus and all(r.device != "cpu" for r in v.ok):
                vs.per_gpu = s.median / gpus
                price = parse_price(price_per_gpu_hour)
                if price is not None and s.median > 0:
                    vs.cost_per_million = cost_per_million(s.median, gpus, price.amount)
            if not smoke:
                window = bench.spec.window if bench.spec else TIMED_WINDOW
                energy, note, vs.power = window_energy(v.ok, hardware, window)
                vs.energy = energy or recorded_energy(bench, v.name)
                vs.energy_note = "" if vs.energy else note
                basis = [b for r in v.ok if (b := mfu_basis(r))]
                if basis:
                    mfu = statistics.median(b["mfu"] for b in basis)
                    b0 = basis[0]
                    vs.mfu = f"{mfu:.{0 if mfu >= 0.1 else 1}%} MFU, {b0['dtype']}"
                    vs.peak_basis = (
                        f"MFU divides by {b0['peak_flops_per_gpu'] / 1e12:g} TFLOP/s "
                        f"{b0['dtype']} dense per GPU ({b0['source']})"
                    )
        out.append(vs)
    refs = [] if smoke else expectations(bench, hardware)
    summary = BenchSummary(bench.name, bench.label, bench.kind, ran, out, refs, common)
    summary.terms = terms_used(out)
    summary.beside = list(dict.fromkeys(label for vs in out for label in vs.beside))
    if not smoke:
        summary.published, summary.published_note = against_published(bench, hardware)
    return summary


TERMS = {
    "P2P": "NCCL moved the data directly from GPU to GPU (peer-to-peer over NVLink or PCIe)",
    "P2P/CUMEM": "peer-to-peer, with buffers from CUDA's virtual memory API (cuMem) that the "
    "peer GPU maps directly",
    "P2P/IPC": "peer-to-peer, with buffers shared between processes through CUDA IPC handles",
    "SHM": "NCCL staged the data through host shared memory: GPU to host, host to GPU",
    "NET": "NCCL went through the network stack (sockets or InfiniBand), even inside one host",
    POWER_CAP_REASON: "NVML's clock reason that the driver lowered the clocks to hold the "
    "board's power limit; normal under full load, and the figure is what that limit allows",
}
"""Plain words for the transport and clock-reason names page 1 prints."""


def terms_used(variants: list[VariantSummary]) -> list[tuple[str, str]]:
    """(term, words) for every TERMS name page 1 shows for these variants."""
    seen = {t for v in variants for t in v.transports}
    seen |= {k for v in variants if v.power for k in v.power.throttle_share}
    return [(t, w) for t, w in TERMS.items() if t in seen]


def against_published(bench: Benchmark, hardware: Hardware) -> tuple[list[dict[str, Any]], str]:
    """The first variant with P2P on (else the first) against every published figure of the
    same workload (kit/refs/published.json), with the conditions that differ; and, for
    collectives run with NVLink SHARP off, what that means for published HGX figures."""
    block = next((v for v in bench.variants if v.p2p_off is False), None) or (
        bench.variants[0] if bench.variants else None
    )
    if block is None or not block.ok:
        return [], ""
    mine = run_conditions(block.ok, hardware)
    if mine.size_bytes is not None and mine.gpus == 1:  # a collective's sweep on one rank
        return [], (
            "On one GPU a collective moves no data between GPUs: its bus bandwidth is 0 by "
            "definition (the factor 2(n-1)/n is 0), so it is not placed against published "
            "machines; its time per call is NCCL's own overhead here."
        )
    rows = []
    for fig in for_kind(bench.kind):
        row = (bench.metrics.get(fig.metric) or {}).get(block.name)
        if row is None or row.summary is None:
            continue
        placed = place(fig, row.summary.median, mine.gpus, mine)
        if not placed["like_for_like"]:  # a ratio across differing conditions is no finding
            placed["ratio"] = None
        placed["variant"] = block.name
        placed["metric_label"] = row.label
        formula = block.ok[0].data.extra("flops_formula")
        placed["flops_here"] = (
            f"here MFU counts {formula}"
            if fig.kind == bench.kind and "MFU" in fig.conditions and formula
            else ""
        )
        rows.append(placed)
    note = ""
    if rows and mine.nvls is False and any(r["figure"]["nvls"] for r in rows):
        note = (
            "NVLink SHARP (NVLS) was off in every run (NCCL_NVLS_ENABLE=0). On NVSwitch "
            "systems NCCL's all-reduce uses it by default and reduces inside the switch, so "
            "published HGX all-reduce figures taken with it (about 480 GB/s busbw on 8x H100) "
            "are not the wire bandwidth and are not reachable with it off; the ring figure "
            "(about 370 GB/s) is the closer comparison."
        )
    return rows, note


def variant_defs(summaries: list[BenchSummary]) -> list[VariantSummary]:
    """Every variant any benchmark ran, each once, as the first benchmark that ran it defines it
    (a benchmark's `variants` may hold fewer than the recipe's)."""
    first: dict[str, VariantSummary] = {}
    for summary in summaries:
        for v in summary.variants:
            first.setdefault(v.variant, v)
    return list(first.values())
