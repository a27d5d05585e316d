"""The report's silicon section: what the GPUs, their host links and their pairs can do, how far
that is from the datasheet, and where the bundle's other workloads sit against it.

Pure functions over the benchmarks (kit.report.analysis.grouping) and hardware.json. Reads the
copy_bandwidth and matmul_ceiling runs; every figure is the median over their finished runs
(cell by cell for the matrices). The datasheet figures come from kit.shared.gpu_specs, the table
the worker's MFU uses; the pair matrix's layout from the workload's own matrix module.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

from kit.model import Hardware, RunResult
from kit.model.hardware import Pcie
from kit.report.analysis.gpu_figures import (
    COPY_KEYS,
    ceilings,
    copy_values,
    hardware_of,
    outlier_pct,
    pair_values,
    silicon_runs,
)
from kit.report.analysis.gpu_figures import median as _median
from kit.report.analysis.model import Benchmark
from kit.report.analysis.summary import BenchSummary
from kit.report.facts.efficiency import link_share, mfu_basis
from kit.shared.gpu_specs import pcie_gbs, peak_flops, spec_for
from kit.stats import Summary, summarize
from kit.workloads.copy_bandwidth import matrix

MATRICES = [  # the pair matrices, in the order nvbandwidth lists its testcases
    "ce_one_way",
    "ce_both_ways",
    "sm_one_way",
    "sm_both_ways",
    "latency_us",
    "staged_one_way",
]


@dataclass
class Silicon:
    names: list[str] = field(default_factory=list)  # per GPU, as the runs read them
    host: list[dict[str, Any]] = field(default_factory=list)  # per GPU: bandwidths and datasheet
    plateau: list[dict[str, Any]] = field(default_factory=list)  # first GPU, by size
    matrices: list[dict[str, Any]] = field(default_factory=list)  # key, title, matrix, text
    ceilings: list[dict[str, Any]] = field(default_factory=list)  # per dtype
    placements: list[str] = field(default_factory=list)  # the other workloads against these
    against: dict[str, list[str]] = field(default_factory=dict)  # benchmark -> its placements
    notes: list[str] = field(default_factory=list)


def _share(value: float | None, figure: float | None) -> float | None:
    return value / figure if value is not None and figure else None


def _copy(s: Silicon, runs: list[RunResult], hardware: Hardware) -> None:
    datas = [r.data for r in runs]
    values = copy_values(runs)
    s.names = s.names or (datas[0].extra("names") or [])
    gpus = hardware_of(runs, hardware, len(values))
    for i, per_run in enumerate(values):
        cell = {k: _median(per_run[k]) for k in COPY_KEYS}
        name = s.names[i] if i < len(s.names) else None
        spec = spec_for(name)
        pcie = (gpus[i].pcie if gpus[i] else None) or Pcie()
        link = pcie_gbs(pcie.gen_current, pcie.width_current)
        hbm = spec.hbm_gbs if spec and spec.hbm_gbs else None
        traffic = 2 * cell["local_gbps"] if cell["local_gbps"] is not None else None
        s.host.append(
            {
                "gpu": i,
                **cell,
                "pcie_gbs": link,
                "pcie": f"gen {pcie.gen_current} x{pcie.width_current}" if link else None,
                "h2d_share": _share(cell["h2d_gbps"], link),
                "d2h_share": _share(cell["d2h_gbps"], link),
                "local_traffic_gbps": traffic,
                "hbm_gbs": hbm,
                "hbm_share": _share(traffic, hbm),
                "hbm_source": spec.source if hbm and spec else None,
            }
        )
    sizes = sorted({p["mib"] for d in datas for p in d.extra("plateau") or []})
    for mib in sizes:
        rows = [p for d in datas for p in d.extra("plateau") or [] if p["mib"] == mib]
        s.plateau.append(
            {"mib": mib}
            | {k: _median([p.get(k) for p in rows]) for k in ("h2d_gbps", "d2h_gbps", "local_gbps")}
        )
    pairs = [d.extra("pairs") for d in datas if d.extra("pairs")]
    for key in MATRICES:
        title = matrix.TITLES[key]
        cells = pair_values(runs, key)
        if cells:
            m = [[_median(c) for c in row] for row in cells]
            s.matrices.append(
                {"key": key, "title": title, "matrix": m, "text": matrix.render(title, m)}
            )
    if not pairs:
        s.notes.append("No GPU pair was measured (one GPU, or pairs turned off).")
    ce = next((m for m in s.matrices if m["key"] == "ce_one_way"), None)
    if ce and (values := matrix.off_diagonal(ce["matrix"])):
        share = link_share(statistics.median(values), hardware, "nvlink")
        if share:
            s.notes.append(
                f"GPU pairs, copy engine one way: median {statistics.median(values):.1f} GB/s, "
                f"{share['share']:.0%} of the NVLink datasheet figure per direction "
                f"({share['basis']})."
            )


def _matmul(s: Silicon, runs: list[RunResult]) -> None:
    datas = [r.data for r in runs]
    s.names = s.names or (datas[0].extra("gpus") or [])
    for c in ceilings(runs):
        dtype = c.dtype
        found = [d.extra("dtypes")[dtype] for d in datas if dtype in (d.extra("dtypes") or {})]
        together = [_median(v) for v in c.together]
        alone = [_median(v) for v in c.alone]
        median = _median(together)
        name = s.names[0] if s.names else None
        peak = peak_flops(name, dtype)
        flagged = sorted(
            {i for f in found for i in f.get("outliers_together") or []}
            | {i for f in found for i in f.get("outliers_alone") or []}
        )
        s.ceilings.append(
            {
                "dtype": dtype,
                "shape": c.shape_words,
                "median": median,
                "weakest": min(v for v in together if v is not None),
                "alone_median": _median(alone),
                "together": together,
                "alone": alone,
                "peak_tflops": peak[0] / 1e12 if peak else None,
                "peak_source": peak[1] if peak else None,
                "share": _share(median, peak[0] / 1e12 if peak else None),
                "outliers": flagged,
                "outlier_pct": outlier_pct(runs),
            }
        )
    skipped = datas[0].extra("skipped") or {}
    s.notes += [f"{d}: not measured ({why})." for d, why in skipped.items()]


def _placements(s: Silicon, benches: list[Benchmark]) -> None:
    """The training workloads' MFU against the measured ceiling of their dtype, and each
    collective's bus bandwidth (all-reduce's above all) against the measured pair bandwidth."""
    ceiling = {c["dtype"]: c for c in s.ceilings}
    for b in benches:
        if b.spec is None:
            continue
        if b.figures.placed == "mfu":
            for v in b.variants:
                bases = [x for r in v.ok if (x := mfu_basis(r))]
                if not bases:
                    continue
                mfu = statistics.median(x["mfu"] for x in bases)
                basis = bases[0]
                achieved = mfu * basis["peak_flops_per_gpu"] / 1e12
                c = ceiling.get(basis["dtype"])
                measured = (
                    f"{achieved / c['median']:.0%} of the {c['median']:.0f} TFLOP/s {basis['dtype']}"
                    " ceiling measured here (MFU against what this machine can actually do)"
                    if c and c["median"]
                    else f"no {basis['dtype']} ceiling was measured in this bundle"
                )
                s.placements.append(
                    f"{b.label}, {v.name}: {achieved:.0f} TFLOP/s per GPU, {mfu:.0%} of the "
                    f"datasheet's {basis['peak_flops_per_gpu'] / 1e12:g} TFLOP/s and {measured}."
                )
        elif b.figures.placed == "hbm":  # page 1 shows these beside the decode table too
            s.against[b.name] = _hbm(s, b)
            s.placements += s.against[b.name]
        elif b.figures.placed == "busbw":  # a collective: its bus bandwidth is per link
            pair = {m["key"]: matrix.off_diagonal(m["matrix"]) for m in s.matrices}
            one, both = pair.get("ce_one_way"), pair.get("ce_both_ways")
            for v in b.variants:
                row = (b.metrics.get("busbw_largest") or {}).get(v.name)
                if not one or row is None or row.summary is None or v.p2p_off:
                    continue
                busbw = row.summary.median
                text = (
                    f"{b.label}, {v.name}: bus bandwidth {busbw:.1f} GB/s at the largest size is "
                    f"{busbw / statistics.median(one):.0%} of the median GPU pair's copy-engine "
                    f"bandwidth one way ({statistics.median(one):.1f} GB/s)"
                )
                if both:
                    half = statistics.median(both) / 2
                    text += f" and {busbw / half:.0%} of its per-direction share both ways ({half:.1f} GB/s)"
                s.placements.append(text + ".")


def _gbs(x: float) -> str:
    """2,870 / 16.4 / 0.162: whole numbers from 100 GB/s, three digits below."""
    return f"{x:,.0f}" if x >= 100 else f"{x:.3g}"


def copy_share(s: Silicon, b: Benchmark, variant: str) -> tuple[Summary, float, float] | None:
    """A decode variant's batch-1 memory reads against the device-local copy traffic (read plus
    write) measured in this bundle, the HBM ceiling of this silicon rather than the datasheet's:
    (each run's share summarized, the median read GB/s, the copy traffic GB/s). One definition
    for page 1's decode table and the silicon section's sentence."""
    traffic = _median([h["local_traffic_gbps"] for h in s.host])
    row = (b.metrics.get("decode_read_gbps_b1") or {}).get(variant)
    if not traffic or row is None or row.summary is None or not row.values:
        return None
    return summarize([x / traffic for x in row.values]), row.summary.median, traffic


def _hbm(s: Silicon, b: Benchmark) -> list[str]:
    """The silicon section's sentence per decode variant (copy_share)."""
    out = []
    for v in b.variants:
        if (got := copy_share(s, b, v.name)) is not None:
            share, read, traffic = got
            out.append(
                f"{b.label}, {v.name}: a batch-1 decode step reads memory at {_gbs(read)} GB/s "
                "per GPU, "
                f"{share.median:.0%} of the {_gbs(traffic)} GB/s device-local copy traffic "
                "(read plus write) measured here."
            )
    return out


def add_copy_share(summary: BenchSummary, s: Silicon, b: Benchmark) -> None:
    """Page 1's decode table: copy_share under "batch-1 reads / datasheet HBM" ("/ copy
    here 84.1 %"), where this bundle measured its own copy (recipes/llm_decode.yaml runs hbm-copy).
    Under the datasheet's share, not a column of its own: the table is at the page's width."""
    page1 = b.spec.page1 if b.spec else ()
    heading = next((c.heading for c in page1 if c.metric == "hbm_share_b1"), None)
    for vs in summary.variants:
        cell = vs.beside.get(heading) if heading else None
        if cell is not None and (got := copy_share(s, b, vs.variant)) is not None:
            cell["under"] = {
                "words": "/ copy here",
                "median": got[0].median,
                "unit": "fraction",
                "wrap": True,  # the words may break: the table is at the page's width
            }


def silicon(benches: list[Benchmark], hardware: Hardware) -> Silicon | None:
    """The section's facts, or None when the bundle measured no silicon."""
    copy, mm = silicon_runs(benches, "copy"), silicon_runs(benches, "matmul")
    if not copy and not mm:
        return None
    s = Silicon()
    if any(r.device == "cpu" for r in copy + mm):
        s.notes.append(
            "These runs used the CPU: host memory copies and an fp32 matmul at smoke sizes test "
            "the method; no GPU, link or datasheet figure is measured here."
        )
    if copy:
        _copy(s, copy, hardware)
    if mm:
        _matmul(s, mm)
    _placements(s, benches)
    return s
