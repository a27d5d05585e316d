"""Each collective sweep through the real worker: torchrun, two gloo processes on the CPU (the
sweeps themselves are the runs of the suite's shared bundle, tests.conftest.CPU_COLLECTIVES:
`kit reproduce` launched them as a user's recipe would).

The result must follow nccl-tests' conventions: sizes (all-gather: the gathered output;
reduce-scatter: the input; all-to-all: what each rank sends), algbw = size / time,
busbw = algbw x the collective's bus factor, and #wrong = 0 for a correct collective.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys

import pytest

from tests.conftest import COLLECTIVE_KINDS, ROOT

FACTORS_AT_2 = {"allreduce": 1.0, "all_gather": 0.5, "reduce_scatter": 0.5, "alltoall": 0.5}
assert set(FACTORS_AT_2) == set(COLLECTIVE_KINDS)
CALLS = {"allreduce": "all_reduce", "all_gather": "all_gather_single",
         "reduce_scatter": "reduce_scatter_single", "alltoall": "all_to_all_single"}  # fmt: skip
PER_RANK_CHUNKS = {"allreduce": False, "all_gather": True, "reduce_scatter": True, "alltoall": True}


def run_two_gloo_ranks(tmp_path, spec: dict, ranks: int = 2) -> None:
    """The worker on two gloo ranks (torchrun), from `spec` written to tmp_path/spec.json."""
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={ranks}",
         "-m", "kit.worker", str(tmp_path / "spec.json")],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
        env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(FACTORS_AT_2))
def test_collective_sweep_on_two_gloo_ranks(kind, cpu_collectives_bundle):
    """min_bytes 4, max_bytes 4096, factor 8, 2 iterations after 1 warm-up, 2 trials."""
    run_dir = cpu_collectives_bundle / "runs" / f"{kind}.p2p.r0"
    spec = json.loads((run_dir / "spec.json").read_text())
    assert spec["device"] == "cpu" and spec["nproc"] == 2 and spec["params"]["min_bytes"] == 4
    result = json.loads((run_dir / "result.json").read_text())
    assert result["status"] == "ok" and result["world_size"] == 2 and result["backend"] == "gloo"
    data = result["data"]
    factor = FACTORS_AT_2[kind]
    assert data["bus_factor"] == pytest.approx(factor)
    rows = data["sizes"]
    # NCCL's per-size choice: gloo has none to log, and the sweep makes no extra call for it
    assert data["nccl_choice"] == "not logged: gloo is not NCCL"
    assert data["call"] == "torch.distributed." + CALLS[kind]
    assert not any("nccl_calls" in r for r in rows)
    # the placement each row timed, as nccl-tests' columns name it; all-gather and
    # reduce-scatter are out of place and time their in-place form after it, checked too
    assert {r["placement"] for r in rows} == {"in-place" if kind == "allreduce" else "out-of-place"}
    if kind in ("all_gather", "reduce_scatter"):
        for r in rows:
            o = r["other"]
            assert o["placement"] == "in-place" and o["wrong"] == 0 and o["timing"] == "host-clock"
            for t, alg, bus in zip(o["time_us"], o["algbw_gbps"], o["busbw_gbps"], strict=True):
                assert alg == pytest.approx(r["bytes"] / (t * 1e-6) / 1e9)
                assert bus == pytest.approx(alg * factor)
    else:
        assert not any("other" in r for r in rows)
    # 4 B asks for less than one float32 per rank: one element each, as nccl-tests rounds
    expected_sizes = [4, 32, 256, 2048] if not PER_RANK_CHUNKS[kind] else [8, 32, 256, 2048]
    assert [r["bytes"] for r in rows] == expected_sizes
    for r in rows:
        # the CPU has no GPU spin: the host clock, named so, the slowest rank's time; the
        # one-call latency is its own field, one per trial, never mixed into time_us
        assert r["wrong"] == 0 and r["timing"] == "host-clock" and r["ranks"] == "slowest"
        assert "spin_us" not in r and "dropped" not in r
        assert len(r["latency_us"]) == 2 and all(x > 0 for x in r["latency_us"])
        assert r["count"] == r["bytes"] // 4
        if PER_RANK_CHUNKS[kind]:
            assert r["chunk"] * 2 == r["count"]  # size/n elements per rank
        for t, alg, bus in zip(r["time_us"], r["algbw_gbps"], r["busbw_gbps"], strict=True):
            assert alg == pytest.approx(r["bytes"] / (t * 1e-6) / 1e9)
            assert bus == pytest.approx(alg * factor)
    m = result["metrics"]
    assert m["wrong_total"]["value"] == 0
    assert m["busbw_largest"]["value"] == pytest.approx(statistics.median(rows[-1]["busbw_gbps"]))
    assert m["busbw_peak"]["value"] >= m["busbw_largest"]["value"]


@pytest.mark.slow
def test_one_rank_states_no_bus_bandwidth_rather_than_zero(tmp_path):
    """An all-reduce on a one-GPU box (the acceptance recipe on one H200, 2026-11-29) printed
    "busbw_largest 0 GB/s": the bus factor 2(n-1)/n is 0 at n = 1, and a 0 reads as a dead link."""
    spec = {"schema": 1, "run_id": "allreduce.p2p.r0", "benchmark": "allreduce",
            "kind": "allreduce", "variant": "p2p", "repeat": 0, "device": "cpu", "nproc": 1,
            "smoke": True, "params": {"min_bytes": 4, "max_bytes": 256, "factor": 8, "iters": 2,
                                      "warmup_iters": 1, "trials": 2},
            "env": {}, "result_path": "result.json"}  # fmt: skip
    run_two_gloo_ranks(tmp_path, spec, ranks=1)
    result = json.loads((tmp_path / "result.json").read_text())
    assert result["status"] == "ok" and result["world_size"] == 1
    assert result["data"]["bus_factor"] == 0
    assert "busbw_largest" not in result["metrics"] and "busbw_peak" not in result["metrics"]
    assert result["metrics"]["wrong_total"]["value"] == 0
    assert any(n.startswith("one rank: no bus bandwidth") for n in result["notes"])


@pytest.mark.slow
def test_a_size_budget_runs_fewer_calls_where_they_are_slow(tmp_path):
    """size_budget_s: a size whose first call is slow runs fewer calls, the same on every rank,
    and its row says how many; the counts follow from the recorded first call alone."""
    from kit.workloads.allreduce.params import AllreduceParams

    params = {"min_bytes": 4, "max_bytes": 4 << 20, "factor": 1024, "iters": 50,
              "warmup_iters": 4, "trials": 2, "size_budget_s": 0.01}  # fmt: skip
    spec = {"schema": 1, "run_id": "allreduce.p2p.r0", "benchmark": "allreduce",
            "kind": "allreduce", "variant": "p2p", "repeat": 0, "device": "cpu", "nproc": 2,
            "smoke": True, "params": params, "env": {}, "result_path": "result.json"}  # fmt: skip
    run_two_gloo_ranks(tmp_path, spec)
    rows = json.loads((tmp_path / "result.json").read_text())["data"]["sizes"]
    p = AllreduceParams(**params)
    for r in rows:
        want = p.within_budget(r["calls"]["first_call_s"])
        assert (r["calls"]["warmup"], r["calls"]["iters"]) == (want.warmup_iters, want.iters)
        assert len(r["time_us"]) == 2
    # 4 MiB over gloo: 1 + 100 calls of a millisecond or more cannot fit 10 ms
    assert rows[-1]["bytes"] == 4 << 20 and 5 <= rows[-1]["calls"]["iters"] < 50
