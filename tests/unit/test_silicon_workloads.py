"""The silicon workloads' logic that needs no GPU: the pair matrix for any number of GPUs (the
measurement of a pair is the one thing replaced, since no GPU pair exists here), nvbandwidth's
layout, the parameters, the metrics and the outlier rule."""

from __future__ import annotations

import pytest

from kit.io.errors import InputError
from kit.recipe import load_recipe
from kit.workloads.copy_bandwidth import matrix
from kit.workloads.copy_bandwidth.params import CopyBandwidthParams
from kit.workloads.copy_bandwidth.worker import plateau_loop, summarize
from kit.workloads.matmul_ceiling.params import MatmulCeilingParams
from kit.workloads.matmul_ceiling.worker import outliers
from tests.conftest import ROOT


@pytest.mark.parametrize("n", [1, 2, 3, 4, 8])
def test_one_way_measures_every_ordered_pair_once(n):
    calls = []
    m = matrix.one_way(n, lambda s, d: calls.append((s, d)) or 10.0 * s + d)
    assert sorted(calls) == [(s, d) for s in range(n) for d in range(n) if s != d]
    for s in range(n):
        assert m[s][s] is None
        for d in range(n):
            if s != d:
                assert m[s][d] == 10.0 * s + d  # row = source, column = destination


@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_both_ways_measures_each_unordered_pair_once_and_is_symmetric(n):
    calls = []
    m = matrix.both_ways(n, lambda a, b: calls.append((a, b)) or float(a + 2 * b))
    assert len(calls) == n * (n - 1) // 2 and all(a < b for a, b in calls)
    assert all(m[a][b] == m[b][a] for a in range(n) for b in range(n))
    assert all(m[i][i] is None for i in range(n))


def test_render_is_nvbandwidths_layout():
    text = matrix.render(
        "memcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)",
        [[None, 276.07], [276.19, None]],
    )
    assert text.splitlines() == [
        "memcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)",
        "           0         1",
        " 0       N/A    276.07",
        " 1    276.19       N/A",
        "",
        "SUM 552.26",
    ]


def test_pairs_without_peer_access_are_na_and_staged_still_runs():
    n = 4
    peer = [[a != b and {a, b} != {0, 3} for b in range(n)] for a in range(n)]
    tests = {
        "ce_one_way": matrix.PairTest("one", lambda a, b: 100.0),
        "ce_both_ways": matrix.PairTest("both", lambda a, b: 200.0),
        "staged_one_way": matrix.PairTest("one", lambda a, b: 20.0, needs_peer=False),
    }
    notes, logged = [], []
    out = matrix.measure_all(n, peer, tests, notes, logged.append)
    assert out["ce_one_way"][0][3] is None and out["ce_one_way"][3][0] is None
    assert out["ce_one_way"][0][1] == 100.0 and out["ce_both_ways"][1][2] == 200.0
    assert out["ce_both_ways"][0][3] is None
    assert len(matrix.off_diagonal(out["staged_one_way"])) == n * (n - 1)
    assert notes == [] and len(logged) == 3


def test_a_refused_path_costs_its_matrix_with_a_note_not_the_others():
    def refuse(a, b):
        raise RuntimeError("peer mapping refused\nmore detail")

    tests = {
        "sm_one_way": matrix.PairTest("one", refuse),
        "ce_one_way": matrix.PairTest("one", lambda a, b: 50.0),
    }
    notes = []
    out = matrix.measure_all(2, [[False, True], [True, False]], tests, notes, lambda s: None)
    assert out["sm_one_way"] is None and out["ce_one_way"][0][1] == 50.0
    assert notes == ["pairs sm_one_way not measured: peer mapping refused"]


def _gpu(dev, h2d, d2h, local, wrong=0):
    return {"device": dev, "mib": 512, "h2d_gbps": h2d, "d2h_gbps": d2h, "local_gbps": local,
            "wrong": wrong}  # fmt: skip


def test_summary_is_the_weakest_gpu_and_pair_and_the_slowest_latency():
    per_gpu = [_gpu(0, 55.0, 50.0, 2000.0), _gpu(1, 40.0, 51.0, 1900.0, wrong=3)]
    plateau = [_gpu(0, 20.0, 20.0, 900.0, wrong=1), per_gpu[0]]
    pairs = {
        "ce_one_way": [[None, 390.0], [370.0, None]],
        "ce_both_ways": [[None, 760.0], [760.0, None]],
        "sm_one_way": None,  # refused: no metric, no crash
        "latency_us": [[None, 12.0], [15.0, None]],
        "wrong": 2,
    }
    m = summarize({"per_gpu": per_gpu, "plateau": plateau, "pairs": pairs})
    assert m["h2d_gbps"]["value"] == 40.0 and m["d2h_gbps"]["value"] == 50.0
    assert m["device_local_gbps"]["value"] == 1900.0
    assert m["pair_ce_one_way_gbps"]["value"] == 370.0
    assert m["pair_ce_both_ways_gbps"]["value"] == 760.0
    assert "pair_sm_one_way_gbps" not in m
    assert m["pair_latency_us"] == {"value": 15.0, "unit": "us", "higher_is_better": False}
    assert m["wrong_total"]["value"] == 3 + 1 + 2  # per GPU, the plateau's own sizes, pairs


def test_copy_parameters_name_their_field():
    with pytest.raises(ValueError, match=r"^staged_size_mib: must be 1 to pair_size_mib"):
        CopyBandwidthParams(pair_size_mib=16, staged_size_mib=64)
    with pytest.raises(ValueError, match=r"^plateau_min_mib"):
        CopyBandwidthParams(size_mib=4, plateau_min_mib=8)
    assert CopyBandwidthParams(size_mib=512, plateau_min_mib=1).plateau_sizes() == [
        1, 4, 16, 64, 256, 512,
    ]  # fmt: skip
    assert CopyBandwidthParams(size_mib=16, plateau_min_mib=16).plateau_sizes() == [16]
    assert plateau_loop(1, 16) == 1024 and plateau_loop(64, 16) == 16 and plateau_loop(512, 16) == 4


def test_matmul_parameters():
    p = MatmulCeilingParams(m_sizes=[256], n_sizes=[128, 256], k_sizes=[64], alone_dtypes=["bf16"])
    assert p.shapes() == [(256, 128, 64), (256, 256, 64)]
    assert p.alone("bf16") and not p.alone("fp8")
    assert MatmulCeilingParams().alone("tf32")  # None: every dtype
    with pytest.raises(ValueError, match=r"^m_sizes"):
        MatmulCeilingParams(m_sizes=[100])
    with pytest.raises(ValueError, match=r"^dtypes"):
        MatmulCeilingParams(dtypes=["bf16", "bf16"])


def test_outliers_are_judged_against_the_other_gpus():
    assert outliers([800.0, 790.0, 700.0, 805.0], 5.0) == [2]
    assert outliers([800.0, 700.0], 5.0) == [1]  # two GPUs: the other one is the yardstick
    assert outliers([800.0, 790.0], 5.0) == []
    assert outliers([800.0], 5.0) == []


def test_the_silicon_recipe_loads_at_both_scales():
    recipe = load_recipe(ROOT / "recipes/silicon.yaml")
    kinds = [b.kind for b in recipe.benchmarks]
    assert kinds == ["copy_bandwidth", "matmul_ceiling"]
    copy = recipe.benchmarks[0]
    assert copy.resolved_params(smoke=False)["size_mib"] == 512  # nvbandwidth's default
    assert copy.resolved_params(smoke=True)["size_mib"] <= 16
    mm = recipe.benchmarks[1]
    assert mm.resolved_params(smoke=True)["dtypes"] == ["fp32"]
    assert "fp8" in mm.resolved_params(smoke=False)["dtypes"]


def test_a_bad_silicon_parameter_is_one_line_naming_it(tmp_path):
    text = (ROOT / "recipes/silicon.yaml").read_text().replace("pair_samples: 5", "pair_samples: 0")
    bad = tmp_path / "silicon.yaml"
    bad.write_text(text)
    with pytest.raises(InputError, match=r"pair_samples: must be at least 1") as err:
        load_recipe(bad)
    assert "\n" not in str(err.value)
