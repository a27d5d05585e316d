"""The report's silicon section over a 4-GPU bundle built here (no 4-GPU machine exists here):
the per-GPU host link and HBM against the datasheet, the pair matrices as nvbandwidth prints
them, the ceilings with their outliers, the training MFU against the measured ceiling and the
all-reduce bus bandwidth against the pair matrix. The numbers are made up for the test; they
test the arithmetic and the words, not any machine."""

from __future__ import annotations

import statistics

import pytest

from kit.model import Hardware
from kit.report import analysis, plot_silicon
from kit.workloads.copy_bandwidth import matrix
from tests.conftest import recipe_model, results_model

N = 4
NAME = "NVIDIA H100 80GB HBM3"


def _run(kind, bench, data, metrics=None, variant="p2p", repeat=0, env=None):
    return {
        "run_id": f"{bench}.{variant}.r{repeat}",
        "benchmark": bench,
        "kind": kind,
        "variant": variant,
        "repeat": repeat,
        "status": "ok",
        "device": "cuda",
        "world_size": N,
        "env": env or {},
        "metrics": metrics or {},
        "data": data,
    }


def _copy_data(h2d):
    per_gpu = [
        {
            "device": i,
            "mib": 512,
            "h2d_gbps": h2d[i],
            "d2h_gbps": 50.0,
            "local_gbps": 1500.0,
            "wrong": 0,
        }
        for i in range(N)
    ]
    one = matrix.one_way(N, lambda s, d: 360.0 + s + d)
    return {
        "params": {"outlier_pct": 5.0},
        "names": [NAME] * N,
        "per_gpu": per_gpu,
        "plateau": [
            {
                "device": 0,
                "mib": 1,
                "h2d_gbps": 20.0,
                "d2h_gbps": 20.0,
                "local_gbps": 300.0,
                "wrong": 0,
            },
            per_gpu[0],
        ],
        "pairs": {
            "ce_one_way": one,
            "ce_both_ways": matrix.both_ways(N, lambda a, b: 700.0),
            "sm_one_way": None,
            "latency_us": matrix.one_way(N, lambda s, d: 10.0),
        },
    }


def _mm_data(bf16):
    def trial(v):
        return {"shape": [8192, 8192, 8192], "matmuls": 50, "trials": [v], "tflops": v}

    return {
        "params": {"outlier_pct": 5.0},
        "gpus": [NAME] * N,
        "skipped": {},
        "dtypes": {
            "bf16": {
                "best_shape": [8192, 8192, 8192],
                "together": [trial(v) for v in bf16],
                "alone": [trial(v + 5) for v in bf16],
                "outliers_together": [3],
                "outliers_alone": [],
            }
        },
    }


def _benches():
    results = {
        "repeats": 2,
        "runs": [
            _run(
                "copy_bandwidth", "copy_bandwidth", _copy_data([55.0, 54.0, 56.0, 30.0]), repeat=0
            ),
            _run(
                "copy_bandwidth", "copy_bandwidth", _copy_data([55.4, 54.0, 56.0, 31.0]), repeat=1
            ),
            _run("matmul_ceiling", "matmul_ceiling", _mm_data([790.0, 780.0, 800.0, 600.0])),
            _run(
                "llama_lora_fsdp",
                "llama",
                {
                    "mfu": 0.4,
                    "precision": "bf16",
                    "peak_flops_per_gpu": 989e12,
                    "peak_flops_source": "H100 SXM bf16",
                },
            ),
            _run(
                "allreduce",
                "allreduce",
                {"sizes": []},
                {"busbw_largest": {"value": 300.0, "unit": "GB/s", "higher_is_better": True}},
            ),
            _run(
                "allreduce",
                "allreduce",
                {"sizes": []},
                {"busbw_largest": {"value": 28.0, "unit": "GB/s", "higher_is_better": True}},
                variant="no-p2p",
                env={"NCCL_P2P_DISABLE": "1"},
            ),
        ],
    }
    recipe = recipe_model("copy_bandwidth", "matmul_ceiling", "allreduce")
    return analysis.build_benchmarks(results_model(**results), recipe)


HARDWARE = Hardware.model_validate({
    "gpus": [
        {
            "index": i,
            "name": NAME,
            "pcie": {"gen_current": 5, "width_current": 16 if i < 3 else 8},
            "nvlinks": [{"active": True}] * 18,
        }
        for i in range(N)
    ]
})  # fmt: skip


def test_host_link_and_memory_are_held_against_the_datasheet_per_gpu():
    s = analysis.silicon(_benches(), HARDWARE)
    assert [h["gpu"] for h in s.host] == [0, 1, 2, 3]
    g0, g3 = s.host[0], s.host[3]
    assert g0["h2d_gbps"] == pytest.approx(55.2)  # median of the two repeats
    assert g0["pcie_gbs"] == pytest.approx(3.938 * 16) and g3["pcie_gbs"] == pytest.approx(
        3.938 * 8
    )
    assert g3["h2d_share"] == pytest.approx(30.5 / (3.938 * 8))  # a x8 slot shows as such
    assert g0["local_traffic_gbps"] == 3000.0  # bytes copied once, the memory moves twice
    assert g0["hbm_gbs"] == 3350 and g0["hbm_share"] == pytest.approx(3000 / 3350)
    assert [p["mib"] for p in s.plateau] == [1, 512]


def test_pair_matrices_print_as_nvbandwidth_and_skip_what_was_refused():
    s = analysis.silicon(_benches(), HARDWARE)
    keys = [m["key"] for m in s.matrices]
    assert keys == ["ce_one_way", "ce_both_ways", "latency_us"]  # sm_one_way was refused
    text = s.matrices[0]["text"].splitlines()
    assert text[0] == "memcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)"
    assert text[2] == " 0       N/A    361.00    362.00    363.00"
    assert any(
        "NVLink datasheet figure per direction" in n and "18 NVLink links" in n for n in s.notes
    )
    svg = plot_silicon.heatmap(s.matrices[0]["matrix"], s.matrices[0]["title"], "GB/s", "t")
    assert svg.startswith("<svg") and "N/A" in svg and "361" in svg


def test_ceilings_share_of_datasheet_and_the_outlier():
    s = analysis.silicon(_benches(), HARDWARE)
    (c,) = s.ceilings
    assert c["dtype"] == "bf16" and c["shape"] == "8192x8192x8192"
    assert c["median"] == pytest.approx(785.0) and c["weakest"] == 600.0
    assert c["alone_median"] == pytest.approx(790.0)
    assert c["peak_tflops"] == 989 and c["share"] == pytest.approx(785 / 989)
    assert c["outliers"] == [3]
    assert plot_silicon.ceilings(s.ceilings, "t", "t").startswith("<svg")


def test_training_and_allreduce_are_placed_against_the_measured_ceilings():
    s = analysis.silicon(_benches(), HARDWARE)
    training = next(p for p in s.placements if p.startswith("Llama-3.1-8B LoRA FSDP, p2p:"))
    achieved = 0.4 * 989
    assert f"{achieved:.0f} TFLOP/s per GPU, 40% of the datasheet's 989 TFLOP/s" in training
    assert f"{achieved / 785:.0%} of the 785 TFLOP/s bf16 ceiling measured here" in training
    (ar,) = [p for p in s.placements if p.startswith("all-reduce")]  # the no-p2p variant is not
    med = statistics.median(matrix.off_diagonal(matrix.one_way(N, lambda a, b: 360.0 + a + b)))
    assert f"300.0 GB/s at the largest size is {300 / med:.0%}" in ar
    assert f"{300 / 350:.0%} of its per-direction share both ways (350.0 GB/s)" in ar


def test_no_silicon_runs_no_section():
    results = results_model([_run("allreduce", "allreduce", {"sizes": []})])
    assert analysis.silicon(analysis.build_benchmarks(results, recipe_model()), {}) is None


def test_the_section_renders_tables_matrices_placements_and_figures():
    from kit.report.render import jinja_env, silicon_view

    view = silicon_view(_benches(), HARDWARE)
    assert [f.key for f in view["figures"]] == [
        "ce_one_way",
        "ce_both_ways",
        "latency_us",
        "plateau",
        "ceilings",
    ]
    html = jinja_env().get_template("silicon.j2").render(silicon=view, pdf=False)
    assert "Silicon: what these GPUs can do" in html
    assert "55.2 GB/s" in html and "(87.6%)" in html  # GPU 0 host to device, share of PCIe x16
    assert "memcpy CE GPU(row) -&gt; GPU(column) bandwidth (GB/s)" in html
    assert "bf16: GPU 3 more than 5% below the median of the other GPUs" in html
    assert "of the 785 TFLOP/s bf16 ceiling measured here" in html
    assert html.count("<svg") == 5
    pdf_html = jinja_env().get_template("silicon.j2").render(silicon=view, pdf=True)
    assert pdf_html.count('src="data:image/svg+xml;base64,') == 5
