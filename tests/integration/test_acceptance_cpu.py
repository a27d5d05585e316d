"""The box-acceptance recipe on the CPU, as a user runs it: `kit reproduce recipes/acceptance.yaml
--device cpu --repeats 3` (gpus: all -> 2 gloo ranks standing in for GPUs; its all-reduce left
out, see the fixture). Then a slow GPU is planted the way the device run plants one, but in the
bundle: rank 1's samples are rank 0's scaled down, the runs' medians and metrics recomputed and
the bundle resealed; page 1 of the real PDF names rank 1. The same bundle with rank 1 equal to
rank 0 names none (the CPU's own noise between two processes is not what is tested here: both
cases start from rank 0's samples)."""

from __future__ import annotations

import json
import os
import re
import shutil
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from pypdf import PdfReader

from kit.bundle import Bundle, write_manifest
from kit.model import load_bundle
from kit.report.analysis.box import judge_bundle
from kit.report.render import render_bundle, render_html
from kit.shared.metrics import record
from kit.workloads.copy_bandwidth.worker import summarize
from kit.workloads.matmul_ceiling.worker import outliers
from tests.conftest import ROOT, fixture_env, needs_pdf, run_kit

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    """recipes/acceptance.yaml without its all-reduce: the box is judged on the copy and matmul
    figures alone (its columns), and the all-reduce's CPU smoke runs in test_reproduce_cpu.py
    (3 of 9 torchrun launches: the 9 took 61 s of CPU in the test-durations census, issue 46)."""
    recipe = yaml.safe_load((ROOT / "recipes" / "acceptance.yaml").read_text())
    recipe["benchmarks"] = [b for b in recipe["benchmarks"] if b["kind"] != "allreduce"]
    assert len(recipe["benchmarks"]) == 2
    out = tmp_path_factory.mktemp("acceptance") / "bundle"
    (out.parent / "acceptance.yaml").write_text(yaml.safe_dump(recipe, sort_keys=False))
    proc = run_kit(
        "reproduce",
        str(out.parent / "acceptance.yaml"),
        "--device",
        "cpu",
        "--repeats",
        "3",
        "--out",
        str(out),
        env=fixture_env(tmp_path_factory),  # the tests that read a PDF render their own copy
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


def _copy_rank(data: dict[str, Any], factor: float) -> None:
    """Rank 1's host copy: rank 0's samples times `factor`; the run's metrics recomputed."""
    rows = data["data"]["per_gpu"]
    samples = [v * factor for v in rows[0]["samples"]["local"]]
    rows[1] = {**rows[1], "samples": {"local": samples}, "local_gbps": statistics.median(samples)}
    found = {"per_gpu": rows, "plateau": data["data"]["plateau"], "pairs": None}
    data["metrics"] = summarize(found)


def _matmul_rank(data: dict[str, Any], factor: float) -> None:
    """Rank 1's matmuls, alone and all at once: rank 0's trials times `factor`."""
    for dtype, f in data["data"]["dtypes"].items():
        pct = data["data"]["params"]["outlier_pct"]
        for where in ("alone", "together"):
            trials = [v * factor for v in f[where][0]["trials"]]
            f[where][1] = {**f[where][1], "trials": trials, "tflops": statistics.median(trials)}
            f[f"outliers_{where}"] = outliers([r["tflops"] for r in f[where]], pct)
        together = [r["tflops"] for r in f["together"]]
        alone = [r["tflops"] for r in f["alone"]]
        data["metrics"] = {
            f"tflops_{dtype}": record(f"tflops_{dtype}", statistics.median(together)),
            f"tflops_{dtype}_weakest": record(f"tflops_{dtype}_weakest", min(together)),
            f"tflops_{dtype}_alone": record(f"tflops_{dtype}_alone", statistics.median(alone)),
        }
    data["notes"] = [n for n in data.get("notes") or [] if "below the median" not in n]


def planted(src: Path, dst: Path, factor: float) -> Path:
    """A copy of the bundle whose rank 1 measured rank 0's samples times `factor`, in
    results.json and each run's result.json, resealed (report rendered anew, manifest)."""
    shutil.copytree(src, dst)
    edits = {"copy_bandwidth": _copy_rank, "matmul_ceiling": _matmul_rank}
    results = json.loads((dst / "results.json").read_text())
    for run in results["runs"]:
        if run["kind"] in edits:
            edits[run["kind"]](run, factor)
            (dst / "runs" / run["run_id"] / "result.json").write_text(json.dumps(run, indent=1))
    (dst / "results.json").write_text(json.dumps(results, indent=1))
    write_manifest(dst)
    return dst


def device_summary(path: Path, *args: str) -> subprocess.CompletedProcess:
    """scripts/device/box_summary.py on a bundle, as the device run calls it."""
    return subprocess.run(
        [sys.executable, "scripts/device/box_summary.py", str(path), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def box_of(path: Path):
    return judge_bundle(load_bundle(path))


def test_every_gpu_means_two_ranks_on_the_cpu_and_the_bundle_records_two(bundle):
    data = load_bundle(bundle)
    assert data.recipe.gpus == 2  # `gpus: all` resolved: the bundle records the number
    assert "gpus: 2\n" in (bundle / "recipe.yaml").read_text()
    assert data.results.status == "complete" and len(data.results.runs) == 6
    assert {r.world_size for r in data.results.runs} == {2}
    for run in data.results.runs:
        if run.kind == "copy_bandwidth":  # every rank measured its own host copy
            assert [row["rank"] for row in run.data.extra("per_gpu")] == [0, 1]
    box = box_of(bundle)
    assert [r.name for r in box.rows] == ["rank 0", "rank 1"] and box.repeats == 3
    assert [k for k, *_ in box.columns] == ["local_gbps", "tflops_fp32"]


def test_a_box_whose_ranks_agree_names_no_outlier(bundle, tmp_path):
    b = planted(bundle, tmp_path / "even", 1.0)
    box = box_of(b)
    assert box.outliers == [] and not any(r.below for r in box.rows)
    assert not box.screening
    html = render_html(Bundle.load(b))
    assert "No GPU is more than its margin below the median of its peers" in html
    assert "Named</b>" not in html


@needs_pdf
def test_a_slow_rank_is_named_on_page_one_of_the_pdf(bundle, tmp_path):
    b = planted(bundle, tmp_path / "slow", 0.8)
    box = box_of(b)
    assert [r.name for r in box.rows if r.below] == ["rank 1"]
    render_bundle(Bundle.load(b))
    write_manifest(b)
    first = re.sub(r"\s+", " ", PdfReader(b / "report.pdf").pages[0].extract_text())
    assert "Every GPU of the box" in first
    # rank 1 is 0.8 of rank 0: 20% below the other, beyond both margins
    assert re.search(
        r"Named: rank 1 \(a gloo process on the CPU: no UUID, bus or NVLink\): HBM copy "
        r"[\d.]+ GB/s, 20% below the other GPU's [\d.]+ \(named beyond 5%\); matmul fp32 alone "
        r"[\d.]+ TFLOP/s, 20% below the other GPU's [\d.]+ \(named beyond 10%\)\.",
        first,
    ), first
    assert "Named: rank 0" not in first
    summary = device_summary(b, "--expect-named", "1")
    assert summary.returncode == 0, summary.stdout + summary.stderr
    assert "NAMED: rank 1 (a gloo process on the CPU" in summary.stdout
    assert summary.stdout.endswith("planted GPU 1: named, alone\n")


def test_the_device_summary_fails_when_the_planted_gpu_is_not_named(bundle, tmp_path):
    """scripts/device/acceptance.sh's check on the loaded run: exit 1 when GPU 1 is not named."""
    b = planted(bundle, tmp_path / "even", 1.0)
    summary = device_summary(b, "--expect-named", "1")
    assert summary.returncode == 1
    assert "no GPU and no pair named" in summary.stdout
    assert "planted GPU 1: NOT as expected: named []" in summary.stdout
