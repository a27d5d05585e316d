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
