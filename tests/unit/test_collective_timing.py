"""The spin-held timing's decisions, with the clocks and the ranks' agreement injected: which
batch is kept, which is dropped on every rank, how the spin grows, and what is recorded.
(The GPU path itself, torch.cuda._sleep between CUDA events, needs a GPU: see spin_batch.)"""

from __future__ import annotations

import pytest

from kit.workloads import collective_timing as ct
from kit.workloads.collective_timing import Trial, held, held_trials, queue_cost, spin_for


def test_held_when_queueing_ends_inside_the_spin_with_margin():
    assert held(0.5e-3, 1e-3)
    assert held(0.9e-3, 1e-3)  # exactly the share
    assert not held(0.91e-3, 1e-3)
    assert not held(2e-3, 1e-3)
    assert Trial(1e-5, 0.2e-3, 1e-3).held and not Trial(1e-5, 1.5e-3, 1e-3).held


def test_spin_covers_the_warmup_queueing_cost_and_has_a_floor():
    assert spin_for(30e-6, 100) == pytest.approx(ct.SPIN_PER_CALL * 3e-3)
    assert spin_for(1e-6, 10) == ct.MIN_SPIN_S
    # a warm-up that blocked the host (43 ms a call) does not ask for 13 s of idle GPU
    assert spin_for(43e-3, 100) == ct.MAX_FIRST_SPIN_S


class Ranks:
    """Two ranks' clocks: each call of `run` reads the next queueing time of each rank (the
    host clock), the GPU's spin is what was asked; `agree` is the all-reduce of the flag."""

    def __init__(self, queue_times: list[tuple[float, float]]):
        self.queue_times = list(queue_times)
        self.asked: list[float] = []
        self.per_rank: tuple[Trial, Trial] | None = None

    def run(self, spin_s: float) -> Trial:
        q0, q1 = self.queue_times.pop(0)
        self.asked.append(spin_s)
        self.per_rank = (Trial(10e-6, q0, spin_s), Trial(12e-6, q1, spin_s))
        return self.per_rank[0]

    def agree(self, per_call_s: float, held_here: bool) -> tuple[float, bool]:
        assert self.per_rank is not None and per_call_s == self.per_rank[0].per_call_s
        mean = sum(t.per_call_s for t in self.per_rank) / 2
        return mean, all(t.held for t in self.per_rank)


def test_a_batch_unheld_on_one_rank_is_dropped_on_every_rank_and_retried_with_twice_the_spin():
    # trial 1: both ranks queued in time; trial 2: rank 1 was late, then both in time
    ranks = Ranks([(0.1e-3, 0.2e-3), (0.1e-3, 1.5e-3), (0.1e-3, 0.2e-3)])
    out = held_trials(2, 1e-3, ranks.run, ranks.agree)
    assert out.times == [pytest.approx(11e-6), pytest.approx(11e-6)]  # mean over ranks
    assert out.dropped == 1 and out.unheld == 0
    assert ranks.asked == [1e-3, 1e-3, 2e-3] == out.spins_s
    assert not ranks.queue_times  # every batch was read, none left over


def test_after_every_retry_the_last_batch_is_kept_and_counted_unheld():
    late = [(5e-3, 5e-3)] * 3
    ranks = Ranks(late)
    out = held_trials(1, 1e-3, ranks.run, ranks.agree, max_drops=2)
    assert out.dropped == 2 and out.unheld == 1 and len(out.times) == 1
    assert out.spins_s == [1e-3, 2e-3, 4e-3]


def test_queue_cost_reads_the_host_clock_per_call():
    ticks = iter([1.0, 1.0 + 20 * 25e-6])
    calls = []
    assert queue_cost(lambda: calls.append(1), 20, now=lambda: next(ticks)) == pytest.approx(25e-6)
    assert len(calls) == 20
    assert queue_cost(lambda: None, 0) == 0.0


def test_every_method_names_how_it_takes_the_ranks():
    methods = set(ct.EAGER_METHOD.values()) | {"cuda-graph", "host-clock"}
    assert methods == set(ct.RANK_TIME)
    assert ct.RANK_TIME["spin-held"] == "mean" and ct.RANK_TIME["host-clock"] == "slowest"
