"""The metric catalog: every number a workload reports, defined once.

The worker writes a metric by its entry here (unit and direction come with it), and the report,
compare, verdicts, known machines and adaptive repeats read the same entry: no unit, direction,
per-GPU rule or comparative word is written anywhere else. A new metric is one entry.

The interval rule (which interval a median or a ratio of n runs gets) and the noise threshold
live here too, with the words the Method page prints for them. Standard library only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

CONFIDENCE = 0.95
CV_THRESHOLD = 0.03
"""A metric is noisy above this coefficient of variation (stdev / |mean|) unless the recipe
sets its own cv_threshold: adaptive repeats and the report's withheld verdicts use it."""


@dataclass(frozen=True)
class IntervalRule:
    """Up to `up_to` runs (pairs, for a paired ratio; None: any more), intervals are `kind`."""

    up_to: int | None
    kind: Literal["none", "range", "t", "bootstrap"]
    words: str  # the Method page's words; {first}, {last}: the counts it covers; {pct}: CONFIDENCE


INTERVALS = (
    IntervalRule(1, "none", "one run has no interval"),
    IntervalRule(
        2,
        "range",
        'two runs give their <b>range</b> ("range of 2 runs"), which is not a confidence interval',
    ),
    IntervalRule(
        5,
        "t",
        '{first} to {last} runs give a {pct} t-interval on the logarithms ("{pct} t-interval, n=3")',
    ),
    IntervalRule(
        None,
        "bootstrap",
        "{first} or more a {pct} bootstrap interval of the median (fixed seed, so a "
        "bundle always renders the same numbers)",
    ),
)
"""Why: a t-interval with one degree of freedom is 12.7 standard errors wide and a bootstrap of
two values is their range, so two runs get the range, named as such; from 3 to 5 the percentile
bootstrap is the range again and covers far less than 95%, while a t-interval on the logarithms
(timings and ratios are positive and multiplicative) is valid; from 6 the bootstrap of the
median needs no normality assumption."""


def interval_rule(n: int) -> str:
    """The kind of interval n runs (or pairs) get, by INTERVALS."""
    return next(r.kind for r in INTERVALS if r.up_to is None or n <= r.up_to)


def interval_words() -> str:
    """The interval rule in the report's words, from INTERVALS (the Method page prints it)."""
    out, first = [], 1
    for r in INTERVALS:
        out.append(r.words.format(first=first, last=r.up_to, pct=f"{CONFIDENCE * 100:g}%"))
        first = (r.up_to or first) + 1
    return "; ".join(out)


WORK = ("items", "images", "samples", "tokens")
"""The units of work a training workload counts (its worker's `work`; "items" when unnamed)."""


@dataclass(frozen=True)
class Metric:
    """One number a workload reports.

    unit: "{work}/s" for a rate of the workload's unit of work (tokens, images, samples).
    per_gpu: work summed over all GPUs, so it is also given per GPU (and priced) when machines
    with different GPU counts meet; bus bandwidth is already normalised for the count.
    aggregate: "median" (summarized over repeats with an interval) or "sum" (a count that is
    totalled, such as wrong elements).
    not_per_gpu: for a metric that is a rate of the whole job and must not be divided per GPU
    (bus bandwidth: nccl-tests' algbw x its n-dependent factor, a bus rate), the few words page
    1 prints where the per-GPU column would be, so nobody divides it.
    better/worse: the words of a ratio ("1.3x faster").
    bound: the datasheet figure a comparison of two machines predicts its ratio from
    (kit.report.choice): "link", "memory" (HBM bandwidth: a decode step reads every weight, an
    HBM copy), "flops:<dtype>", "none" (no datasheet figure: PCIe and the host); "": from the
    unit (a rate of bytes: the links; anything else: dense bf16 FLOP/s).
    signed: the value can be below zero (none so far: rates, times, sizes, counts and fractions
    cannot); a bundle recording a negative value of any other is refused (kit.model.consistency).
    """

    name: str
    label: str
    unit: str
    higher_is_better: bool = True
    per_gpu: bool = False
    aggregate: Literal["median", "sum"] = "median"
    better: str = "better"
    worse: str = "worse"
    not_per_gpu: str = ""
    bound: str = ""
    signed: bool = False

    def unit_for(self, work: str = "") -> str:
        return self.unit.replace("{work}", work or "items")

    def units(self) -> tuple[str, ...]:
        """Every unit this metric can be recorded in (a rate of work: one per kind of work)."""
        if "{work}" not in self.unit:
            return (self.unit,)
        return tuple(self.unit_for(work) for work in WORK)

    def record(self, value: float, work: str = "") -> dict[str, Any]:
        """The metric as result.json holds it (kit.worker.records.MetricRecord)."""
        return {
            "value": value,
            "unit": self.unit_for(work),
            "higher_is_better": self.higher_is_better,
        }

    @property
    def direction(self) -> str:
        return "higher is better" if self.higher_is_better else "lower is better"


_FAST = {"better": "faster", "worse": "slower"}
_ENERGY: dict[str, Any] = {
    "unit": "J",
    "higher_is_better": False,
    "better": "lower",
    "worse": "higher",
    "bound": "none",
}
_BUSBW = "not divided per GPU: busbw is a bus rate (nccl-tests' algbw x 2(n-1)/n)"

CATALOG: dict[str, Metric] = {
    m.name: m
    for m in (
        Metric(
            "busbw_largest",
            "bus bandwidth at the largest size",
            "GB/s",
            not_per_gpu=_BUSBW,
            **_FAST,
        ),
        Metric("busbw_peak", "bus bandwidth, peak", "GB/s", not_per_gpu=_BUSBW, **_FAST),
        Metric("time_small_us", "time of the smallest message", "us", False, **_FAST),
        Metric("wrong_total", "wrong elements (#wrong)", "elements", False, aggregate="sum"),
        Metric("throughput", "throughput", "{work}/s", per_gpu=True, **_FAST),
        Metric(
            "throughput_window",
            "throughput over the whole window",
            "{work}/s",
            per_gpu=True,
            **_FAST,
        ),
        Metric("step_time_s", "step time (median)", "s", False, **_FAST),
        Metric("peak_mem_gib", "peak GPU memory", "GiB", False, better="lower", worse="higher"),
        Metric("mfu", "model FLOPs utilisation", "fraction"),
        Metric("tokens_per_s", "tokens per second", "tokens/s", per_gpu=True),
        # LLM decode (kit/workloads/llm_decode): throughput at the recipe's largest batch,
        # latency and memory reads at batch 1, the largest batch whose KV cache fits
        Metric(
            "decode_tokens_per_s",
            "decode throughput (largest batch timed)",
            "tokens/s",
            per_gpu=True,
            **_FAST,
            bound="memory",
        ),
        Metric(
            "decode_tokens_per_s_b1",
            "decode throughput at batch 1",
            "tokens/s",
            per_gpu=True,
            **_FAST,
            bound="memory",
        ),
        Metric(
            "prefill_tokens_per_s",
            "prefill throughput (largest batch timed)",
            "tokens/s",
            per_gpu=True,
            **_FAST,
        ),
        Metric(
            "tpot_median_ms",
            "time per output token at batch 1 (median)",
            "ms",
            False,
            **_FAST,
            bound="memory",
        ),
        Metric(
            "tpot_p90_ms",
            "time per output token at batch 1 (p90)",
            "ms",
            False,
            **_FAST,
            bound="memory",
        ),
        Metric(
            "tpot_local_ms_b1",
            "time per output token at batch 1 without the all-reduces (tensor parallel)",
            "ms",
            False,
            **_FAST,
            bound="memory",
        ),
        Metric(
            "tp_comm_ms_b1",
            "tensor-parallel communication per output token at batch 1",
            "ms",
            False,
            **_FAST,
            bound="link",
        ),
        Metric(
            "max_batch_fit",
            "largest batch whose KV cache fits",
            "sequences",
            better="larger",
            worse="smaller",
            bound="none",
        ),
        Metric(
            "decode_read_gbps_b1",
            "memory read rate of a batch-1 decode step (per GPU)",
            "GB/s",
            **_FAST,
            bound="memory",
        ),
        Metric(
            "hbm_share_b1",
            "batch-1 decode reads, share of datasheet HBM",
            "fraction",
            better="higher",
            worse="lower",
            bound="none",
        ),
        Metric("j_per_token_b1", "energy per output token at batch 1 (GPU boards)", **_ENERGY),
        Metric(
            "j_per_token",
            "energy per output token at the largest batch timed (GPU boards)",
            **_ENERGY,
        ),
        # copy bandwidth (nvbandwidth's testcases): the weakest GPU or pair, never summed
        Metric(
            "device_local_gbps",
            "device-local copy (weakest GPU)",
            "GB/s",
            bound="memory",
            **_FAST,
        ),
        Metric(
            "h2d_gbps", "host to device, pinned, CE (weakest GPU)", "GB/s", bound="none", **_FAST
        ),
        Metric(
            "d2h_gbps", "device to host, pinned, CE (weakest GPU)", "GB/s", bound="none", **_FAST
        ),
        Metric("pair_ce_one_way_gbps", "GPU pair CE one way (weakest pair)", "GB/s", **_FAST),
        Metric("pair_ce_both_ways_gbps", "GPU pair CE both ways (weakest pair)", "GB/s", **_FAST),
        Metric("pair_sm_one_way_gbps", "GPU pair SM one way (weakest pair)", "GB/s", **_FAST),
        Metric("pair_sm_both_ways_gbps", "GPU pair SM both ways (weakest pair)", "GB/s", **_FAST),
        Metric(
            "pair_staged_one_way_gbps",
            "GPU pair staged through host (weakest)",
            "GB/s",
            bound="none",
            **_FAST,
        ),
        Metric("pair_latency_us", "GPU pair copy latency (slowest pair)", "us", False, **_FAST),
        # matmul ceilings: per GPU (the median GPU or the weakest), so never summed over GPUs
        *(
            Metric(
                f"tflops_{d}{suffix}",
                f"{d} matmul ceiling ({words})",
                "TFLOP/s",
                bound=f"flops:{d}",
                **_FAST,
            )
            for d in ("bf16", "fp16", "tf32", "fp8", "fp32")
            for suffix, words in (
                ("", "median GPU, all at once"),
                ("_weakest", "weakest GPU, all at once"),
                ("_alone", "median GPU, each alone"),
            )
        ),
    )
}


def metric(name: str) -> Metric | None:
    """The catalog's entry, None for a metric this kit does not know (a bundle from another)."""
    return CATALOG.get(name)


def record(name: str, value: float, work: str = "") -> dict[str, Any]:
    """What the worker writes for a catalog metric: value, unit and direction by its entry."""
    return CATALOG[name].record(value, work)


def label(name: str) -> str:
    m = CATALOG.get(name)
    return m.label if m else name.replace("_", " ")


def higher_is_better(name: str, recorded: Any = True) -> bool:
    """The catalog's direction; for a metric it does not know, what the run recorded."""
    m = CATALOG.get(name)
    return m.higher_is_better if m else bool(recorded)


def per_gpu(name: str) -> bool:
    m = CATALOG.get(name)
    return bool(m and m.per_gpu)


def not_per_gpu(name: str) -> str:
    """Words for a metric not to be divided per GPU (bus bandwidth: a bus rate); "" for any other."""
    m = CATALOG.get(name)
    return m.not_per_gpu if m else ""


def words(name: str) -> tuple[str, str]:
    """A ratio's words for the metric: ("faster", "slower"), ("lower", "higher"), ..."""
    m = CATALOG.get(name)
    return (m.better, m.worse) if m else ("better", "worse")


def figure(value: float) -> str:
    """A figure written one way everywhere, on the terminal and on the report's pages (its
    `num` filter): 14,230 / 343.2 / 28.82 / 0.0288 / 0.0000888; never e-notation ("1.342e+04"
    on the console, "8.88e-05" in an appendix: the report review, 12)."""
    if value == 0:
        return "0"
    a = abs(value)
    if a >= 1000:
        return f"{value:,.0f}"
    if a >= 1:
        return f"{value:.4g}"
    if a >= 1e-4:
        return f"{value:.3g}"
    return f"{value:.{2 - math.floor(math.log10(a))}f}".rstrip("0")
