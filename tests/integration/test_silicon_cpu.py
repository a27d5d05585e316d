"""The silicon recipe on the CPU: the device check script's CPU mode, which runs `kit reproduce
recipes/silicon.yaml --device cpu --runtime host` (two gloo ranks, host memory copies and an fp32
matmul search; the recipe's `gpus: all` written as the 2 ranks, as the script writes the GPUs it
sees) and the steps that make sense without a GPU around it. One run of the script serves the
bundle's tests and the script's (one reproduce instead of two, issue 46); `gpus: all` itself is
resolved in test_acceptance_cpu.py."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tests.conftest import ROOT, fixture_env

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def checked(tmp_path_factory) -> Path:
    """scripts/device/silicon_check.py --cpu, as a device call runs it: its outputs in out/, the
    bundle it made in work/bundle."""
    base = tmp_path_factory.mktemp("silicon")
    proc = subprocess.run(
        [sys.executable, "scripts/device/silicon_check.py", "--cpu", "--out", str(base / "out"),
         "--work", str(base / "work"), "--matmul-trials", "3"],
        cwd=ROOT, capture_output=True, text=True, timeout=900,
        env={**fixture_env(tmp_path_factory), "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return base


def test_the_silicon_recipe_smoke_runs_on_the_cpu(checked):
    out = checked / "work" / "bundle"
    results = json.loads((out / "results.json").read_text())
    assert results["status"] == "complete"
    runs = {r["kind"]: r for r in results["runs"]}
    copy = runs["copy_bandwidth"]
    assert copy["status"] == "ok" and copy["world_size"] == 2  # gpus: all on the CPU
    assert copy["metrics"]["device_local_gbps"]["value"] > 0
    assert copy["metrics"]["wrong_total"]["value"] == 0
    sizes = [r["mib"] for r in copy["data"]["plateau"]]
    assert sizes == sorted(sizes) and sizes[-1] == copy["data"]["params"]["size_mib"]
    assert copy["data"]["pairs"] is None
    assert "CPU: host memory copies only (no host link, no GPU pairs)" in copy["notes"]
    mm = runs["matmul_ceiling"]
    assert mm["status"] == "ok"
    found = mm["data"]["dtypes"]["fp32"]
    params = mm["data"]["params"]
    assert len(found["search"]) == len(params["m_sizes"]) * len(params["n_sizes"]) * len(
        params["k_sizes"]
    )
    best = max(found["search"], key=lambda r: r["tflops"])
    assert found["best_shape"] == best["shape"]
    assert len(found["alone"]) == len(found["together"]) == 2  # every rank alone and together
    for r in found["alone"] + found["together"]:
        assert r["shape"] == found["best_shape"]
        assert r["tflops"] == pytest.approx(statistics.median(r["trials"]))
    together = [r["tflops"] for r in found["together"]]
    assert mm["metrics"]["tflops_fp32"]["value"] == pytest.approx(statistics.median(together))
    assert mm["metrics"]["tflops_fp32_weakest"]["value"] == pytest.approx(min(together))
    assert "bf16 skipped: the CPU analogue measures fp32 only" not in mm["notes"]  # smoke: fp32
    report = (out / "report.html").read_text()
    assert "copy bandwidth" in report and "matmul ceiling" in report
    assert "Silicon: what these GPUs can do" in report
    assert "These runs used the CPU: host memory copies and an fp32 matmul" in report
    assert "No GPU pair was measured (one GPU, or pairs turned off)." in report


def test_the_device_check_script_runs_its_cpu_mode(checked):
    out = checked / "out"
    assert sorted(p.name for p in out.iterdir()) == [
        "bundle.tar.gz", "check.log", "comparison.json", "comparison.md", "raw.tar.gz",
    ]  # fmt: skip
    summary = json.loads((out / "comparison.json").read_text())
    assert summary["device"] == "cpu" and summary["gpus"] == 2
    rows = summary["rows"]
    assert [r["what"].split()[-2:] for r in rows] == [["rank", "0"], ["rank", "1"]]
    for r in rows:
        assert r["ratio"] == pytest.approx(r["kit"] / r["reference"])
        assert len(r["reference_runs"]) == 3 and r["verdict"] in ("PASS", "FAIL")
    with tarfile.open(out / "bundle.tar.gz") as tar:
        assert "bundle/results.json" in tar.getnames()
    assert (
        "| what | kit | reference | kit / reference | within 3% |"
        in (out / "comparison.md").read_text()
    )


def test_the_device_check_script_runs_its_cpu_pairs_mode(tmp_path):
    """--pairs on the CPU: the kit runs the copy benchmark alone; a CPU has no GPU pair, so
    every pair row is there and reads not run (the table's code, not a measurement)."""
    out, work = tmp_path / "out", tmp_path / "work"
    proc = subprocess.run(
        [sys.executable, "scripts/device/silicon_check.py", "--cpu", "--pairs", "--out", str(out),
         "--work", str(work)],
        cwd=ROOT, capture_output=True, text=True, timeout=900,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = json.loads((out / "comparison.json").read_text())
    assert summary["mode"] == "pairs" and summary["gpus"] == 2 and not summary["all_pass"]
    assert [(r["pair"], r["test"]) for r in summary["rows"]] == [
        ("0 -> 1", "ce_one_way"), ("1 -> 0", "ce_one_way"), ("0 <-> 1", "ce_both_ways"),
        ("0 -> 1", "sm_one_way"), ("1 -> 0", "sm_one_way"), ("0 <-> 1", "sm_both_ways"),
    ]  # fmt: skip
    assert {r["verdict"] for r in summary["rows"]} == {"not run"}
    with tarfile.open(out / "bundle.tar.gz") as tar:
        results = json.load(tar.extractfile("bundle/results.json"))
    assert [r["kind"] for r in results["runs"]] == ["copy_bandwidth"]
    md = (out / "comparison.md").read_text()
    assert "| pair | test (kit / nvbandwidth) | kit GB/s | nvbandwidth GB/s |" in md
    assert "| 0 <-> 1 | ce_both_ways / device_to_device_bidirectional_memcpy_write_ce |" in md
