"""The numbers nccl-tests users read: sizes of the sweep and the bus bandwidth factor."""

from kit.workloads.allreduce.params import AllreduceParams


def bus_factor(n: int) -> float:
    # imported lazily: kit.workloads.allreduce.worker imports torch
    from kit.workloads.allreduce.worker import bus_factor as f

    return f(n)


def test_bus_factor_matches_nccl_tests():
    # nccl-tests doc/PERFORMANCE.md: busbw = algbw * 2(n-1)/n for all-reduce
    assert bus_factor(2) == 1.0
    assert bus_factor(4) == 1.5
    assert bus_factor(8) == 1.75
    assert bus_factor(1) == 0.0


def test_sizes_are_a_factor_series():
    assert AllreduceParams(min_bytes=8, max_bytes=128, factor=2).sizes() == [8, 16, 32, 64, 128]
    assert AllreduceParams(min_bytes=8, max_bytes=100, factor=4).sizes() == [8, 32]
    assert len(AllreduceParams(min_bytes=8, max_bytes=8 << 30).sizes()) == 31


def test_a_size_budget_bounds_the_calls_of_a_slow_size_only():
    from kit.workloads.allreduce.params import AllreduceParams

    p = AllreduceParams(warmup_iters=20, iters=100, trials=3, size_budget_s=5.0)
    assert p.within_budget(0.001) is p  # 320 calls of 1 ms: 0.32 s, inside the budget
    slow = p.within_budget(0.5)  # 8 GiB at 16 GB/s algbw: 160 s unbounded
    assert slow.warmup_iters == 1 and slow.iters == 5  # at least 5 a trial
    assert (slow.warmup_iters + slow.trials * slow.iters) * 0.5 <= 8.0
    mid = p.within_budget(0.01)  # 3.2 s unbounded: unchanged
    assert mid is p
    tight = p.within_budget(0.02)  # 6.4 s: 25 warm-up at most 1 s, the rest in 4 s
    assert tight.warmup_iters == 20 and tight.iters == int((5.0 - 20 * 0.02) / (3 * 0.02))
    assert AllreduceParams().within_budget(10.0) == AllreduceParams()  # no budget: unchanged
