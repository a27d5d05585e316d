"""How much repeats of one figure spread, and whether to run another: the coefficient of
variation, its words, and the adaptive-repeat rule the driver asks after each repeat.

Split from kit.stats (medians, intervals, ratios), which reads `clean` from here: the checks a
list of samples passes before any statistic is taken of it."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from kit.shared.metrics import CV_THRESHOLD
from kit.stats.intervals import StatsError


def clean(samples: Sequence[float], name: str) -> np.ndarray:
    """A 1-D float array of finite values, or a StatsError that names what is wrong."""
    try:
        x = np.asarray(samples, dtype=float)
    except (TypeError, ValueError) as e:
        raise StatsError(f"{name}: values must be numbers ({e})") from None
    if x.ndim != 1:
        raise StatsError(f"{name}: values must be a flat list of numbers, got shape {x.shape}")
    if len(x) == 0:
        raise StatsError(f"{name}: no values (did every repeat fail?)")
    bad = ~np.isfinite(x)
    if bad.any():
        raise StatsError(
            f"{name}: values must be finite, got {x[bad].tolist()} at positions "
            f"{np.flatnonzero(bad).tolist()}"
        )
    return x


def coefficient_of_variation_of(x: np.ndarray) -> float | None:
    """stdev (ddof=1) / |mean| of a clean array; None for one value or a mean of 0."""
    if len(x) < 2:
        return None
    mean = float(np.mean(x))
    return float(np.std(x, ddof=1)) / abs(mean) if mean != 0 else None


def coefficient_of_variation(samples: Sequence[float]) -> float | None:
    """stdev (ddof=1) / |mean|; None for one sample or a mean of 0 (inf when those vary)."""
    return coefficient_of_variation_of(clean(samples, "samples"))


def cv_words(cv: float | None, threshold: float, digits: int = 0) -> str:
    """A coefficient of variation in percent, with `digits` decimals or as many more as show
    it apart from the threshold it is held against: "5%", "3.04%" beside 3% (never "CV 3%,
    over 3%" or "3.0% > 3%")."""
    if cv is None or not math.isfinite(cv):
        return "unbounded (samples around a mean of 0)"
    for d in range(digits, 4):
        text = f"{cv * 100:.{d}f}"
        if float(text) != round(threshold * 100, d):
            return f"{text}%"
    return f"{cv * 100:.3f}%"


def noisy_reason(cvs: dict[str, float | None], threshold: float) -> str:
    """Why the adaptive repeats asked for more, from the noisy variants' CVs: "no-p2p CV 3.04% >
    3%" (what results.json records and a comparison prints, one wording)."""
    said = ", ".join(f"{v} CV {cv_words(cv, threshold, 1)}" for v, cv in cvs.items())
    return f"{said} > {threshold * 100:.3g}%"


def is_noisy(samples: Sequence[float], cv_threshold: float = CV_THRESHOLD) -> bool:
    """True when the coefficient of variation (stdev / |mean|) is above the threshold.

    One sample has no spread to judge, so it is not noisy (the repeat policy asks for more by
    its minimum instead). Samples that vary around a mean of 0 count as noisy.
    """
    x = clean(samples, "samples")
    if len(x) < 2:
        return False
    cv = coefficient_of_variation_of(x)
    return float(np.std(x, ddof=1)) > 0 if cv is None else cv > cv_threshold


@dataclass(frozen=True)
class AdaptiveRepeats:
    """When to run one more repeat of a variant: the driver asks after each repeat.

    Run at least `min_repeats`; go on while the coefficient of variation is above
    `cv_threshold`, up to `max_repeats`. `cap_reached` says that the loop stopped only because of
    the cap, with the samples still noisy: the report flags that metric.
    """

    min_repeats: int
    max_repeats: int
    cv_threshold: float = CV_THRESHOLD

    def __post_init__(self) -> None:
        if self.min_repeats < 1:
            raise StatsError(f"min_repeats must be >= 1, got {self.min_repeats}", exit_code=2)
        if self.max_repeats < self.min_repeats:
            raise StatsError(
                f"max_repeats ({self.max_repeats}) must be >= min_repeats ({self.min_repeats})",
                exit_code=2,
            )
        if not self.cv_threshold > 0:
            raise StatsError(f"cv_threshold must be > 0, got {self.cv_threshold}", exit_code=2)

    def needs_more(self, samples: Sequence[float], repeats: int | None = None) -> bool:
        """Whether to run another repeat. `repeats` counts every repeat run so far, failed ones
        too (so a failing benchmark never loops); by default one per sample."""
        n = len(samples) if repeats is None else repeats
        if n < self.min_repeats:
            return True
        if n >= self.max_repeats:
            return False
        return is_noisy(samples, self.cv_threshold)

    def cap_reached(self, samples: Sequence[float], repeats: int | None = None) -> bool:
        n = len(samples) if repeats is None else repeats
        return n >= self.max_repeats and is_noisy(samples, self.cv_threshold)
