"""Intervals that are valid at the small n a benchmark has (2 to 5 repeats), and their words.

The rule by n (kit.shared.metrics.INTERVALS: none, the range, a t-interval on the logs, the
bootstrap of the median) is applied here (choose_interval); this module holds the t-intervals,
the seeded bootstrap and the label the report prints, so "95% CI" is never written for what is
only a range. kit.stats builds its summaries and ratios from them.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence

import numpy as np
from scipy.special import stdtrit  # the t quantile; scipy.stats costs ~1 s to import

from kit.io.errors import KitError
from kit.shared.metrics import CONFIDENCE, interval_rule


def t_interval(
    x: Sequence[float], confidence: float = CONFIDENCE, log: bool = True
) -> tuple[float, float, str]:
    """(low, high, method): Student's t-interval of the mean of log(x), back-transformed.

    Valid at any n >= 2 for (log-)normal data: mean(log x) +- t(1 - a/2, n-1) * sd / sqrt(n),
    then exp. `log=False` gives the plain t-interval of the mean (for data with a value <= 0).
    """
    v = np.asarray(x, dtype=float)
    if len(v) < 2:
        raise ValueError(f"a t-interval needs at least 2 values, got {len(v)}")
    if float(np.ptp(v)) == 0.0:  # no spread: the interval is the value itself, exactly
        return float(v[0]), float(v[0]), "t" if log else "t-linear"
    w = np.log(v) if log else v
    half = stdtrit(len(w) - 1, 0.5 + confidence / 2) * np.std(w, ddof=1) / math.sqrt(len(w))
    lo, hi = float(np.mean(w) - half), float(np.mean(w) + half)
    if log:
        return math.exp(lo), math.exp(hi), "t"
    return lo, hi, "t-linear"


def welch_log_interval(
    a: Sequence[float], b: Sequence[float], confidence: float = CONFIDENCE
) -> tuple[float, float, str]:
    """(low, high, "t"): Welch's t-interval of mean(log a) - mean(log b), back-transformed:
    an interval for the ratio of geometric means of two independent samples (n >= 2 each)."""
    la, lb = np.log(np.asarray(a, dtype=float)), np.log(np.asarray(b, dtype=float))
    va, vb = np.var(la, ddof=1) / len(la), np.var(lb, ddof=1) / len(lb)
    diff = float(np.mean(la) - np.mean(lb))
    se = math.sqrt(va + vb)
    if se == 0:
        return math.exp(diff), math.exp(diff), "t"
    df = (va + vb) ** 2 / (va**2 / (len(la) - 1) + vb**2 / (len(lb) - 1))
    half = float(stdtrit(df, 0.5 + confidence / 2)) * se
    return math.exp(diff - half), math.exp(diff + half), "t"


def interval_kind(method: str) -> str:
    if method in ("BCa", "percentile"):
        return "bootstrap"
    return "t" if method.startswith("t") else method


def interval_label(kind: str, confidence: float, n: int, n_b: int | None = None) -> str:
    """What the interval is, in the words the report prints."""
    pct = f"{confidence * 100:g}%"
    count = f"n={n}" if n_b is None or n_b == n else f"n={n} and {n_b}"
    if kind == "none":
        return "one run, no interval"
    if kind == "range":
        if n_b is None or n_b == n:
            return f"range of {n} runs"
        return f"range of {n} and {n_b} runs"
    if kind == "t":
        return f"{pct} t-interval, {count}"
    return f"{pct} bootstrap CI, {count}"


def n_words(n_a: int, n_b: int, paired: bool) -> str:
    if paired or n_a == n_b:
        return f"n={n_a}"
    return f"n={n_a} and {n_b}"


N_RESAMPLES = 9999
SEED = 20240607
"""Seed for every bootstrap: reports are reproducible from the same samples."""


class StatsError(KitError, ValueError):
    """Samples the statistics cannot use (empty, NaN, inf, unequal pairs, non-positive ratio)."""


def choose_interval(
    n: int,
    point: float,
    range_: Callable[[], tuple[float, float]],
    t: Callable[[], tuple[float, float, str]],
    bootstrap: Callable[[], tuple[float, float, str]],
) -> tuple[float, float, str]:
    """(low, high, method) by the catalog's rule on n: each kind computed only when chosen."""
    kind = interval_rule(n)
    if kind == "none":
        return point, point, "none"
    if kind == "range":
        return (*range_(), "range")
    return t() if kind == "t" else bootstrap()


def median_of(x: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.median(x, axis=axis)


def ratio_of_medians(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.median(x, axis=axis) / np.median(y, axis=axis)


def bootstrap_interval(
    data: tuple[np.ndarray, ...],
    statistic: Callable[..., np.ndarray],
    confidence: float,
    n_resamples: int,
) -> tuple[float, float, str]:
    """(low, high, method): BCa, or percentile where BCa gives no finite interval.

    BCa fails on tied data (its jackknife acceleration divides by zero) and scipy then warns and
    returns NaN; percentile is the standard fallback. Both use a generator seeded with SEED.
    scipy.stats is imported here, not at the top: it costs about 1 s, and only n >= 6 needs it.
    """
    from scipy import stats as _st

    for method in ("BCa", "percentile"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # scipy's DegenerateDataWarning; we fall back below
            res = _st.bootstrap(
                data,
                statistic,
                n_resamples=n_resamples,
                vectorized=True,
                paired=False,  # paired data arrives as one sample of per-pair ratios
                confidence_level=confidence,
                method=method,
                rng=np.random.default_rng(SEED),
            )
        lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
        if math.isfinite(lo) and math.isfinite(hi):
            return lo, hi, method
    raise StatsError(f"bootstrap gave no finite interval for samples {[d.tolist() for d in data]}")
