"""Statistics for repeated benchmark runs: medians, intervals, ratios (their spread and the
adaptive repeats: kit.stats.spread).

Why these choices:
- The median, not the mean: a benchmark repeat that hit a slow node or a noisy neighbour should
  not move the headline number much.
- One rule for the interval, by the number of runs n (pairs, for a paired ratio): the table
  kit.shared.metrics.INTERVALS (none, the range, a t-interval on the logarithms, a bootstrap
  interval of the median), with its reasons; the Method page prints it. The t-interval bounds
  the geometric mean, which sits beside the median for the narrow spread of repeats; the
  bootstrap is scipy.stats.bootstrap, BCa, or percentile where BCa breaks down on tied data.
  Each Summary and Ratio carries `ci_kind` and a `label` for the report to print, and `is_ci`:
  whether the interval is a confidence interval at all (a range is not).
- A fixed random seed: the same bundle always renders the same report.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from functools import partial
from typing import Any

import numpy as np

from kit.shared.metrics import CONFIDENCE, figure
from kit.stats.intervals import (
    N_RESAMPLES,
    StatsError,
    bootstrap_interval,
    choose_interval,
    interval_kind,
    interval_label,
    median_of,
    n_words,
    ratio_of_medians,
    t_interval,
    welch_log_interval,
)
from kit.stats.spread import clean, coefficient_of_variation_of


@dataclass(frozen=True)
class Summary:
    """One metric over repeats, with an interval chosen by the module's rule on n.

    `ci_method` is "BCa", "percentile", "t" (on logs; "t-linear" for data with a value <= 0),
    "range" (n == 2) or "none" (n == 1: the interval is (x, x) and `ci_available` is False).
    `ci_kind` is "bootstrap", "t", "range" or "none"; `is_ci` says whether (`ci_low`,
    `ci_high`) is a confidence interval with `confidence`; `label` says what it is in words
    ("95% t-interval, n=3", "range of 2 runs"). `stdev` is the sample standard deviation
    (ddof=1); `stdev` and `cv` are None where undefined (n == 1, or a mean of 0 for `cv`).
    """

    n: int
    median: float
    ci_low: float
    ci_high: float
    ci_available: bool
    ci_method: str
    confidence: float
    mean: float
    stdev: float | None
    cv: float | None
    min: float
    max: float
    ci_kind: str = "bootstrap"
    is_ci: bool = True
    label: str = ""
    centre: str = ""  # what the interval is an interval of: "median", "geometric mean", "mean"
    centre_value: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def words(self, unit: str = "") -> str:
        """The interval with the centre it belongs to, e.g. "95% t-interval of the geometric
        mean 13,992, n=3: 13,640 to 14,353 tokens/s": a t-interval on the logs bounds the
        geometric mean, not the median printed beside it. Digits are added until the ends
        differ in print when they differ ("1.01 to 1.01" would hide the spread)."""
        if not self.ci_available:
            return self.label
        return f"{self.centred_label(with_value=True)}: {self.ends(unit)}"

    def ends(self, unit: str = "") -> str:
        """The interval's ends alone ("13,640 to 14,353 tokens/s"), for a table that names the
        interval once; the label where there is none."""
        if not self.ci_available:
            return self.label
        unit = f" {unit}" if unit else ""
        for digits in (3, 4, 5, 6):
            lo, hi = _num(self.ci_low, digits), _num(self.ci_high, digits)
            if lo != hi:
                return f"{lo} to {hi}{unit}"
        # every run read the same (to six digits): the ends print as the median beside them
        return f"{figure(self.ci_low)} to {figure(self.ci_high)}{unit}"

    def centred_label(self, with_value: bool = False) -> str:
        """The label with the centre the interval belongs to ("95% t-interval of the geometric
        mean, n=3"; with its value: "... geometric mean 13,992, n=3")."""
        if not self.centre or self.centre_value is None or self.ci_kind == "range":
            return self.label
        of = f"{self.centre} {_num(self.centre_value)}" if with_value else self.centre
        return self.label.replace("t-interval", f"t-interval of the {of}", 1).replace(
            "bootstrap CI", f"bootstrap CI of the {of}", 1
        )


def percent(p: float) -> str:
    """A small percentage in two significant digits, never in e-notation ("2e-05%" read as a
    typo in the report review, 12): under a hundredth of a percent it is said as such."""
    return "under 0.01" if p < 0.005 else f"{p:.2g}"  # 0.00999 reads 0.01


def _num(x: float, digits: int = 3) -> str:
    """Whole numbers from 10^(digits-1) up (with thousands separators), else `digits`
    significant digits, a trailing zero kept ("0.109 to 0.110", never "0.109 to 0.11")."""
    if abs(x) >= 10 ** (digits - 1):
        return f"{x:,.0f}"
    return f"{x:#.{digits}g}".rstrip(".")


@dataclass(frozen=True)
class Ratio:
    """A ratio a / b with an interval (the module's rule on n), and how to say it in words.

    `higher_is_better` is about the metric (True for throughput, False for times); it decides
    whether a ratio above 1 reads as "faster" or "slower". `includes_one` is True when the
    interval includes 1.0 or there is no interval (one pair): the data cannot show a difference.
    `ci_kind`, `is_ci` and `label` as in Summary; a range (2 pairs) is never called a CI.
    """

    estimate: float
    ci_low: float
    ci_high: float
    ci_available: bool
    ci_method: str
    confidence: float
    n_a: int
    n_b: int
    paired: bool
    higher_is_better: bool
    includes_one: bool
    ci_kind: str = "bootstrap"
    is_ci: bool = True
    label: str = ""

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["sentence"] = self.sentence()
        return d

    def sentence(self, better: str = "faster", worse: str = "slower") -> str:
        """E.g. "1.37x faster (95% CI 1.34 to 1.40; t-interval, n=3)", "1.20x slower (range of
        2 runs 1.11 to 1.31, not a confidence interval)", or "no measurable difference (...)".

        A ratio below 1 is stated as its inverse ("0.80" of the throughput is "1.25x slower"),
        so the factor is always >= 1 and the interval is inverted with it.
        """
        if self.ci_available and self.includes_one:
            est, lo, hi = _fmt(self.estimate, self.ci_low, self.ci_high)
            return f"no measurable difference (ratio {est}, {self._interval_words(lo, hi)})"
        samples = (
            "one sample per side"
            if self.n_a == self.n_b == 1
            else f"{self.n_a} and {self.n_b} samples"
        )
        if not self.ci_available and self.estimate == 1.0:
            return f"no difference (ratio 1.00, {samples}, no interval)"
        # the side of 1 comes from the interval: it lies wholly on one side here
        above = self.ci_low > 1.0 if self.ci_available else self.estimate > 1.0
        word = better if above == self.higher_is_better else worse
        if above:
            factor, lo, hi = self.estimate, self.ci_low, self.ci_high
        else:
            factor, lo, hi = 1.0 / self.estimate, 1.0 / self.ci_high, 1.0 / self.ci_low
        factor_s, lo_s, hi_s = _fmt(factor, lo, hi)
        # below 0.5% a factor needs more than two decimals ("1.0001x"): say it as a percentage,
        # and its interval too (a percentage beside a factor's interval read as two scales)
        small = factor < 1.005
        lead = f"{percent((factor - 1) * 100)}% {word}" if small else f"{factor_s}x {word}"
        if not self.ci_available:
            ratio = f"ratio {factor_s}, " if small else ""
            return f"{lead} ({ratio}{samples}, no interval)"
        if small:
            lo_s, hi_s = (f"{percent((x - 1) * 100)}%" for x in (lo, hi))
        return f"{lead} ({self._interval_words(lo_s, hi_s)})"

    def _interval_words(self, lo: str, hi: str) -> str:
        if not self.is_ci:  # a range of 2 runs
            return f"{self.label} {lo} to {hi}, not a confidence interval"
        pct = f"{self.confidence * 100:g}%"
        method = "t-interval" if self.ci_kind == "t" else "bootstrap"
        return f"{pct} CI {lo} to {hi}; {method}, {n_words(self.n_a, self.n_b, self.paired)}"


def summarize(
    samples: Sequence[float], confidence: float = CONFIDENCE, n_resamples: int = N_RESAMPLES
) -> Summary:
    """Median with an interval (the module's rule on n), plus mean, stdev, CV, range."""
    x = clean(samples, "samples")
    n = len(x)
    median = float(np.median(x))
    mean = float(np.mean(x))
    stdev = float(np.std(x, ddof=1)) if n > 1 else None
    lo, hi, method = choose_interval(
        n,
        median,
        lambda: (float(np.min(x)), float(np.max(x))),
        lambda: t_interval(x, confidence, log=bool((x > 0).all())),
        lambda: bootstrap_interval((x,), median_of, confidence, n_resamples),
    )
    kind = interval_kind(method)
    centre, centre_value = "", None
    if method == "t":
        centre, centre_value = "geometric mean", float(np.exp(np.mean(np.log(x))))
    elif method == "t-linear":
        centre, centre_value = "mean", mean
    elif kind == "bootstrap":
        centre, centre_value = "median", median
    return Summary(
        n=n,
        median=median,
        ci_low=lo,
        ci_high=hi,
        ci_available=n > 1,
        ci_method=method,
        confidence=confidence,
        mean=mean,
        stdev=stdev,
        cv=coefficient_of_variation_of(x),
        min=float(np.min(x)),
        max=float(np.max(x)),
        ci_kind=kind,
        is_ci=kind in ("bootstrap", "t"),
        label=interval_label(kind, confidence, n),
        centre=centre,
        centre_value=centre_value,
    )


def ratio(
    a: Sequence[float],
    b: Sequence[float],
    higher_is_better: bool = True,
    confidence: float = CONFIDENCE,
    n_resamples: int = N_RESAMPLES,
    *,
    paired: bool,
) -> Ratio:
    """Ratio of a over b with an interval by the module's rule on n (pairs, when paired).

    Paired (`paired_ratio`): repeat i of a goes with repeat i of b. The estimate is the median of
    the per-pair ratios a[i] / b[i], and the interval resamples whole pairs (n >= 6); from 3 to 5
    pairs it is a t-interval on the log ratios, and for 2 pairs the range of the two ratios. Why
    per-pair ratios and not the ratio of medians: repeats i of both variants run back to back, so
    drift that hits both (clocks, temperature, a neighbour's job) cancels inside each pair; the
    ratio of medians would throw that pairing away.

    Not paired (`unpaired_ratio`): the ratio of medians, median(a) / median(b). For machine
    against machine: the repeats on two machines have nothing in common, so each side is
    resampled on its own (scipy's multi-sample bootstrap with paired=False). With a single sample
    on either side there is no interval: its spread is unknown. With 2 on the smaller side the
    interval is the range of the cross ratios; with 3 to 5, Welch's t-interval on the difference
    of mean logs.
    """
    x, y = _ratio_sides(a, b, paired=paired)
    of = _per_pair if paired else _of_medians
    estimate, (lo, hi, method) = of(x, y, confidence, n_resamples)
    return _ratio(estimate, lo, hi, method, confidence, len(x), len(y), paired, higher_is_better)


paired_ratio = partial(ratio, paired=True)
"""`ratio` of paired samples: repeat i of a goes with repeat i of b (a variant against another)."""

unpaired_ratio = partial(ratio, paired=False)
"""`ratio` of samples that are not paired (a machine against another)."""

_Estimate = tuple[float, tuple[float, float, str]]
"""A ratio's estimate and its (low, high, method)."""


def _per_pair(x: np.ndarray, y: np.ndarray, confidence: float, n_resamples: int) -> _Estimate:
    r = x / y
    estimate = float(np.median(r))
    return estimate, choose_interval(
        len(r),
        estimate,
        lambda: (float(np.min(r)), float(np.max(r))),
        lambda: t_interval(r, confidence, log=True),
        lambda: bootstrap_interval((r,), median_of, confidence, n_resamples),
    )


def _of_medians(x: np.ndarray, y: np.ndarray, confidence: float, n_resamples: int) -> _Estimate:
    estimate = float(np.median(x) / np.median(y))
    return estimate, choose_interval(
        min(len(x), len(y)),
        estimate,
        lambda: (float(x.min() / y.max()), float(x.max() / y.min())),  # every cross ratio
        lambda: welch_log_interval(x, y, confidence),
        lambda: bootstrap_interval((x, y), ratio_of_medians, confidence, n_resamples),
    )


# --- helpers -----------------------------------------------------------------------------------


def _ratio(
    estimate: float,
    lo: float,
    hi: float,
    method: str,
    confidence: float,
    n_a: int,
    n_b: int,
    paired: bool,
    higher_is_better: bool,
) -> Ratio:
    available = method != "none"
    kind = interval_kind(method)
    return Ratio(
        estimate=estimate,
        ci_low=lo,
        ci_high=hi,
        ci_available=available,
        ci_method=method,
        confidence=confidence,
        n_a=n_a,
        n_b=n_b,
        paired=paired,
        higher_is_better=higher_is_better,
        includes_one=(not available) or lo <= 1.0 <= hi,
        ci_kind=kind,
        is_ci=kind in ("bootstrap", "t"),
        label=interval_label(kind, confidence, n_a, None if paired else n_b),
    )


def _ratio_sides(
    a: Sequence[float], b: Sequence[float], paired: bool
) -> tuple[np.ndarray, np.ndarray]:
    """Both sides of a ratio as clean arrays of positive values, checked in one order for both
    kinds of ratio; a paired one also needs as many samples on each side."""
    x, y = clean(a, "a"), clean(b, "b")
    if paired and len(x) != len(y):
        raise StatsError(
            f"paired ratio needs the same number of samples on both sides, got {len(x)} and "
            f"{len(y)}; use unpaired_ratio for samples that are not paired"
        )
    _positive(x, "a")
    _positive(y, "b")
    return x, y


def _positive(x: np.ndarray, name: str) -> None:
    if (x <= 0).any():
        raise StatsError(f"{name}: a ratio needs positive values, got {x.tolist()}")


def _fmt(point: float, low: float, high: float) -> list[str]:
    """A ratio and its interval, two decimals; more (up to four) while two would hide a real
    difference: the interval's ends printed alike ("1.01 to 1.01"), or a value that is not 1
    printed as "1.00". The point may print as one of the ends ("1.61x (1.61 to 1.62)"): that
    hides no spread, so it never asks for a third decimal on its own."""
    values = (point, low, high)
    for digits in (2, 3, 4):
        out = [f"{v:.{digits}f}" for v in values]
        hidden = any(o == f"{1:.{digits}f}" and v != 1.0 for o, v in zip(out, values, strict=True))
        alike = out[1] == out[2] and low != high
        if not hidden and not alike:
            return out
    return out
