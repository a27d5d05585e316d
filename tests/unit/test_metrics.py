"""The metric catalog is the one definition of a metric: the worker writes by it, and every
reader (report, compare, known machines, verdicts, the interval rule) answers from it."""

from __future__ import annotations

import json
import shutil

import pytest

from kit.model import load_bundle
from kit.refs import store
from kit.shared import metrics as catalog
from kit.stats import paired_ratio, summarize, unpaired_ratio
from kit.workloads import registry
from tests.conftest import ROOT

EXAMPLES = ROOT / "reports" / "examples"


def test_every_workload_declares_catalog_metrics():
    for kind in registry.KINDS:
        spec = registry.spec(kind)
        assert spec.metrics and all(catalog.CATALOG[m.name] is m for m in spec.metrics), kind
        assert spec.metric(spec.headline) is not None


def test_recorded_metrics_agree_with_the_catalog():
    """Every committed result was written with the unit and direction its catalog entry gives."""
    seen, kinds = set(), set()
    for path in sorted(EXAMPLES.glob("*/runs/*/result.json")):
        result = json.loads(path.read_text())
        kinds.add(result["kind"])
        work = {"gpt2_ddp": "samples", "resnet_ddp": "images", "llama_lora_fsdp": "tokens"}
        for name, m in (result.get("metrics") or {}).items():
            entry = catalog.CATALOG[name]
            assert m["higher_is_better"] == entry.higher_is_better, (path, name)
            assert m["unit"] == entry.unit_for(work.get(result["kind"], "")), (path, name)
            seen.add(name)
    # every metric of every kind an example holds was recorded, but those that exist only where
    # the run asks for them: GPU pairs (the committed silicon examples are one H200 each), fp32
    # (the CPU smoke's dtype), a dtype alone other than the recipe's alone_dtypes (bf16)
    declared = {m.name for k in kinds for m in registry.spec(k).metrics}
    optional = {n for n in declared if n.startswith("pair_") or "fp32" in n}
    optional |= {f"tflops_{d}_alone" for d in ("fp16", "tf32", "fp8")}
    # tensor parallel's communication at batch 1: the committed decode examples predate it
    # (tests/integration/test_llm_decode_cpu.py records it on two gloo ranks)
    optional |= {"tpot_local_ms_b1", "tp_comm_ms_b1"}
    assert seen <= declared and declared - optional <= seen, sorted(declared - optional - seen)
    assert set(catalog.CATALOG) == {
        m.name for k in registry.KINDS for m in registry.spec(k).metrics
    }


def test_per_gpu_is_a_property_of_the_metric():
    """Work summed over the GPUs is divided per GPU; bus bandwidth is already normalised."""
    assert catalog.per_gpu("throughput") and catalog.per_gpu("tokens_per_s")
    for name in ("busbw_largest", "busbw_peak", "step_time_s", "peak_mem_gib", "mfu"):
        assert not catalog.per_gpu(name), name
    assert not catalog.per_gpu("something_unknown")


def test_known_machines_divide_only_throughput_per_gpu(tmp_path, monkeypatch):
    """A 2-GPU all-reduce against the shipped 4-GPU one: no per-GPU bus bandwidth ratio; a
    2-GPU Llama run against the 4-GPU one: its throughput is compared per GPU too."""
    monkeypatch.setenv("KIT_REFS_DB", str(tmp_path / "refs.sqlite"))
    for name, metric, per in (
        ("h200x2-allreduce", "busbw_largest", False),
        ("h200x2-fsdp-llama", "throughput", True),
    ):
        copy = tmp_path / name
        shutil.copytree(EXAMPLES / name, copy)
        rows = [r for r in store.standing(load_bundle(copy)) if r["metric"] == metric]
        assert rows and any(r["gpus"] != r["reference_gpus"] for r in rows), name
        for r in rows:
            expected = per and r["gpus"] != r["reference_gpus"]
            assert (r["ratio_better_per_gpu"] is not None) == expected, (name, r)


@pytest.mark.parametrize("n", range(1, 8))
def test_the_interval_rule_is_the_catalogs(n):
    kind = catalog.interval_rule(n)
    xs = [10.0 + 0.1 * i for i in range(n)]
    ys = [5.0 + 0.07 * i for i in range(n)]
    assert summarize(xs).ci_kind == kind
    assert paired_ratio(xs, ys).ci_kind == kind
    assert unpaired_ratio(xs, ys).ci_kind == kind


def test_the_method_words_follow_the_rule():
    words = catalog.interval_words()
    assert words.count(";") == len(catalog.INTERVALS) - 1
    assert "3 to 5 runs" in words and "6 or more" in words
    assert catalog.interval_rule(5) == "t" and catalog.interval_rule(6) == "bootstrap"


def test_an_unknown_metric_keeps_what_its_run_recorded():
    assert catalog.label("algbw_x") == "algbw x"
    assert catalog.higher_is_better("algbw_x", False) is False
    assert catalog.words("algbw_x") == ("better", "worse")
    assert catalog.words("peak_mem_gib") == ("lower", "higher")


def test_bus_bandwidth_says_why_it_is_never_divided_per_gpu():
    """busbw is a bus rate (nccl-tests' algbw x 2(n-1)/n), not a per-GPU one (the report review,
    6): page 1 says so where the per-GPU column would be; a metric is either divided per GPU or
    says why not, never both."""
    from kit.shared.metrics import CATALOG, not_per_gpu

    words = not_per_gpu("busbw_largest")
    assert "a bus rate" in words and "2(n-1)/n" in words and "already" not in words
    assert not_per_gpu("busbw_peak") == not_per_gpu("busbw_largest")
    assert not_per_gpu("throughput") == "" and not_per_gpu("no_such_metric") == ""
    assert not any(m.per_gpu and m.not_per_gpu for m in CATALOG.values())
