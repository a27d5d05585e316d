"""Known-answer tests for kit.stats.

The expected intervals come from an independent computation: for an odd number of distinct
samples the bootstrap distribution of the median is known exactly (the median of a resample is
at most x_(j) when at least (n+1)/2 of the n draws are among the j smallest: a binomial tail), so
the percentile and BCa intervals can be computed without Monte Carlo and compared with scipy's.
"""

import dataclasses
import json

import numpy as np
import pytest
from scipy.special import ndtr, ndtri
from scipy.stats import binom
from scipy.stats import t as t_dist

from kit.io.errors import KitError
from kit.stats import (
    StatsError,
    paired_ratio,
    summarize,
    unpaired_ratio,
)
from kit.stats.spread import AdaptiveRepeats, is_noisy

# --- an exact bootstrap, written independently of kit.stats -----------------------------------


def exact_median_dist(x):
    """Atoms and probabilities of the bootstrap distribution of the median (odd n, distinct)."""
    v = np.sort(np.asarray(x, dtype=float))
    n = len(v)
    assert n % 2 == 1 and len(set(v)) == n
    cdf = binom.sf((n + 1) // 2 - 1, n, np.arange(1, n + 1) / n)  # P(Bin(n, j/n) >= (n+1)/2)
    return v, np.diff(cdf, prepend=0.0)


def exact_ratio_dist(a, b):
    """Bootstrap distribution of median(a*)/median(b*), a and b resampled independently."""
    va, pa = exact_median_dist(a)
    vb, pb = exact_median_dist(b)
    v, p = (va[:, None] / vb[None, :]).ravel(), (pa[:, None] * pb[None, :]).ravel()
    order = np.argsort(v)
    return v[order], p[order]


def quantile(v, p, level):
    return v[np.searchsorted(np.cumsum(p), level - 1e-12)]


def exact_bca(v, p, theta, jackknifes, alpha=0.025):
    """BCa interval (Efron & Tibshirani eq. 14.10, 15.36) on an exact bootstrap distribution."""
    z0 = ndtri((p[v < theta].sum() + p[v <= theta].sum()) / 2)
    num = den = 0.0
    for t in jackknifes:  # one leave-one-out series per sample
        t = np.asarray(t)
        u = (len(t) - 1) * (t.mean() - t)
        num += (u**3).sum() / len(t) ** 3
        den += (u**2).sum() / len(t) ** 2
    acc = num / 6 / den**1.5
    levels = [ndtr(z0 + (z0 + z) / (1 - acc * (z0 + z))) for z in (ndtri(alpha), -ndtri(alpha))]
    return quantile(v, p, levels[0]), quantile(v, p, levels[1])


# --- summarize -----------------------------------------------------------------------------------


def test_summary_hand_checked():
    s = summarize([3, 1, 100, 2, 4])
    assert (s.n, s.median, s.mean, s.min, s.max) == (5, 3.0, 22.0, 1.0, 100.0)
    assert s.stdev == pytest.approx((7610 / 4) ** 0.5)  # squared deviations 441+400+361+324+6084
    assert s.cv == pytest.approx(s.stdev / 22)
    # n = 5: a t-interval on the logs (a bootstrap of the median from 5 values
    # would be the whole range, 1 to 100, and be called a 95% CI)
    logs = np.log([3, 1, 100, 2, 4])
    half = t_dist.ppf(0.975, 4) * logs.std(ddof=1) / 5**0.5
    assert (s.ci_low, s.ci_high) == pytest.approx(np.exp([logs.mean() - half, logs.mean() + half]))
    assert (s.ci_available, s.ci_method, s.ci_kind, s.is_ci) == (True, "t", "t", True)
    assert s.label == "95% t-interval, n=5"


@pytest.mark.parametrize(
    "x, expected",
    [
        ([10, 11, 12, 13, 14, 15, 30], (11.0, 15.0)),  # x_(2), x_(6)
        ([25, 10, 40, 12, 11, 13, 21, 14, 16, 15, 18], (12.0, 21.0)),  # x_(3), x_(9)
    ],
)
def test_median_interval_matches_exact_bootstrap(x, expected):
    v, p = exact_median_dist(x)
    jack = [[np.median(np.delete(x, i)) for i in range(len(x))]]
    assert exact_bca(v, p, np.median(x), jack) == expected
    s = summarize(x)
    assert (s.ci_low, s.ci_high) == pytest.approx(expected)


def test_interval_contains_true_median_of_a_synthetic_distribution():
    rng = np.random.default_rng(1)
    s = summarize(rng.normal(100.0, 5.0, size=31))
    assert s.ci_low < 100.0 < s.ci_high
    assert s.ci_high - s.ci_low < 6.0  # about 2 x 1.96 x 1.25 x 5 / sqrt(31) = 4.4


def test_interval_coverage_is_near_95_percent():
    rng = np.random.default_rng(7)
    hits = 0
    for _ in range(200):
        s = summarize(rng.normal(100.0, 5.0, size=15), n_resamples=999)
        hits += s.ci_low <= 100.0 <= s.ci_high
    # bootstrap intervals of a median undercover a little at n = 15; 50% or 99.9% would fail
    assert 0.87 <= hits / 200 <= 0.99


def test_summary_is_reproducible_and_json_able():
    x = [1.0, 1.3, 0.9, 1.1, 1.25, 0.97]
    a, b = summarize(x), summarize(x)
    assert a == b
    d = json.loads(json.dumps(a.to_dict()))
    assert d["median"] == pytest.approx(1.05) and d["ci_method"] == "BCa" and d["n"] == 6


def test_single_sample_has_no_interval():
    s = summarize([7.5])
    assert (s.median, s.ci_low, s.ci_high) == (7.5, 7.5, 7.5)
    assert (s.ci_available, s.ci_method, s.stdev, s.cv) == (False, "none", None, None)
    json.dumps(s.to_dict())


def test_two_samples_give_their_range_never_called_a_ci():
    s = summarize([11.67, 11.66])
    assert (s.median, s.ci_low, s.ci_high, s.ci_available) == (11.665, 11.66, 11.67, True)
    assert (s.ci_method, s.ci_kind, s.is_ci, s.label) == (
        "range",
        "range",
        False,
        "range of 2 runs",
    )
    assert s.stdev == pytest.approx(0.01 * 2**-0.5)


def test_one_sample_label():
    assert summarize([3.0]).label == "one run, no interval"
    assert summarize([3.0]).is_ci is False


def test_identical_samples_give_a_zero_width_t_interval():
    s = summarize([5.0, 5.0, 5.0])
    assert (s.ci_low, s.ci_high, s.ci_method, s.stdev, s.cv) == (5.0, 5.0, "t", 0.0, 0.0)


def test_non_positive_samples_get_a_plain_t_interval():
    s = summarize([-1.0, 0.0, 1.0])
    half = t_dist.ppf(0.975, 2) * 1.0 / 3**0.5
    assert (s.ci_low, s.ci_high, s.ci_method) == pytest.approx((-half, half, "t-linear"))
    assert s.ci_kind == "t" and s.label == "95% t-interval, n=3"


def test_ties_fall_back_to_percentile():
    # n = 6 (bootstrap); BCa's jackknife is degenerate on these ties
    s = summarize([1.0, 1.0, 1.0, 1.0, 1.0, 2.0])
    assert (s.median, s.ci_method, s.ci_kind) == (1.0, "percentile", "bootstrap")
    assert s.label == "95% bootstrap CI, n=6" and s.is_ci


@pytest.mark.parametrize(
    "bad, message",
    [
        (
            [1.0, float("nan"), 2.0],
            r"samples: values must be finite, got \[nan\] at positions \[1\]",
        ),
        ([1.0, float("inf")], "must be finite"),
        ([], "no values"),
        ([[1.0, 2.0]], "flat list"),
        (["fast"], "values must be numbers"),
    ],
)
def test_bad_samples_give_a_clear_value_error(bad, message):
    with pytest.raises(ValueError, match=message) as e:
        summarize(bad)
    assert isinstance(e.value, KitError) and "\n" not in str(e.value)


# --- ratios --------------------------------------------------------------------------------------

R7 = [1.37, 1.34, 1.40, 1.36, 1.39, 1.35, 1.38]  # per-pair ratios; exact CI (r_(2), r_(6))
B7 = [80.0, 81.5, 79.0, 82.0, 80.5, 78.5, 81.0]  # no-P2P throughput of each repeat


def times_b7(ratios):
    """P2P throughput of each repeat when its pair's ratio to B7 is `ratios`."""
    return [q * b for q, b in zip(ratios, B7, strict=True)]


def test_paired_ratio_faster():
    a = times_b7(R7)
    r = paired_ratio(a, B7)
    assert r.estimate == pytest.approx(1.37)
    assert (r.ci_low, r.ci_high) == pytest.approx((1.35, 1.39))
    assert (r.includes_one, r.paired, r.n_a, r.n_b) == (False, True, 7, 7)
    assert r.sentence() == "1.37x faster (95% CI 1.35 to 1.39; bootstrap, n=7)"
    assert r.label == "95% bootstrap CI, n=7"


def test_paired_ratio_slower_is_stated_as_inverse():
    a = times_b7(R7)
    r = paired_ratio(B7, a)
    assert r.estimate == pytest.approx(1 / 1.37)
    assert r.sentence() == "1.37x slower (95% CI 1.35 to 1.39; bootstrap, n=7)"


def test_paired_ratio_of_times_lower_is_better():
    t_off = [1.0 / b for b in B7]  # step times
    t_on = [t / r for t, r in zip(t_off, R7, strict=True)]
    r = paired_ratio(t_on, t_off, higher_is_better=False)
    assert r.estimate == pytest.approx(1 / 1.37)
    assert r.sentence() == "1.37x faster (95% CI 1.35 to 1.39; bootstrap, n=7)"
    assert paired_ratio(t_off, t_on, higher_is_better=False).sentence() == (
        "1.37x slower (95% CI 1.35 to 1.39; bootstrap, n=7)"
    )


def test_paired_ratio_including_one_is_no_measurable_difference():
    ratios = [1.01, 0.98, 1.04, 1.00, 1.03, 0.99, 1.02]
    r = paired_ratio(times_b7(ratios), B7)
    assert r.includes_one
    assert r.sentence() == (
        "no measurable difference (ratio 1.01, 95% CI 0.99 to 1.03; bootstrap, n=7)"
    )
    assert r.to_dict()["sentence"] == r.sentence()
    json.dumps(r.to_dict())


def test_small_but_real_difference_is_said_as_a_percentage():
    """Under 0.5% a factor needs three or more decimals ("1.004x"): the sentence leads with the
    percentage, and so does its interval (the report review, 12: "0.48% slower (95% CI 1.002 to
    1.008" set a percentage beside a factor's interval)."""
    ratios = [1.004, 1.001, 1.007, 1.003, 1.006, 1.002, 1.005]
    r = paired_ratio(times_b7(ratios), B7)
    assert r.sentence() == "0.4% faster (95% CI 0.2% to 0.6%; bootstrap, n=7)"
    slower = paired_ratio(times_b7([1 / x for x in ratios]), B7)
    assert slower.sentence() == "0.4% slower (95% CI 0.2% to 0.6%; bootstrap, n=7)"


def test_a_difference_under_a_hundredth_of_a_percent_is_never_printed_in_e_notation():
    """The report review, 12: a ratio of 1.0000002 printed "2e-05% lower (ratio 1.0000 ...)"."""
    r = unpaired_ratio([1000.0002], [1000.0], higher_is_better=True)
    assert r.sentence("higher", "lower") == (
        "under 0.01% higher (ratio 1.0000, one sample per side, no interval)"
    )
    assert "e-" not in unpaired_ratio([1000.0], [1000.0002], True).sentence("higher", "lower")
    assert unpaired_ratio([1003.1], [1000.0], True).sentence().startswith("0.31% faster")


def test_paired_ratio_of_clearly_different_noisy_samples_excludes_one():
    rng = np.random.default_rng(3)
    b = rng.normal(76.2, 1.0, size=5)  # gpt2 DDP samples/s, P2P off
    a = rng.normal(81.1, 1.0, size=5)
    r = paired_ratio(a, b)
    assert not r.includes_one and r.ci_low > 1.0
    assert r.ci_low <= r.estimate <= r.ci_high


def test_paired_ratio_of_three_pairs_is_a_t_interval_on_log_ratios():
    a, b = [14140.0, 14000.0, 14300.0], [10420.0, 10500.0, 10380.0]
    r = paired_ratio(a, b)
    logs = np.log(np.array(a) / np.array(b))  # by hand: mean +- t(0.975, 2) * sd / sqrt(3)
    half = t_dist.ppf(0.975, 2) * logs.std(ddof=1) / np.sqrt(3)
    assert (r.ci_low, r.ci_high) == pytest.approx(np.exp([logs.mean() - half, logs.mean() + half]))
    assert r.estimate == pytest.approx(np.median(np.array(a) / np.array(b)))
    assert (r.ci_method, r.ci_kind, r.is_ci, r.label) == ("t", "t", True, "95% t-interval, n=3")
    lo, hi = (f"{v:.2f}" for v in (r.ci_low, r.ci_high))
    assert r.sentence() == f"1.36x faster (95% CI {lo} to {hi}; t-interval, n=3)"
    assert r.to_dict()["label"] == "95% t-interval, n=3"


def test_paired_ratio_of_two_pairs_is_their_range_not_a_ci():
    r = paired_ratio([1.31, 1.11], [1.0, 1.0], higher_is_better=False)
    assert (r.ci_low, r.ci_high, r.ci_kind, r.is_ci) == (1.11, 1.31, "range", False)
    assert r.label == "range of 2 runs"
    assert r.sentence() == "1.21x slower (range of 2 runs 1.11 to 1.31, not a confidence interval)"
    r = paired_ratio([1.01, 0.99], [1.0, 1.0])
    assert r.includes_one and r.sentence() == (
        "no measurable difference (ratio 1.00, range of 2 runs 0.99 to 1.01, "
        "not a confidence interval)"
    )


def test_paired_ratio_single_pair():
    r = paired_ratio([137.0], [100.0])
    assert (r.estimate, r.ci_available, r.ci_method, r.includes_one) == (1.37, False, "none", True)
    assert r.sentence() == "1.37x faster (one sample per side, no interval)"
    assert paired_ratio([100.0], [137.0]).sentence() == (
        "1.37x slower (one sample per side, no interval)"
    )
    assert paired_ratio([5.0], [5.0]).sentence() == (
        "no difference (ratio 1.00, one sample per side, no interval)"
    )


def test_paired_ratio_needs_pairs():
    with pytest.raises(ValueError, match="same number of samples on both sides, got 3 and 2"):
        paired_ratio([1.0, 2.0, 3.0], [1.0, 2.0])


@pytest.mark.parametrize("fn", [paired_ratio, unpaired_ratio])
def test_ratio_needs_positive_finite_samples(fn):
    with pytest.raises(ValueError, match="b: a ratio needs positive values"):
        fn([1.0, 2.0], [1.0, 0.0])
    with pytest.raises(ValueError, match="a: values must be finite"):
        fn([1.0, float("nan")], [1.0, 2.0])


def test_unpaired_ratio_matches_exact_bootstrap():
    a = [100.0, 102.0, 101.0, 99.0, 103.0, 98.0, 104.0]
    b = [73.0, 74.5, 73.5, 72.0, 75.0, 71.0, 76.0]
    v, p = exact_ratio_dist(a, b)
    theta = np.median(a) / np.median(b)
    jack = [
        [np.median(np.delete(a, i)) / np.median(b) for i in range(len(a))],
        [np.median(a) / np.median(np.delete(b, i)) for i in range(len(b))],
    ]
    lo, hi = exact_bca(v, p, theta, jack)
    assert (lo, hi) == pytest.approx((1.3333, 1.4306), abs=1e-4)  # 100/75, 103/72
    r = unpaired_ratio(a, b)
    assert r.estimate == pytest.approx(101 / 73.5)
    # Monte Carlo (9999 resamples) against exact: within one atom of the discrete distribution;
    # the percentile method (upper bound 1.4167) or paired resampling (1.37 to 1.38) would fail
    assert (r.ci_low, r.ci_high) == pytest.approx((lo, hi), abs=0.007)
    assert (r.paired, r.includes_one) == (False, False)
    assert r.sentence() == "1.37x faster (95% CI 1.33 to 1.43; bootstrap, n=7)"


def test_unpaired_ratio_small_samples_use_welch_on_logs():
    a, b = [100.0, 102.0, 98.0, 101.0], [50.0, 51.0, 49.0]
    r = unpaired_ratio(a, b)
    la, lb = np.log(a), np.log(b)
    va, vb = la.var(ddof=1) / 4, lb.var(ddof=1) / 3
    df = (va + vb) ** 2 / (va**2 / 3 + vb**2 / 2)
    half = t_dist.ppf(0.975, df) * np.sqrt(va + vb)
    d = la.mean() - lb.mean()
    assert (r.ci_low, r.ci_high) == pytest.approx(np.exp([d - half, d + half]))
    assert r.label == "95% t-interval, n=4 and 3"
    r2 = unpaired_ratio([100.0, 110.0, 105.0], [50.0, 55.0])
    assert (r2.ci_low, r2.ci_high) == pytest.approx((100 / 55, 110 / 50))
    assert (r2.ci_kind, r2.label) == ("range", "range of 3 and 2 runs")


def test_unpaired_ratio_allows_different_lengths_and_sees_no_difference():
    rng = np.random.default_rng(5)
    r = unpaired_ratio(rng.normal(100, 3, size=9), rng.normal(100, 3, size=5))
    assert (r.n_a, r.n_b, r.includes_one) == (9, 5, True)
    assert r.sentence().startswith("no measurable difference (ratio ")


def test_unpaired_ratio_with_one_sample_on_a_side_has_no_interval():
    r = unpaired_ratio([100.0], [70.0, 75.0, 80.0])
    assert r.estimate == pytest.approx(100 / 75)
    assert (r.ci_available, r.includes_one) == (False, True)


# --- noise and adaptive repeats ------------------------------------------------------------------


def test_is_noisy_uses_the_coefficient_of_variation():
    x = [98.0, 100.0, 102.0]  # stdev 2, mean 100: cv 0.02
    assert not is_noisy(x, cv_threshold=0.03)
    assert is_noisy(x, cv_threshold=0.01)
    assert not is_noisy([100.0])
    assert not is_noisy([0.0, 0.0])
    assert is_noisy([-1.0, 1.0])
    with pytest.raises(ValueError, match="finite"):
        is_noisy([1.0, float("inf")])


def run_adaptively(policy, values):
    """The driver's loop: one more repeat while the policy asks for it."""
    samples = []
    it = iter(values)
    while policy.needs_more(samples):
        samples.append(next(it))
    return samples


def test_adaptive_repeats_stop_at_minimum_when_quiet():
    policy = AdaptiveRepeats(min_repeats=3, max_repeats=8, cv_threshold=0.03)
    samples = run_adaptively(policy, [100.0, 101.0, 99.5, 140.0, 60.0])
    assert samples == [100.0, 101.0, 99.5]
    assert not policy.cap_reached(samples)


def test_adaptive_repeats_add_runs_until_quiet():
    policy = AdaptiveRepeats(min_repeats=3, max_repeats=8, cv_threshold=0.03)
    values = [100.0, 120.0, 101.0, 100.5, 99.5, 100.0, 100.2, 99.8, 100.1, 100.0]
    samples = run_adaptively(policy, values)
    # one outlier keeps the cv above 3% (0.105 at 3 samples ... 0.069 at 8): the cap stops it
    assert len(samples) == 8
    assert policy.cap_reached(samples)
    values = [100.0, 106.0, 100.5, 100.2, 99.9, 100.1, 100.0, 100.3]
    samples = run_adaptively(AdaptiveRepeats(3, 8, 0.03), values)
    assert len(samples) == 4  # cv: 0.033 at 3 samples, 0.028 at 4
    assert not AdaptiveRepeats(3, 8, 0.03).cap_reached(samples)


def test_cap_reached_only_when_stopped_by_the_cap_while_noisy():
    policy = AdaptiveRepeats(min_repeats=2, max_repeats=4, cv_threshold=0.03)
    assert not policy.cap_reached([100.0, 120.0])  # noisy, but more repeats are allowed
    assert not policy.cap_reached([100.0, 100.5, 99.5, 100.0])  # at the cap, but quiet
    assert policy.cap_reached([100.0, 120.0, 90.0, 100.0])
    assert not policy.needs_more([100.0, 120.0, 90.0, 100.0])


def test_adaptive_repeats_validate_their_settings():
    with pytest.raises(ValueError, match=r"max_repeats \(2\) must be >= min_repeats \(3\)") as e:
        AdaptiveRepeats(3, 2)
    assert e.value.exit_code == 2
    with pytest.raises(StatsError, match="min_repeats must be >= 1"):
        AdaptiveRepeats(0, 2)
    with pytest.raises(StatsError, match="cv_threshold must be > 0"):
        AdaptiveRepeats(1, 2, 0.0)


def test_a_ratio_keeps_two_decimals_unless_the_interval_would_hide_its_spread():
    """The 4x H200 Llama verdict printed "1.614x faster (range 1.605 to 1.623)": the point
    printing as an end at two decimals hides nothing; ends printed alike would."""
    two = paired_ratio([160.54, 162.30], [100.0, 100.0])
    assert two.sentence().startswith("1.61x faster (range of 2 runs 1.61 to 1.62, not a")
    tight = paired_ratio([101.01, 101.04], [100.0, 100.0])
    assert "1.0101 to 1.0104" in tight.sentence()  # two decimals would print "1.01 to 1.01"


def test_an_intervals_ends_keep_their_trailing_zero():
    """A buyer read "0.109 to 0.11 J" as a typo and "0.125 to 0.126" beside it as degenerate:
    an end keeps its significant zero, as the other end's digits do."""
    joules = dataclasses.replace(summarize([0.1088, 0.1094, 0.1099]), ci_low=0.1092, ci_high=0.1101)
    assert joules.ends("J/token") == "0.109 to 0.110 J/token"
    assert dataclasses.replace(joules, ci_low=54.97, ci_high=55.1).ends() == "55.0 to 55.1"


def test_an_interval_every_run_agreed_on_prints_its_ends_as_its_median():
    """Every run read the same (peak memory, the largest batch that fits): the ends print as the
    median beside them does ("61 sequences, 61 to 61", "16.96, 16.96 to 16.96"), never
    "61.0 to 61.0" or "17.0 to 17.0" beside a median of 16.96."""
    from kit.shared.metrics import figure

    for value in (61.0, 16.96, 0.58, 13_420.0):
        s = summarize([value] * 3)
        assert (
            s.ends()
            == f"{figure(value)} to {figure(value)}"
            == f"{figure(s.median)} to {figure(s.median)}"
        )
    assert summarize([0.579, 0.580]).ends() == "0.579 to 0.580"  # differing ends keep their zero
    # peak memory of three runs (H200 Llama LoRA FSDP, 2026-11-21), a few bytes apart: no
    # digit shows a spread, so the ends print as the median does (it read "16.9614 to 16.9614")
    s = summarize([16.961389541625977, 16.961387634277344, 16.961387157440186])
    assert s.ends() == "16.96 to 16.96", (s.ci_low, s.ci_high)
