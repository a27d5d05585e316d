"""kit.report.facts on the committed 2x H200 bundles: energy, power in the window, share of peak, cost."""

import itertools
import json
import random
import statistics

import pytest

from kit.model import load_bundle
from kit.report import analysis
from kit.report.analysis.summary import summarize_bench
from kit.report.facts.efficiency import (
    cost_per_million,
    energy_per_unit,
    link_share,
    mfu_basis,
    power_sentence,
    scaling_efficiency,
)
from kit.report.facts.window import integrate, timed_window, used_gpus, window_facts
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


def _integrate_by_scanning(t, y, a, b):
    """The rule integrate keeps: each point's value from the first sample pair holding it."""
    pts = [(float(ti), float(yi)) for ti, yi in zip(t, y, strict=True) if yi is not None]
    if not pts or b <= a:
        return 0.0

    def at(x):
        if x <= pts[0][0]:
            return pts[0][1]
        if x >= pts[-1][0]:
            return pts[-1][1]
        for (t0, y0), (t1, y1) in itertools.pairwise(pts):
            if t0 <= x <= t1:
                return y0 if t1 == t0 else y0 + (y1 - y0) * (x - t0) / (t1 - t0)
        raise AssertionError

    xs = [a, *(ti for ti, _ in pts if a < ti < b), b]
    ys = [at(x) for x in xs]
    return sum((x1 - x0) * (y0 + y1) / 2 for (x0, x1), (y0, y1) in
               zip(itertools.pairwise(xs), itertools.pairwise(ys), strict=True))  # fmt: skip


def test_integrate_by_bisection_keeps_the_first_pair_rule():
    """integrate found each point's pair by a scan per point: 17,268 scans of the telemetry of a
    six-run bundle (1.1 s of its report's 19.7 s under cProfile). It bisects sorted samples now; repeated times,
    gaps (None) and samples out of order (an edited bundle) give what the scan gave."""
    rng = random.Random(7)
    for case in range(2000):
        t = sorted(rng.choice([rng.uniform(0, 10), float(rng.randint(0, 10))]) for _ in range(25))
        if case % 3 == 0:
            rng.shuffle(t)
        y = [rng.choice([None, rng.uniform(0, 700)]) for _ in t]
        a, b = rng.uniform(-1, 11), rng.uniform(-1, 11)
        assert integrate(t, y, a, b) == pytest.approx(_integrate_by_scanning(t, y, a, b), abs=1e-9)


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


def _idle_beside(run, hw, idle=2):
    """The run on a box with `idle` more GPUs, which telemetry sampled too (a container handed
    every GPU): idle power, the idle clock, no utilisation, NVML's GpuIdle reason."""
    run, hw = run.model_copy(deep=True), hw.model_copy(deep=True)
    first = run.telemetry.gpus[0]
    n = len(first["samples"]["t_s"])
    for k in range(idle):
        index, uuid = len(hw.gpus), f"GPU-idle-{k}"
        samples = {col: [None] * n for col in first["samples"]}
        samples["t_s"] = list(first["samples"]["t_s"])
        samples["power_w"], samples["sm_clock_mhz"] = [75.0] * n, [345] * n
        samples["util_gpu"], samples["throttle_mask"] = [0] * n, [1] * n
        run.telemetry.gpus.append({**first, "index": index, "uuid": uuid, "samples": samples})
        hw.gpus.append(hw.gpus[0].model_copy(update={"index": index, "uuid": uuid}))
    return run, hw


def test_idle_gpus_of_the_box_are_not_averaged_into_power_clock_or_cap():
    """Issue 48: 2 of 4 GPUs ran; the page read "374 W per GPU, 1,110 MHz" where the two that
    ran held 671 W and 1,879 MHz at the cap. Only the GPUs the runs used count."""
    results, hw = load(LLAMA)
    run = next(r for r in results.runs if r.variant == "p2p")
    alone = window_facts(run, hw)
    box_run, box = _idle_beside(run, hw)
    assert len(box_run.telemetry.gpus) == 4 and run.world_size == 2
    assert [g["index"] for g in used_gpus(box_run)] == [0, 1]
    boxed = window_facts(box_run, box)
    assert boxed.gpus == 2 and boxed.samples == alone.samples
    assert boxed.power_w_per_gpu_mean == pytest.approx(alone.power_w_per_gpu_mean)
    assert boxed.power_w_per_gpu_mean > 600  # the 700 W cap's GPUs, not a mean with idle ones
    assert boxed.sm_clock_mhz_mean == pytest.approx(alone.sm_clock_mhz_mean)
    assert boxed.at_cap_share == pytest.approx(alone.at_cap_share) and boxed.power_limited
    assert boxed.energy_j == pytest.approx(alone.energy_j)
    assert power_sentence(boxed) == power_sentence(alone)
    # page 1's power line reads the same facts: the same sentence on the box
    recipe = load_bundle(LLAMA).recipe
    on_box = results.model_copy(update={"runs": [_idle_beside(r, hw)[0] for r in results.runs]})
    lines = [
        summarize_bench(analysis.build_benchmarks(res, recipe)[0], h, "").variants[0].power
        for res, h in ((results, hw), (on_box, box))
    ]
    assert lines[0].sentence == lines[1].sentence and lines[1].limited


def test_the_gpus_a_run_recorded_are_the_ones_it_used():
    """The energy counter names each rank's GPU by UUID: those are the run's, wherever they sit."""
    results, hw = load(LLAMA)
    run, _ = _idle_beside(next(r for r in results.runs if r.variant == "p2p"), hw)
    second = run.telemetry.gpus[1]["uuid"]
    run.data.energy_counter = {"gpus": [{"rank": 0, "uuid": "GPU-idle-0"}, {"uuid": second}]}
    assert [g["index"] for g in used_gpus(run)] == [1, 2]


def test_the_telemetry_plot_draws_the_gpus_the_runs_drove_only():
    """Issue 48: the telemetry figure drew the box's idle GPUs beside the two that ran (flat
    75 W lines under the 700 W ones); it follows the power line's rule (used_gpus)."""
    results, hw = load(LLAMA)
    recipe = load_bundle(LLAMA).recipe
    on_box = results.model_copy(update={"runs": [_idle_beside(r, hw)[0] for r in results.runs]})
    drawn = {
        label: analysis.telemetry_series(analysis.build_benchmarks(res, recipe)[0])
        for label, res in (("alone", results), ("box", on_box))
    }
    assert drawn["box"] and len(drawn["box"]) == len(drawn["alone"])
    assert {s["gpu"] for s in drawn["box"]} == {0, 1}
    assert all(min(s["samples"]["power_w"]) != 75.0 for s in drawn["box"])
