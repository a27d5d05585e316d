"""The LLM decode workload end to end on the CPU: `kit reproduce recipes/llm_decode.yaml --device
cpu --smoke` as shipped (real torchrun, two gloo processes, data parallel and tensor parallel over
2, P2P on and off), its metrics in results.json, tensor parallel against one rank, the report's
PDF; and the plain reference loop at smoke scale."""

from __future__ import annotations

import json
import re
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from pypdf import PdfReader

from tests.conftest import ROOT, fixture_env, needs_pdf, run_kit

pytestmark = pytest.mark.slow

SMOKE_BATCHES = [1, 2, 4]  # recipes/llm_decode.yaml's smoke batch_sizes


@pytest.fixture(scope="module")
def checked(tmp_path_factory) -> Path:
    """scripts/device/decode_check.py --cpu, as a device call runs it: the plain reference loop,
    then `kit reproduce recipes/llm_decode.yaml --device cpu --smoke --runtime host` (the
    bundle every test here reads: one smoke run of the recipe serves them all), compared."""
    out = tmp_path_factory.mktemp("decode")
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "device" / "decode_check.py"), "--cpu"],
        capture_output=True, text=True, timeout=900,
        env={**fixture_env(tmp_path_factory, pdf=True), "OUT": str(out), "OMP_NUM_THREADS": "1"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def bundle(checked) -> Path:
    return checked / "bundle"


def runs(bundle: Path) -> dict[tuple[str, str], dict]:
    results = json.loads((bundle / "results.json").read_text())
    return {(r["benchmark"], r["variant"]): r for r in results["runs"]}


def test_every_run_records_the_decode_metrics(bundle):
    found = runs(bundle)
    # data parallel and the copy (the ceiling the reads are held to) move nothing between GPUs:
    # the recipe runs them P2P on only (their benchmark's `variants`)
    ran = {("decode-dp", "p2p"), ("decode-tp2", "p2p"), ("decode-tp2", "no-p2p")}
    assert set(found) == ran | {("hbm-copy", "p2p")}
    assert found[("hbm-copy", "p2p")]["status"] == "ok"
    for (name, _), run in found.items():
        if name == "hbm-copy":
            continue
        assert run["status"] == "ok", run.get("error")
        assert run["world_size"] == 2 and run["backend"] == "gloo"
        m, d = run["metrics"], run["data"]
        assert d["tp"] == (2 if name == "decode-tp2" else 1) and d["groups"] == 2 // d["tp"]
        assert [row["batch"] for row in d["batches"]] == SMOKE_BATCHES
        p = d["params"]
        for row in d["batches"]:
            assert len(row["step_times_s"]) == p["trials"] * p["decode_steps"]
            assert all(t > 0 for t in row["step_times_s"])
            tokens = row["batch"] * p["decode_steps"] * d["groups"]
            assert row["decode_tokens_per_s"] == pytest.approx(
                tokens / statistics.median(row["decode_s"])
            )
            assert row["tpot_median_s"] == pytest.approx(statistics.median(row["step_times_s"]))
            assert row["tpot_p90_s"] >= row["tpot_median_s"]
            # generated tokens are vocabulary ids: the greedy loop ran on the device's state
            assert all(0 <= t < p["vocab_size"] for t in row["tokens_sample"])
        one, top = d["batches"][0], d["batches"][-1]
        assert m["decode_tokens_per_s"]["value"] == top["decode_tokens_per_s"]
        assert m["decode_tokens_per_s"]["unit"] == "tokens/s"
        assert m["prefill_tokens_per_s"]["value"] == top["prefill_tokens_per_s"]
        assert m["decode_tokens_per_s_b1"]["value"] == one["decode_tokens_per_s"]
        assert m["tpot_median_ms"]["value"] == pytest.approx(one["tpot_median_s"] * 1e3)
        assert m["tpot_p90_ms"]["value"] == pytest.approx(one["tpot_p90_s"] * 1e3)
        assert m["tpot_median_ms"]["higher_is_better"] is False
        read = one["bytes_per_step"]
        assert (
            read["needed"]
            == read["weights"] + read["kv_needed"]
            < read["weights"] + read["kv_issued"]
        )
        assert m["decode_read_gbps_b1"]["value"] == pytest.approx(one["read_gbps"])
        # the CPU has no HBM and no memory to fill: said, never a number
        assert "hbm_share_b1" not in m and "max_batch_fit" not in m and d["fit"] is None
        assert "largest batch that fits: measured on a GPU only" in run["notes"]
        # tensor parallel's communication at batch 1, by difference with the step timed again
        # without its all-reduces; data parallel has none to time
        if name == "decode-dp":
            assert "tpot_local_ms_b1" not in m and "tp_comm_ms_b1" not in m
            assert d["local_step_b1"] is None
            continue
        alone = m["tpot_local_ms_b1"]["value"]
        assert alone == pytest.approx(d["local_step_b1"]["tpot_median_s"] * 1e3)
        assert 0 < alone < m["tpot_median_ms"]["value"]  # gloo's all-reduces are not free
        assert m["tp_comm_ms_b1"]["value"] == pytest.approx(m["tpot_median_ms"]["value"] - alone)
        assert m["tp_comm_ms_b1"]["higher_is_better"] is False


def test_tensor_parallel_gives_the_logits_of_one_rank(bundle):
    """decode-tp2 splits every layer over two gloo ranks (all-reduces, a gathered LM head);
    decode-dp runs the whole model on each rank: the same weights, so the same logits."""
    found = runs(bundle)
    one = found[("decode-dp", "p2p")]["data"]["probe"]
    for variant in ("p2p", "no-p2p"):
        two = found[("decode-tp2", variant)]["data"]["probe"]
        for key in ("prefill_logits", "last_logits"):
            assert len(two[key]) == len(one[key]) == 64
            assert two[key] == pytest.approx(one[key], abs=1e-5, rel=1e-4)
        assert two["tokens"] == one["tokens"]
    # not a trivially equal pair: the logits vary, and differ between the prompt and the last step
    assert max(one["prefill_logits"]) - min(one["prefill_logits"]) > 0.05
    assert one["prefill_logits"] != pytest.approx(one["last_logits"], abs=1e-3)


@needs_pdf
def test_the_report_draws_decode_against_batch(bundle):
    text = "\n".join(p.extract_text() for p in PdfReader(bundle / "report.pdf").pages)
    flat = " ".join(text.split())
    for name in ("decode-dp", "decode-tp2"):
        assert f"{name} (LLM decode) recipe at smoke size: decode throughput against batch" in flat
    assert "a batch-1 step reads memory at" in flat
    assert "decode throughput (largest batch timed)" in flat
    assert "time per output token at batch 1 (median)" in flat
    assert "vLLM and TensorRT-LLM are not run" in flat  # the Method page's paragraph
    html = (bundle / "report.html").read_text()
    assert html.count('id="fig-decode-dp-decode"') == 1
    assert html.count('id="fig-decode-tp2-decode"') == 1


def test_the_reference_loop_runs_on_cpu(checked):
    """benchmarks/reference/plain_llm_decode.py as the device check ran it (the recipe's smoke
    shape and batches): one REFERENCE record, every batch timed over its trials."""
    (line,) = [
        x
        for x in (checked / "reference.log").read_text().splitlines()
        if x.startswith("REFERENCE ")
    ]
    record = json.loads(line.removeprefix("REFERENCE "))
    assert [r["batch"] for r in record["batches"]] == SMOKE_BATCHES
    trials = yaml.safe_load((ROOT / "recipes" / "llm_decode.yaml").read_text())["benchmarks"][0]
    trials = {**trials["params"], **trials["smoke"]}["trials"]
    assert all(
        r["decode_tokens_per_s"] > 0 and len(r["decode_s"]) == trials for r in record["batches"]
    )


@needs_pdf
def test_the_batch_one_reads_stand_against_the_copy_measured_in_the_bundle(bundle):
    """The shipped recipe runs the copy benchmark beside decode (hbm-copy): the Silicon section
    holds each variant's batch-1 reads against the device-local copy traffic measured there (on
    the CPU: host memory both), and the copy, which moves nothing between GPUs, gets no P2P
    verdict."""
    flat = " ".join(
        "\n".join(p.extract_text() for p in PdfReader(bundle / "report.pdf").pages).split()
    )
    for variant in ("p2p",):  # decode-dp runs P2P on only
        read = runs(bundle)[("decode-dp", variant)]["metrics"]["decode_read_gbps_b1"]["value"]
        share = re.search(
            rf"decode-dp \(LLM decode\) recipe at smoke size, {variant}: a batch-1 decode step "
            r"reads memory at ([0-9.,]+) GB/s per GPU, (\d+)% of the ([0-9.,]+) GB/s device-local copy "
            r"traffic \(read plus write\) measured here\.",
            flat,
        )
        assert share, flat[-3000:]
        assert float(share.group(1)) == pytest.approx(read, rel=0.01)
        traffic = float(share.group(3).replace(",", ""))
        assert abs(int(share.group(2)) - 100 * read / traffic) <= 1  # the traffic printed rounded
    # the copy runs P2P on only (the recipe's `variants` for it), and page 1 says so
    assert "Not every benchmark runs every variant: the recipe names those it runs" in flat
    assert "no-p2p: NCCL_P2P_DISABLE=1" in flat  # the first benchmark's one variant is not all
    assert "no P2P verdict" not in flat


def test_tensor_parallel_on_too_few_ranks_fails_its_run_with_one_line(tmp_path):
    decode = yaml.safe_load((ROOT / "recipes" / "llm_decode.yaml").read_text())
    tp2 = next(b for b in decode["benchmarks"] if b["name"] == "decode-tp2")
    recipe = {**decode, "gpus": 1, "variants": ["p2p"], "repeats": 1, "benchmarks": [tp2]}
    path = tmp_path / "one.yaml"
    path.write_text(yaml.safe_dump(recipe, sort_keys=False))
    out = tmp_path / "bundle"
    proc = run_kit("reproduce", str(path), "--device", "cpu", "--smoke", "--out", str(out))
    assert proc.returncode == 1, proc.stderr[-3000:]
    (run,) = runs(out).values()
    assert run["status"] == "failed"
    assert run["error"] == "ValueError: tp 2 does not divide the 1 ranks of this run"


@needs_pdf
def test_the_device_check_compares_the_kit_with_the_reference_on_cpu(checked):
    """scripts/device/decode_check.py --cpu: the reference and the kit's smoke recipe in one
    call, their per-GPU decode tokens/s side by side per batch size."""
    c = json.loads((checked / "comparison.json").read_text())
    assert [r["batch"] for r in c["rows"]] == SMOKE_BATCHES
    for r in c["rows"]:
        assert r["ratio"] == pytest.approx(r["kit_per_gpu"] / r["reference_tokens_per_s"])
    assert set(c["tp2"]) == {"p2p", "no-p2p"} and all(c["tp2"].values())
    assert (checked / "comparison.md").read_text().startswith("# Decode: the kit against")
    assert (checked / "bundle" / "report.pdf").is_file()


@needs_pdf
def test_a_comparison_holds_decode_against_the_datasheets_memory_bandwidth(bundle, tmp_path):
    """kit compare of two decode bundles: the predicted ratio's bound is HBM bandwidth (on the
    CPU no side has a datasheet figure, and the page says so)."""
    out, twin = tmp_path / "compare", tmp_path / "twin"
    shutil.copytree(bundle, twin)  # one folder named twice is refused
    proc = run_kit("compare", str(bundle), str(twin), "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    flat = " ".join(
        "\n".join(p.extract_text() for p in PdfReader(out / "compare.pdf").pages).split()
    )
    assert "HBM bandwidth not in kit's table for a side" in flat
    assert "dense bf16 FLOP/s" not in flat
