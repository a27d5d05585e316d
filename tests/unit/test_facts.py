"""kit.facts on the committed 2x H200 bundles: energy, power in the window, share of peak, cost."""

import json
import statistics

import pytest

from kit.facts.efficiency import (
    cost_per_million,
    energy_per_unit,
    link_share,
    mfu_basis,
    power_sentence,
    scaling_efficiency,
)
from kit.facts.window import integrate, timed_window, window_facts
from kit.model import load_bundle
from kit.shared.gpu_specs import SPECS, pcie_gbs, peak_flops, spec_for
from tests.conftest import ROOT

EXAMPLES = ROOT / "reports" / "examples"
LLAMA = EXAMPLES / "h200x2-fsdp-llama"
ALLREDUCE = EXAMPLES / "h200x2-allreduce"


def load(bundle):
    if not bundle.is_dir():
        pytest.skip(f"{bundle.name} is not here")
    data = load_bundle(bundle)
    return data.results, data.hardware


def test_integrate_interpolates_at_the_edges():
    t, y = [0.0, 1.0, 2.0, 3.0], [0.0, 10.0, 20.0, 30.0]  # y = 10 t
    assert integrate(t, y, 0.5, 2.5) == pytest.approx(10 * (2.5**2 - 0.5**2) / 2)
    assert integrate(t, [5.0, None, 5.0, 5.0], -1.0, 4.0) == pytest.approx(25.0)  # held flat
    assert integrate(t, y, 2.0, 2.0) == 0.0


def test_llama_energy_per_token_matches_power_over_throughput():
    results, hw = load(LLAMA)
    by_variant = {}
    for run in results.runs:
        e = energy_per_unit(run, hw)
        assert e is not None and e.unit == "tokens" and e.complete and e.gpus == 2
        assert timed_window(run).method == "inferred"  # written before the worker marked it
        # independent check: mean total board power of the window's samples / window throughput
        w = timed_window(run)
        total_power = sum(
            statistics.mean(
                p
                for t, p in zip(g["samples"]["t_s"], g["samples"]["power_w"], strict=True)
                if w.start_s <= t
            )
            for g in run.telemetry.gpus
        )
        window_throughput = run.data.extra("throughput_window")
        assert e.j_per_unit == pytest.approx(total_power / window_throughput, 0.03)
        assert e.units_per_kwh == pytest.approx(3.6e6 / e.j_per_unit)
        assert "GPU board power" in e.basis
        by_variant.setdefault(run.variant, []).append(e)
    # P2P runs sat at the 700 W cap; the no-P2P runs touched it (SwPowerCap in 44-53% of the
    # samples: only the one over half counts as limited), and cost more energy per token
    assert all(e.power_limited for e in by_variant["p2p"])
    assert [e.power_limited for e in by_variant["no-p2p"]] == [False, False, True]
    assert max(e.j_per_unit for e in by_variant["p2p"]) < min(
        e.j_per_unit for e in by_variant["no-p2p"]
    )


def test_window_facts_name_the_throttle_reason_and_clocks():
    results, hw = load(LLAMA)
    run = next(r for r in results.runs if r.variant == "p2p")
    f = window_facts(run, hw)
    assert f.power_limit_w == hw.gpus[0].power_limit_w
    assert set(f.throttle_share) <= {"SwPowerCap", "HwSlowdown", "SwThermalSlowdown"}
    assert f.sm_clock_mhz_mean < f.sm_clock_mhz_max_spec
    text = power_sentence(f)
    assert text.startswith("power-limited: ") and "SwPowerCap" in text
    assert json.loads(json.dumps(f.to_dict()))["window"]["label"].startswith("timed window")


def test_a_recorded_window_is_used_exactly():
    results, hw = load(LLAMA)
    run = results.runs[0].model_copy(deep=True)
    t = run.telemetry.gpus[0]["samples"]["t_s"]
    run.telemetry.t0_monotonic_s = 1000.0
    run.data.window_monotonic_s = [1000.0 + t[0], 1000.01 + t[3]]  # idle start: ~120 W
    w = timed_window(run)
    assert (w.method, w.start_s, w.end_s) == ("recorded", t[0], pytest.approx(t[3] + 0.01))
    f = window_facts(run, hw)
    assert f.samples == 8 and not f.power_limited and f.throttle_share == {}


def test_mfu_names_its_peak_and_dtype():
    results, _ = load(LLAMA)
    m = mfu_basis(results.runs[0])
    assert m["dtype"] == "bf16" and m["peak_flops_per_gpu"] == peak_flops("NVIDIA H200", "bf16")[0]
    assert "bf16 dense per GPU" in m["sentence"]


def test_busbw_share_of_nvlink_and_pcie():
    results, hw = load(ALLREDUCE)
    run = next(r for r in results.runs if r.variant == "p2p" and r.status == "ok")
    busbw = run.metrics["busbw_peak"].value
    nv = link_share(busbw, hw, "nvlink")
    links = sum(x.active for x in hw.gpus[0].nvlinks)
    assert nv["figure_gbs"] == links * spec_for("NVIDIA H200").nvlink_gbs_per_link
    assert 0 < nv["share"] < 1 and nv["share"] == pytest.approx(busbw / nv["figure_gbs"])
    pc = link_share(busbw, hw, "pcie")
    assert pc["figure_gbs"] == pytest.approx(pcie_gbs(5, 16)) and "PCIe gen 5 x16" in pc["basis"]
    with pytest.raises(ValueError, match="link must be"):
        link_share(busbw, hw, "ethernet")


def test_spec_table_matches_names_and_every_row_has_a_source():
    assert spec_for("NVIDIA H100 PCIe").key == "H100 PCIe"
    assert spec_for("NVIDIA H100 80GB HBM3").key == "H100 SXM"
    assert spec_for("NVIDIA GeForce RTX 3090 Ti").key == "RTX 3090 Ti"
    assert spec_for("NVIDIA GeForce RTX 3090").key == "RTX 3090"
    assert spec_for("NVIDIA A100 80GB PCIe").key == "A100 PCIe"
    assert spec_for("NVIDIA GeForce GTX 1080") is None
    for s in SPECS:
        assert s.source and set(s.peak_flops) - {"fp8"} == {"bf16", "fp16", "tf32", "fp32"}
        assert s.peak_flops["bf16"] >= s.peak_flops["tf32"] >= s.peak_flops["fp32"] / 2
        assert s.peak_flops.get("fp8", 2 * s.peak_flops["bf16"]) == pytest.approx(
            2 * s.peak_flops["bf16"], rel=0.01
        )  # fp8 tensor cores run twice the bf16 rate where the datasheet lists them
        assert s.hbm_gbs >= 0


def test_cost_and_scaling():
    # 2 GPUs at $3/h, 10,000 tokens/s: 36M tokens per hour cost $6 -> $0.1667 per 1M
    assert cost_per_million(10_000.0, 2, 3.0) == pytest.approx(6 / 36)
    assert scaling_efficiency(28148.0, 4, 14074.0, 2) == pytest.approx(1.0)
    with pytest.raises(ValueError):
        cost_per_million(0.0, 2, 3.0)
