"""What the report says, from the fixture bundles: verdicts, failures, warnings, plots."""

from __future__ import annotations

import re
import tarfile
from pathlib import Path

import pytest

from kit.bundle import Bundle
from kit.model import Hardware, Results, Telemetry, load_bundle
from kit.report import analysis, plots
from kit.report.render import context, machine_line
from kit.shared import metrics as catalog
from kit.stats import paired_ratio, summarize
from tests.conftest import ROOT, recipe_model, results_model

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "bundles"


EXAMPLES = Path(__file__).resolve().parent.parent.parent / "reports" / "examples"


def load(name: str, root: Path = FIXTURES) -> tuple[Bundle, list[analysis.Benchmark]]:
    b = Bundle.load(root / name)
    data = load_bundle(b.path)
    return b, analysis.build_benchmarks(data.results, data.recipe)


def typed(b: Bundle) -> Results:
    return load_bundle(b.path).results


def by_name(benches, name):
    return next(b for b in benches if b.name == name)


def test_p2p_verdict_is_the_paired_ratio_of_the_runs():
    b, benches = load("synthetic-2gpu")
    runs = b.results.runs

    def values(bench, variant, metric):
        rs = sorted(
            (r for r in runs if r.benchmark == bench and r.variant == variant),
            key=lambda r: r.repeat,
        )
        return [r.metrics[metric].value for r in rs]

    expected = paired_ratio(
        values("llama-lora-fsdp", "p2p", "throughput"),
        values("llama-lora-fsdp", "no-p2p", "throughput"),
    )
    verdict = by_name(benches, "llama-lora-fsdp").verdicts[0]
    assert verdict.sentence.startswith("Peer-to-peer makes Llama-3.1-8B LoRA FSDP ")
    assert expected.sentence() in verdict.sentence
    assert "in throughput (3 paired repeats)" in verdict.sentence
    # all-reduce: busbw at the largest size, the per-repeat metric busbw_largest
    ar = by_name(benches, "allreduce").verdicts[0]
    assert ar.metric == "busbw_largest"
    exp = paired_ratio(
        values("allreduce", "p2p", "busbw_largest"), values("allreduce", "no-p2p", "busbw_largest")
    )
    assert f"{exp.estimate:.2f}x faster" in ar.sentence


def test_clean_bundle_has_no_findings():
    b, benches = load("synthetic-2gpu")
    assert analysis.findings(typed(b), benches) == []


def test_failures_are_named_and_never_numbers():
    _, benches = load("synthetic-failures")
    ar = by_name(benches, "allreduce")
    no = next(v for v in ar.variants if v.name == "no-p2p")
    assert no.ok == [] and len(no.failed) == 3
    assert ar.verdicts[0].failed and "every run of no-p2p failed" in ar.verdicts[0].sentence
    cell = next(h for h in analysis.headline(ar) if h["variant"] == "no-p2p")
    assert cell["failed"] and cell["row"].summary is None and cell["row"].values == []
    assert all(row.summary is None for row in (r["no-p2p"] for r in ar.metrics.values()))
    # the all-reduce curve has no point for the failed variant
    assert analysis.allreduce_curves(ar)["curves"]["no-p2p"] == {}
    # gpt2 p2p: 2 of 3 repeats finished; only those two numbers count
    gpt2 = by_name(benches, "gpt2-ddp")
    p2p = next(v for v in gpt2.variants if v.name == "p2p")
    assert len(p2p.ok) == 2 and gpt2.metrics["throughput"]["p2p"].summary.n == 2
    # llama no-p2p: one run never ran
    llama = by_name(benches, "llama-lora-fsdp")
    assert next(v for v in llama.variants if v.name == "no-p2p").missing == 1


def test_failures_bundle_findings_cover_every_trust_problem():
    b, benches = load("synthetic-failures")
    text = "\n".join(
        f"{f.level} {f.title} {f.detail}" for f in analysis.findings(typed(b), benches)
    )
    assert "error 4 of 17 runs did not finish" in text
    assert "allreduce.no-p2p.r0 (timeout)" in text and "gpt2-ddp.p2p.r1 (failed)" in text
    assert "1 planned run never ran" in text
    assert "12 wrong elements (#wrong > 0)" in text
    assert "llama-lora-fsdp.no-p2p.r0: P2P was disabled but NCCL made 16 P2P connection(s)" in text
    # the power cap is normal operation: only the thermal slowdown is a caution
    assert (
        "1 run was slowed while busy by a reason other than the power cap: SwThermalSlowdown in 1"
        in text
    )
    assert re.search(r"noisy results.*GPT-2 124M DDP: .*no-p2p throughput 1\d\.\d%", text)
    assert "preflight shm-size" in text


def test_cpu_smoke_findings_and_gloo_verdict():
    b, benches = load("cpu-smoke")
    titles = [f.title for f in analysis.findings(typed(b), benches)]
    assert any(t.startswith("smoke scale") for t in titles)
    assert any("CPU (gloo)" in t for t in titles)
    assert any(t.startswith("unpinned environment") for t in titles)
    sentence = benches[0].verdicts[0].sentence
    assert "on the CPU (gloo, where NCCL settings have no effect)" in sentence
    assert "noise" in sentence
    # noisy runs: the verdict is withheld, never "no measurable difference" beside a CV of 80%
    assert benches[0].verdicts[0].withheld and "the runs were noisy" in sentence
    assert "no measurable difference" not in sentence
    # each withheld sentence names its metric: two sentences with two CVs must not read alike
    sentences = [v.sentence for v in benches[0].verdicts if v.withheld]
    assert len(sentences) == len(set(sentences)) >= 2
    assert all(f"verdict withheld ({catalog.label(v.metric)})" in v.sentence
               for v in benches[0].verdicts if v.withheld)  # fmt: skip


@pytest.mark.parametrize(
    ("transports", "env", "expected"),
    [
        ({"P2P/CUMEM": 8}, {}, None),
        ({"SHM": 8}, {"NCCL_P2P_DISABLE": "1"}, None),
        ({"P2P/CUMEM": 2, "SHM": 6}, {"NCCL_P2P_DISABLE": "1"}, "P2P was disabled"),
        ({"SHM": 8}, {}, "P2P was allowed but NCCL used only SHM"),
        ({"P2P/IPC": 1, "SHM": 1}, {"NCCL_P2P_DISABLE": "1"}, "1 P2P connection"),
    ],
)
def test_nccl_contradiction(transports, env, expected):
    run = results_model([{"env": env, "world_size": 2, "nccl": {"transports": transports}}]).runs[0]
    got = analysis.nccl_contradiction(run)
    assert (got is None) if expected is None else (expected in got)


def test_machine_line_from_the_inventory_and_for_a_cpu_bundle():
    hw = Bundle.load(FIXTURES / "synthetic-2gpu").read_typed("hardware.json")
    assert machine_line(hw) == "2x NVIDIA H200, NV18, driver 580.95.05"
    cpu = Bundle.load(FIXTURES / "cpu-smoke").read_typed("hardware.json")
    line = machine_line(cpu)
    assert "GPU" in line and "2 CPUs" in line


def test_context_degrades_without_hardware_and_environment(tmp_path):
    import shutil

    shutil.copytree(FIXTURES / "cpu-smoke", tmp_path / "b")
    (tmp_path / "b" / "hardware.json").unlink()
    (tmp_path / "b" / "environment.json").unlink()
    ctx = context(Bundle.load(tmp_path / "b"))
    assert ctx["hardware"]["gpus"] == [] and ctx["environment"]["fingerprint"] == []
    assert [p for p, _, _ in ctx["manifest"]] == sorted(p for p, _, _ in ctx["manifest"])
    assert not any(p.startswith("report.") or p == "MANIFEST.sha256" for p, _, _ in ctx["manifest"])


def test_plots_are_deterministic_and_escape_names():
    evil = "<script>alert(1)</script>$x$--><img src=http://example.com/a.png>"
    curves = {
        "sizes": [8, 16],
        "curves": {
            "p2p": {
                8: {
                    "busbw": 1.0,
                    "busbw_min": 0.9,
                    "busbw_max": 1.1,
                    "time": 5.0,
                    "time_min": 4.0,
                    "time_max": 6.0,
                },
                16: {
                    "busbw": 2.0,
                    "busbw_min": 1.9,
                    "busbw_max": 2.1,
                    "time": 6.0,
                    "time_min": 5.0,
                    "time_max": 7.0,
                },
            },
            evil: {},
        },
    }
    one = plots.sweep_busbw(curves, evil, "t")
    two = plots.sweep_busbw(curves, evil, "t")
    assert one == two
    assert one.startswith("<svg") and "<script" not in one and "<img" not in one
    assert "FAILED, no line" in one and "Date" not in one
    assert plots.sweep_busbw(curves, "x", "other-salt") != one  # ids differ between figures


def test_window_drift_compares_the_halves_of_the_timed_window():
    # the slow warm-up steps are not part of either half
    assert analysis.window_drift([5.0, 5.0] + [0.010] * 10 + [0.008] * 10, 2) == (0.010, 0.008)
    # too few timed steps to split: no verdict either way
    assert analysis.window_drift([1.0] + [0.01] * 7, 1) is None


def test_drifting_runs_are_a_finding_and_steady_ones_are_not():
    b, benches = load("synthetic-2gpu")
    llama = by_name(benches, "llama-lora-fsdp")
    assert analysis.drifting(llama) == []  # the fixture's runs are steady
    run = llama.variants[0].ok[0]
    warm = run.data.warmup_steps
    timed = len(run.data.step_times_s) - warm
    half = timed // 2
    run.data.step_times_s = [9.0] * warm + [1.0] * half + [0.8] * (timed - half)
    assert analysis.drifting(llama) == [
        f"{llama.label} {llama.variants[0].name} r{run.repeat}: 1,000 → 800 ms (-20%)"
    ]
    found = [f for f in analysis.findings(typed(b), benches) if "steady state" in f.title]
    assert len(found) == 1 and found[0].level == "warn"
    assert "more than 5% between the two halves" in found[0].title


def test_real_h200_resnet18_runs_had_not_settled():
    """The 2x H200 ResNet bundle: ResNet-18 at 32 px sped up inside its 30-step window."""
    real = Path(__file__).resolve().parents[2] / "reports" / "examples" / "h200x2-resnet-ddp"
    benches = analysis.bundle_benchmarks(load_bundle(real))
    flagged = [d for bench in benches for d in analysis.drifting(bench)]
    assert flagged and all(d.startswith("resnet18-32") for d in flagged)
    assert any("p2p r1: 7.87 → 6.05 ms (-23%)" in d for d in flagged)


def test_the_recipes_cv_threshold_decides_what_is_noisy():
    def run(variant: str, repeat: int, value: float) -> dict:
        return {"run_id": f"g.{variant}.r{repeat}", "benchmark": "g", "kind": "gpt2_ddp",
                "variant": variant, "repeat": repeat, "status": "ok", "backend": "nccl",
                "metrics": {"throughput": {"value": value, "unit": "samples/s"}}}  # fmt: skip

    results = results_model([run(v, i, x) for v in ("p2p", "no-p2p")
                             for i, x in enumerate([90.0, 100.0, 110.0])], repeats=3)  # fmt: skip
    benchmarks = [{"kind": "gpt2_ddp", "name": "g"}]
    recipe = recipe_model(benchmarks=benchmarks)
    (default,) = analysis.build_benchmarks(results, recipe)  # CV 10% > the default 3%
    assert default.metrics["throughput"]["p2p"].noisy
    lenient_recipe = recipe_model(benchmarks=benchmarks, cv_threshold=0.2)
    (lenient,) = analysis.build_benchmarks(results, lenient_recipe)
    assert not lenient.metrics["throughput"]["p2p"].noisy
    titles = [f.title for f in analysis.findings(results, [default])]
    assert "noisy results: coefficient of variation over 3%" in titles
    assert not [f for f in analysis.findings(results, [lenient]) if "noisy" in f.title]


def test_noisy_runs_withhold_the_verdict_and_say_why():
    _, benches = load("synthetic-failures")
    gpt2 = by_name(benches, "gpt2-ddp")
    v = gpt2.verdicts[0]
    assert v.withheld and ", throughput: verdict withheld (p2p against no-p2p)" in v.sentence
    assert "runs were noisy (CV" in v.sentence and "1 of 6 runs failed" in v.sentence
    assert "faster" not in v.sentence and "slower" not in v.sentence  # no ratio is called


def test_a_run_a_stop_cut_short_is_called_interrupted_not_failed(tmp_path):
    """Call c46's bundle (2x H200, decode-tp2): HARD_S stopped its eleventh run and the twelfth
    never started; nothing in either went wrong, and the withheld verdict says so."""
    archive = ROOT / "reports/measurements/2026-11-28-pinned-evidence"
    with tarfile.open(archive / "call-c46-decode-tp2-copy-h200x2.tar.gz") as tar:
        tar.extractall(tmp_path, filter="data")
    (bundle,) = (tmp_path / "c46-decode-tp2-copy" / "bundles").iterdir()
    _, benches = load(bundle.name, bundle.parent)
    sentences = " ".join(v.sentence for v in by_name(benches, "decode-tp2").verdicts)
    assert "of 6 runs, 1 was interrupted and 1 never ran" in sentences
    assert "runs failed" not in sentences


def test_drifting_runs_withhold_the_verdict_but_power_capping_does_not():
    _, benches = load("synthetic-2gpu")
    llama = by_name(benches, "llama-lora-fsdp")
    assert not llama.verdicts[0].withheld  # steady, quiet, complete: a finding
    run = llama.variants[0].ok[0]
    warm = run.data.warmup_steps
    timed = len(run.data.step_times_s) - warm
    run.data.step_times_s = [9.0] * warm + [1.0] * (timed // 2) + [0.7] * (timed - timed // 2)
    for r in llama.runs:  # every run at the power cap: sized, never a reason to withhold
        r.telemetry = r.telemetry or Telemetry(available=False)
        r.telemetry.throttle_reasons_seen = ["SwPowerCap"]
    again = analysis.verdicts(llama)[0]
    assert again.withheld.startswith("1 of 6 runs were not at steady state")
    assert "-30%" in again.withheld and "power" not in again.withheld


def test_resnet_example_withholds_the_noisy_drifting_verdict():
    """The committed h200x2-resnet-ddp bundle once said "P2P makes resnet18-32 1.20x slower
    (95% CI 1.11 to 1.31)" beside cautions that its runs were noisy and drifting."""
    _, benches = load("h200x2-resnet-ddp", EXAMPLES)
    small = by_name(benches, "resnet18-32").verdicts[0]
    assert small.withheld and "noisy" in small.withheld and "steady state" in small.withheld
    assert "1.20x" not in small.sentence and "95% CI" not in small.sentence
    large = by_name(benches, "resnet50-224").verdicts[0]
    # two runs a side: a screening, not a finding (issue 34 item 4)
    assert (
        large.withheld
        == "2 runs a side is a screening, not a finding (no confidence interval below 3)"
    )
    assert "Peer-to-peer makes" not in large.sentence


def test_summary_per_gpu_and_energy_match_kit_facts_on_the_llama_example():
    from kit.report.facts.efficiency import energy_per_unit

    b, benches = load("h200x2-fsdp-llama", EXAMPLES)
    hw = b.read_typed("hardware.json")
    llama = benches[0]
    summary = analysis.summarize_bench(llama, hw, analysis.ran_line(llama))
    # most runs sat at the 700 W cap: the headline is the whole window's throughput
    assert analysis.verdict_metric(llama) == "throughput_window"
    for vs, block in zip(summary.variants, llama.variants, strict=True):
        values = sorted(r.metrics["throughput_window"].value for r in block.ok)
        assert vs.median == pytest.approx(values[1]) and vs.gpus == 2
        assert vs.per_gpu == pytest.approx(values[1] / 2)
        joules = sorted(energy_per_unit(r, hw).j_per_unit for r in block.ok)
        assert vs.energy.j_per_unit == pytest.approx(joules[1])
        # the runs' interval, as the throughput's: a buyer compares J per token across machines
        assert vs.energy.interval == summarize(joules).words("J/token")
        assert vs.energy.interval.startswith("95% t-interval of the geometric mean ")
        assert vs.interval.startswith("95% t-interval of the geometric mean ")
    p2p, no = summary.variants
    assert p2p.power.limited and p2p.power.at_cap_share > 0.5 and not no.power.limited
    assert p2p.power.sentence.startswith("power-limited: ") and "700 W cap" in p2p.power.sentence
    assert p2p.transports == ["P2P/CUMEM"] and no.transports == ["SHM"]
    assert no.settings == ["NCCL_P2P_DISABLE=1"] and "NCCL_NVLS_ENABLE=0" in summary.common_settings
    assert "989 TFLOP/s bf16 dense per GPU" in p2p.peak_basis
    assert summary.references[0]["source"]  # the recipe's expect names where it comes from
    assert "micro batch 1" in summary.ran and "gradient checkpointing" in summary.ran


def test_cost_per_million_units_needs_a_price():
    b, benches = load("h200x2-fsdp-llama", EXAMPLES)
    llama = benches[0]
    hw = b.read_typed("hardware.json")
    none = analysis.summarize_bench(llama, hw, "")
    assert all(v.cost_per_million is None for v in none.variants)
    priced = analysis.summarize_bench(llama, hw, "", price_per_gpu_hour=3.0).variants[0]
    assert priced.cost_per_million == pytest.approx(3.0 * 2 / (priced.median * 3600) * 1e6)


def test_ran_line_describes_the_smoke_model_not_the_recipe_name():
    _, benches = load("cpu-smoke")
    line = analysis.ran_line(benches[0], smoke=True)
    assert "on 2 processes" in line and "GPUs" not in line


def test_a_reference_from_another_gpu_count_is_not_comparable():
    """The 4-GPU Llama bundle carries the 2-GPU recipe's reference: it judges only runs on the
    GPU model and count it was measured on, so here it is NOT COMPARABLE, naming the counts."""
    b, benches = load("h200x4-fsdp-llama", EXAMPLES)
    hw = b.read_typed("hardware.json")
    (e,) = analysis.expectations(benches[0], hw)
    assert e["verdict"] == "NOT COMPARABLE" and not e["comparable"]
    assert e["mismatches"] == ["2 GPUs there, 4 here"]
    assert e["measured_on"] == "2x H200" and e["runs_on"] == "4x NVIDIA H200"
    assert "no reference for this machine" in e["reason"] and e["more_repeats"] is None


def test_a_median_step_reference_is_judged_on_the_median_step():
    """The 2x H200 Llama runs sat at the 700 W cap: the headline is whole-window throughput, but
    the recipe's `expect: throughput` is a median-step figure and is judged on the median step
    (never on the whole window), with the page saying which figure it judged; the GPT-2 recipe's
    expect names the whole-window figure while its headline is the median step: judged as
    named."""
    b, benches = load("h200x2-fsdp-llama", EXAMPLES)
    hw = b.read_typed("hardware.json")
    bench = benches[0]
    assert analysis.verdict_metric(bench) == "throughput_window"
    (e,) = analysis.expectations(bench, hw)
    assert e["named"] == e["metric"] == "throughput" and e["comparable"]
    step = bench.metrics["throughput"][e["variant"]].summary.median
    assert e["measured"] == pytest.approx(step)
    assert e["judged_note"] == (
        "judged on the median step, as the reference was measured; the figure above is the "
        "whole timed window"
    )
    b, benches = load("h200x2-gpt2-ddp", EXAMPLES)
    (g,) = analysis.expectations(benches[0], b.read_typed("hardware.json"))
    assert analysis.verdict_metric(benches[0]) == "throughput"
    assert g["named"] == g["metric"] == "throughput_window"
    assert g["judged_note"].endswith("the figure above is the median step")
    b, benches = load("h200x2-resnet-ddp", EXAMPLES)
    hw = b.read_typed("hardware.json")
    assert all(x["judged_note"] == "" for b in benches for x in analysis.expectations(b, hw))


def test_a_preflight_that_did_not_run_is_not_called_passed():
    """Multi-node: the driver's machine is not a node, so no preflight ran: skipped, not passed."""
    single = dict(analysis.trust_facts(results_model(), Hardware()))
    assert single["preflight"] == "passed, nothing flagged"
    multi = dict(analysis.trust_facts(results_model(runtime="multinode"), Hardware(nodes=[])))
    assert (
        multi["preflight"].startswith("not run: multi-node") and "passed," not in multi["preflight"]
    )


def test_a_figure_kind_is_one_entry_that_the_section_asks(monkeypatch):
    """kit.report.kinds is the one place that knows a figure kind: every plot a kind names is
    drawn by the renderer, and a new kind is one entry there."""
    import dataclasses

    from kit.report import bench_view, kinds, render

    assert {p for k in kinds.KINDS.values() for p in k.plots} <= set(bench_view.PLOTS)
    _, benches = load("synthetic-2gpu")
    gpt2 = by_name(benches, "gpt2-ddp")
    assert [f.key for f in bench_view.bench_view(gpt2, 0).figures][:2] == ["bars", "steps"]
    monkeypatch.setitem(kinds.KINDS, "bars-only", kinds.FigureKind("bars-only", plots=("bars",)))
    gpt2.spec = dataclasses.replace(gpt2.spec, figures="bars-only")
    view = bench_view.bench_view(gpt2, 0)
    assert [f.key for f in view.figures if f.key != "telemetry"] == ["bars"]
    assert view.traces == 0 and view.curves is None
    html = (
        render.jinja_env()
        .get_template("benchmark.j2")
        .render(
            view=view,
            transports={gpt2.name: []},
            run_notes={gpt2.name: []},
            summaries=[],
            expectations={gpt2.name: []},
            results=None,
            pdf=False,
        )
    )
    assert "No step times were recorded" not in html  # only a kind with step_note says so


def test_a_plateau_change_that_rounds_to_nothing_has_no_sign():
    """The report review, 12 (number formats): the collectives bundle read "on the plateau
    (-0.0% from 512 MiB)" for a busbw 0.04% lower at 1 GiB than at 512 MiB."""
    from types import SimpleNamespace as NS

    from kit.report.analysis.sweeps import plateau_words

    def run(busbw: list[float]) -> NS:
        rows = [NS(bytes=(512 << 20) * (i + 1), busbw_gbps=[x]) for i, x in enumerate(busbw)]
        return NS(data=NS(sizes=rows))

    flat = plateau_words([run([28.24, 28.23])])  # type: ignore[list-item]
    assert flat == "taken at 1 GiB, on the plateau (within 0.05% of 512 MiB)"
    assert "(+0.7% from 512 MiB)" in plateau_words([run([350.0, 352.5])])  # type: ignore[list-item]
    # a best size mid-sweep (no-p2p through host memory): said, so the headline is not read as it
    peaked = plateau_words([run([31.79, 28.1, 28.23])])  # type: ignore[list-item]
    assert peaked == (
        "taken at 1.5 GiB, on the plateau (+0.5% from 1 GiB); its peak, 31.79 GB/s at 512 MiB, "
        "is 13% above it"
    )
    assert "peak" not in plateau_words([run([29.0, 28.23])])  # type: ignore[list-item]


def test_page_one_says_a_shared_withholding_reason_once():
    """A screening decode bundle (2x H200, 2026-11-29) printed "one run a side is a screening"
    in three sentences of one benchmark and pushed its figures off page 1: one sentence now
    names the metrics, the pair and the reason; a verdict with its own reason stays apart."""
    from kit.report.analysis.model import Benchmark, Verdict
    from kit.report.analysis.verdicts import folded

    why = "one run a side is a screening, not a finding (no confidence interval below 3)"
    bench = Benchmark("decode-tp2", "llm_decode", "decode-tp2 (LLM decode)", {}, [])
    pair = "p2p against no-p2p"
    noisy = "the runs were noisy (CV 9%)"
    bench.verdicts = [
        Verdict("decode-tp2", "decode_tokens_per_s", "a", withheld=why, against=pair),
        Verdict("decode-tp2", "tpot_median_ms", "b", withheld=noisy, against=pair),
        Verdict("decode-tp2", "hbm_share_b1", "c", withheld=why, against=pair),
    ]
    page = folded(bench)
    assert [v.sentence for v in page][1] == "b" and len(page) == 2
    one = page[0].sentence
    assert one.startswith("decode-tp2 (LLM decode): verdicts withheld on ")
    assert one.count("screening") == 1 and "(p2p against no-p2p): " + why in one
    for metric in ("decode_tokens_per_s", "hbm_share_b1"):
        assert catalog.label(metric) in one
    bench.verdicts = bench.verdicts[:2]
    assert [v.sentence for v in folded(bench)] == ["a", "b"]  # nothing shared: as they were


def test_a_figure_title_wraps_before_it_is_cut():
    """A reader of the one-H100 acceptance report: "matmul ceiling: bf16 matmul ceiling
    (median GPU, all at o..." over a figure. A title takes two lines of 60 characters; a
    label one line; what is left over still ends in "..."."""
    title = "matmul ceiling: bf16 matmul ceiling (median GPU, all at once)"
    assert plots.text(title, lines=2) == title[:55] + "\n" + title[56:]
    assert plots.text(title) == title[:55] + "..."  # one line: cut at a word
    assert plots.text("x" * 70) == "x" * 57 + "..."
    long = plots.text(" ".join(["word"] * 40), lines=2)
    assert long.count("\n") == 1 and long.endswith("...") and max(map(len, long.split("\n"))) <= 60
    assert plots.text("a $b$ \\c") == "a \\$b\\$ \\\\c"  # no mathtext
