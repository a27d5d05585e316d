"""Energy over the timed window: NVML's total-energy counter read at the edges (kit.worker.energy),
and the facts the report prints from it, against sampled power for bundles without it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from kit.model import Hardware, RunResult, load_bundle
from kit.report.facts.efficiency import COUNTER, SAMPLED, energy_per_unit
from kit.worker.energy import EnergyCounter, gathered
from tests.conftest import ROOT
from tests.unit.fake_nvml import FakeNvml

FIXTURE = ROOT / "tests" / "fixtures" / "nvml" / "h200x2.recorded.json"
LLAMA = ROOT / "reports" / "examples" / "h200x2-fsdp-llama"


def fake() -> FakeNvml:
    return FakeNvml(json.loads(FIXTURE.read_text())["nvml"])


def test_counter_of_the_ranks_gpu_is_read_at_both_edges() -> None:
    nvml = fake()
    # rank 0 drives the second GPU: CUDA_VISIBLE_DEVICES names it first
    counter = EnergyCounter.open(0, nvml=nvml, env={"CUDA_VISIBLE_DEVICES": "1,0"})
    assert counter.reason is None and counter.index == 1
    assert counter.uuid == nvml.g[1]["uuid"]
    start, end = counter.read(), counter.read()
    rec = counter.record(start, end)
    usage_mw = nvml.g[1]["power_mw"]["usage"]
    assert rec["energy_j"] == pytest.approx(usage_mw / 1000) and rec["reason"] is None
    counter.close()
    assert nvml.shutdowns == 1


def test_gpu_without_the_counter_says_why() -> None:
    nvml = fake()
    nvml.g[0]["total_energy_mj"] = None  # NVML answers Not Supported
    counter = EnergyCounter.open(0, nvml=nvml, env={})
    rec = counter.record(counter.read(), counter.read())
    assert rec["energy_j"] is None and "Not Supported" in rec["reason"]
    out = gathered([rec, EnergyCounter.open(1, nvml=fake(), env={}).record(1000.0, 5000.0)])
    assert out["complete"] is False and out["energy_j"] is None
    assert [g["rank"] for g in out["gpus"]] == [0, 1] and out["gpus"][1]["energy_j"] == 4.0


def test_local_rank_beyond_the_visible_gpus_is_a_reason_not_a_crash() -> None:
    counter = EnergyCounter.open(3, nvml=fake(), env={"CUDA_VISIBLE_DEVICES": "0"})
    assert counter.read() is None and "only 1 visible GPU" in counter.reason


def test_without_nvml_in_a_real_process() -> None:
    """Real: this machine has no NVIDIA driver; the worker's counter records why."""
    code = (
        "import json; from kit.worker.energy import EnergyCounter as E\n"
        "c = E.open(0); print(json.dumps(c.record(c.read(), c.read())))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    rec = json.loads(proc.stdout)
    assert rec["energy_j"] is None and rec["reason"]


def _llama_run() -> tuple[RunResult, Hardware | None]:
    if not LLAMA.is_dir():
        pytest.skip("the committed Llama bundle is not here")
    data = load_bundle(LLAMA)
    return data.results.runs[0], data.hardware


def test_energy_comes_from_the_counter_when_recorded() -> None:
    run, hw = _llama_run()
    sampled = energy_per_unit(run, hw)
    assert sampled.source == SAMPLED and "sampled every ~0.25 s" in sampled.basis
    with_counter = run.model_copy(deep=True)
    per_gpu = [1000.0 * 1.2 * sampled.energy_j / 2] * 2  # 20% more than the samples said
    records = [
        {"nvml_index": i, "uuid": f"GPU-{i}", "start_mj": 5e6, "end_mj": 5e6 + mj, "reason": None,
         "energy_j": mj / 1000}
        for i, mj in enumerate(per_gpu)
    ]  # fmt: skip
    with_counter.data.energy_counter = gathered(records)
    e = energy_per_unit(with_counter, hw)
    assert e.source == COUNTER and e.complete and e.gpus_sampled == 2
    assert e.energy_j == pytest.approx(sum(per_gpu) / 1000)
    assert e.j_per_unit == pytest.approx(e.energy_j / sampled.units)
    assert e.j_per_unit == pytest.approx(1.2 * sampled.j_per_unit)
    assert "nvmlDeviceGetTotalEnergyConsumption" in e.basis
    # one GPU without a reading: back to sampled power, labelled so
    records[1] = {**records[1], "energy_j": None, "reason": "Not Supported"}
    with_counter.data.energy_counter = gathered(records)
    assert energy_per_unit(with_counter, hw).source == SAMPLED
