"""Adaptive repeats: whether a benchmark needs another repeat, decided from the spread of its
headline metric (the engine asks after each repeat; results.json records each decision)."""

from __future__ import annotations

from kit.model import AdaptiveRecord, RunResult
from kit.shared.jsonio import finite
from kit.stats.spread import (
    AdaptiveRepeats,
    coefficient_of_variation,
    is_noisy,
    noisy_reason,
)
from kit.workloads.registry import headline_metric


def headline_name(runs: list[RunResult]) -> str | None:
    """The metric adaptive repeats watch: each kind's headline, from its workload spec."""
    names = {n for r in runs if r.status == "ok" for n in r.metrics}
    wanted = [headline_metric(k) for k in dict.fromkeys(r.kind for r in runs)]
    return next((n for n in wanted if n in names), min(names) if names else None)


def adaptive_record(
    runs: list[RunResult], benchmark: str, policy: AdaptiveRepeats
) -> AdaptiveRecord:
    """Whether a benchmark needs another repeat (all variants together), and why.

    Repeats are counted whether they succeeded or not, so a failing benchmark never loops;
    only the spread of the successful samples asks for more.
    """
    mine = [r for r in runs if r.benchmark == benchmark]
    done = 1 + max((r.repeat for r in mine), default=-1)
    metric = headline_name(mine)
    cvs: dict[str, float | None] = {}
    noisy: list[str] = []
    more = cap_reached = False
    for variant in dict.fromkeys(r.variant for r in mine):
        samples = [
            r.metrics[metric].value
            for r in mine
            if r.variant == variant and r.status == "ok" and metric in r.metrics
        ]
        cvs[variant] = coefficient_of_variation(samples) if samples else None
        if samples and is_noisy(samples, policy.cv_threshold):
            noisy.append(variant)
            more = more or policy.needs_more(samples, done)
            cap_reached = cap_reached or policy.cap_reached(samples, done)
    reason = noisy_reason({v: cvs[v] for v in noisy}, policy.cv_threshold)
    return AdaptiveRecord(
        metric=metric,
        planned=policy.min_repeats,
        max_repeats=policy.max_repeats,
        cv_threshold=policy.cv_threshold,
        repeats=done,
        cv={v: finite(cv) for v, cv in cvs.items()},  # inf (around a mean of 0): null
        noisy=noisy,
        more=more,
        cap_reached=cap_reached,
        reason=reason if noisy else "",
    )
