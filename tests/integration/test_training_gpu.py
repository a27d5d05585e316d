"""The training recipes at full size on GPUs: `kit reproduce` on the host runtime, one repeat.

Run on a GPU machine (the lent 2x H200): `python -m pytest -m gpu tests/integration/test_training_gpu.py`.
Checks the method's invariants and, on the machine the reference figures were measured on
(2x H200), that the P2P result reaches the recipe's `expect` (within its tolerance).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT, run_kit

pytestmark = [pytest.mark.gpu, pytest.mark.slow]


def _gpus() -> tuple[int, str]:
    try:
        import torch
    except ImportError:
        return 0, ""
    if not torch.cuda.is_available():
        return 0, ""
    return torch.cuda.device_count(), torch.cuda.get_device_name(0)


COUNT, NAME = _gpus()
needs_two_gpus = pytest.mark.skipif(
    COUNT < 2, reason=f"needs 2 CUDA GPUs (torch sees {COUNT}): run on a GPU machine"
)


def reproduce_full(tmp_path: Path, recipe_name: str) -> dict:
    recipe = yaml.safe_load((ROOT / "recipes" / f"{recipe_name}.yaml").read_text())
    out = tmp_path / "bundle"
    proc = run_kit(
        "reproduce", str(ROOT / "recipes" / f"{recipe_name}.yaml"), "--device", "cuda", "--full",
        "--repeats", "1", "--out", str(out), timeout=3600,
    )  # fmt: skip
    results = json.loads((out / "results.json").read_text())
    assert proc.returncode == 0, proc.stderr + json.dumps([r.get("error") for r in results["runs"]])
    results["_recipe"] = recipe
    return results


def check_gpu_run(run: dict, transformer: bool) -> None:
    d, m = run["data"], run["metrics"]
    assert run["status"] == "ok" and run["device"] == "cuda" and run["backend"] == "nccl"
    assert d["warmup_steps"] + d["steps"] == len(d["step_times_s"])
    assert all(t > 0 for t in d["step_times_s"])
    losses = d["warmup_loss"] + d["loss"]
    assert all(math.isfinite(x) for x in losses) and d["loss_first"] != d["loss_last"]
    assert m["throughput"]["value"] > 0 and m["peak_mem_gib"]["value"] > 0
    if transformer and d["peak_flops_per_gpu"] is not None:
        assert m["mfu"]["unit"] == "fraction" and 0 < m["mfu"]["value"] < 1


def check_expectations(results: dict) -> None:
    """On 2x H200, where the reference figures (reports/RESULTS.md) were measured, P2P must reach them."""
    if "H200" not in NAME or COUNT != 2:
        return
    for bench in results["_recipe"]["benchmarks"]:
        for metric, expect in (bench.get("expect") or {}).items():
            runs = [
                r
                for r in results["runs"]
                if r["benchmark"] == bench["name"] and r["variant"] == "p2p"
            ]
            value = runs[0]["metrics"][metric]["value"]
            floor = expect["value"] * (1 - expect["tolerance"])
            assert value >= floor, (
                f"{bench['name']} {metric} {value:.1f} < {floor:.1f} ({expect['source']})"
            )


@needs_two_gpus
@pytest.mark.parametrize(
    ("recipe", "transformer"),
    [("gpt2_ddp", True), ("fsdp_llama", True), ("resnet_ddp", False), ("fsdp_llama_tuned", True)],
)
def test_full_size_recipe(tmp_path, recipe, transformer):
    results = reproduce_full(tmp_path, recipe)
    for run in results["runs"]:
        check_gpu_run(run, transformer)
    check_expectations(results)
