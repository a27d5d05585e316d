"""The spin-held timing's decisions, with the clocks and the ranks' agreement injected: which
batch is kept, which is dropped on every rank, how the spin grows, and what is recorded.
(The GPU path itself, torch.cuda._sleep between CUDA events, needs a GPU: see spin_batch.)"""

from __future__ import annotations

import functools

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


class Host:
    """The host's clock, virtual: a queued call costs QUEUE_S, a stall what it is told. The
    test's outcome then never hangs on how busy the machine is (a real clock under load
    stretched the warm-up, and so the spin, past the planted stall)."""

    QUEUE_S = 20e-6

    def __init__(self):
        self.t = 0.0

    def now(self) -> float:
        return self.t


class FakeGpu:
    """A stream on a virtual clock that never blocks the host: the spin and each call move it
    on, an event reads it (never earlier than the host queued the event), as a GPU's would."""

    CALL_S = 10e-6

    def __init__(self, host: Host):
        self.host = host
        self.t = 0.0

    def sleep(self, cycles: int) -> None:  # 1e9 cycles a second
        self.t = max(self.t, self.host.t) + cycles / 1e9

    def call(self) -> None:
        self.t = max(self.t, self.host.t) + self.CALL_S

    def event(self, enable_timing: bool = False):
        gpu = self

        class Event:
            def record(self):
                gpu.t = self.t = max(gpu.t, gpu.host.t)

            def synchronize(self):
                pass

            def elapsed_time(self, end) -> float:
                return (end.t - self.t) * 1e3  # milliseconds, as CUDA's

        return Event()


def test_the_spin_held_path_runs_end_to_end_on_one_gloo_rank(monkeypatch, tmp_path):
    """The wiring of collective_timing.timed for spin-held trials (lineup, spin, agreement,
    recorded fields) through a real one-rank gloo group; the GPU's parts are host stand-ins:
    a virtual stream clock (FakeGpu). What it cannot show is a real GPU's behaviour."""
    import torch
    import torch.distributed as dist

    from kit.worker.common import Context
    from kit.workloads.allreduce.params import AllreduceParams

    host = Host()
    gpu = FakeGpu(host)
    # the host's queueing read on the virtual clock (what a real perf_counter would read)
    monkeypatch.setattr(ct, "queue_cost", functools.partial(ct.queue_cost, now=host.now))
    monkeypatch.setattr(ct, "spin_batch", functools.partial(ct.spin_batch, now=host.now))
    monkeypatch.setattr(torch.cuda, "Event", gpu.event)
    monkeypatch.setattr(torch.cuda, "_sleep", gpu.sleep)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    store = dist.HashStore()
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    try:
        ctx = Context({}, tmp_path, 0, 0, 1, torch.device("cpu"), "gloo")
        clock = ct.calibrate()
        assert clock.cycles_per_s == pytest.approx(1e9)  # the spin's rate, read through events
        buf = torch.ones(256)
        calls = []

        def op():
            calls.append(1)
            dist.all_reduce(buf)
            host.t += host.QUEUE_S
            gpu.call()

        p = AllreduceParams(warmup_iters=3, iters=4, trials=2)
        monkeypatch.setattr(ct, "_clock", lambda ctx: clock)
        row = ct.timed(ctx, p, 1.0, (op, lambda: buf.fill_(1), 1024), None, "spin-held")

        # the host stalls while queueing the first batch (as a preempted rank would): that
        # batch outlasts its spin, is dropped, and is retried with twice the spin
        stall = iter([0.0] * 3 + [3e-3] * 4)

        def stalling():
            host.t += next(stall, 0.0)
            op()

        slow = ct.timed(ctx, p, 1.0, (stalling, lambda: buf.fill_(1), 1024), None, "spin-held")
    finally:
        dist.destroy_process_group()
    assert row["timing"] == "spin-held" and row["ranks"] == "mean"
    # every call queued inside the spin: the batch is the stream's own time, 10 us a call
    assert row["time_us"] == [pytest.approx(10.0), pytest.approx(10.0)]
    assert row["dropped"] == 0 and row["unheld"] == 0 and len(row["spin_us"]) == 2
    assert min(row["spin_us"]) >= ct.MIN_SPIN_S * 1e6
    assert row["algbw_gbps"][0] == pytest.approx(1024 / (row["time_us"][0] * 1e-6) / 1e9)
    assert len(row["latency_us"]) == 2
    # warm-up, then 4 calls per kept or dropped batch, then one call per latency trial
    assert len(calls) == 3 + 4 * len(row["spin_us"]) + 2 + 3 + 4 * len(slow["spin_us"]) + 2
    assert slow["dropped"] == 1 and slow["unheld"] == 0
    assert slow["spin_us"][1] == pytest.approx(2 * slow["spin_us"][0])
    assert slow["time_us"] == [pytest.approx(10.0), pytest.approx(10.0)]
