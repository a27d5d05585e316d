"""Sweeps compared at the sizes both sides ran: a sweep to 8 GiB against one to 1 GiB is
compared at 1 GiB, never its 8 GiB figure against the other's 1 GiB one (a size difference is
not a hardware difference). With no size in common there is no ratio at all.

The sweep metrics whose value depends on how far the sweep went are recomputed from each run's
recorded sizes (results.json `data.sizes`, the same medians the worker took): bus bandwidth at
the largest size, the peak over the sizes, the time at the smallest."""

from __future__ import annotations

import statistics
from typing import Any

from kit.model import RunResult
from kit.refs.nccl_tests import size_words

SIZE_METRICS = ("busbw_largest", "busbw_peak", "time_small_us")


def run_sizes(runs: list[RunResult]) -> set[int] | None:
    """The message sizes every one of these runs swept (None: they recorded no sweep)."""
    found = [{s.bytes for s in r.data.sizes or []} for r in runs]
    found = [f for f in found if f]
    return set.intersection(*found) if found else None


def value_at(run: RunResult, metric: str, sizes: set[int]) -> float | None:
    """One run's `metric` over only `sizes`: the median over its timed iterations at each size,
    as the worker computes it (kit.workloads.collective_sweep)."""
    rows = {s.bytes: s for s in run.data.sizes or [] if s.bytes in sizes}
    if not rows:
        return None
    if metric == "time_small_us":
        times = rows[min(rows)].time_us
        return statistics.median(times) if times else None
    medians = {b: statistics.median(r.busbw_gbps) for b, r in rows.items() if r.busbw_gbps}
    if not medians:
        return None
    return medians[max(medians)] if metric == "busbw_largest" else max(medians.values())


def common_sweep(per_machine: list[set[int] | None]) -> dict[str, Any] | None:
    """Where the machines' sweeps differ: the sizes they share and a sentence saying at which
    size they are compared (or that they share none); None when every sweep is the same."""
    known = [s for s in per_machine if s]
    if len(known) < 2 or all(s == known[0] for s in known):
        return None
    common = set.intersection(*known)
    ends = ", ".join(size_words(max(s)) for s in known)
    if not common:
        return {
            "sizes": set(),
            "sentence": f"the sweeps share no message size (largest {ends}): no ratio",
        }
    return {
        "sizes": common,
        "sentence": (
            f"compared at {size_words(max(common))}, the largest size every machine swept "
            f"(their sweeps end at {ends}); each figure here is recomputed at the sizes in "
            f"common from its runs' recorded sizes"
        ),
    }
