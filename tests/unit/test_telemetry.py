"""Worker telemetry: the real no-NVML path here, and the sampler against a scripted NVML."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

from kit.shared.throttle import decode_reasons
from kit.worker.telemetry import GpuTelemetry, summarize, visible_indices


class ScriptedNvml:
    """Two GPUs whose state advances with every sample: busy, then power- and heat-limited."""

    def __init__(self, nvlink: bool = True, pcie_fields: bool = True) -> None:
        self.calls = {0: 0, 1: 0}
        self.nvlink = nvlink
        self.pcie_fields = pcie_fields
        self.shutdown = False

    def nvmlInit(self) -> None: ...

    def nvmlShutdown(self) -> None:
        self.shutdown = True

    def nvmlDeviceGetCount(self) -> int:
        return 2

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        return i

    def nvmlDeviceGetName(self, h: int) -> bytes:
        return b"NVIDIA H200"

    def nvmlDeviceGetUUID(self, h: int) -> str:
        return f"GPU-0000000{h}-1111-2222-3333-444444444444"

    def nvmlDeviceGetClockInfo(self, h: int, t: int) -> int:
        self.calls[h] += t == 1  # one SM clock query per sample
        return 1980 if t == 1 else 3201

    def nvmlDeviceGetPowerUsage(self, h: int) -> int:
        return 650_000

    def nvmlDeviceGetTemperature(self, h: int, s: int) -> int:
        return 60 + self.calls[h]

    def nvmlDeviceGetUtilizationRates(self, h: int) -> object:
        return SimpleNamespace(gpu=0 if self.calls[h] <= 1 else 100, memory=40)

    def nvmlDeviceGetCurrentClocksEventReasons(self, h: int) -> int:
        if self.calls[h] <= 1:
            return 0x1  # idle
        return 0x4 if h == 1 else 0x0  # GPU 1 hits its power cap while busy

    def nvmlDeviceGetFieldValues(self, h: int, ids: list) -> list:
        n = self.calls[h]
        out = []
        for fid in ids:
            fid = fid[0] if isinstance(fid, tuple) else fid
            ok = self.nvlink if fid in (138, 139) else self.pcie_fields
            out.append(
                SimpleNamespace(
                    nvmlReturn=0 if ok else 3,
                    valueType=3,
                    value=SimpleNamespace(ullVal=5 * 2**32 + n * 1_000_000),  # a 64-bit counter
                )
            )
        return out

    def nvmlDeviceGetPcieThroughput(self, h: int, counter: int) -> int:
        return 2_000_000  # KB/s


def test_without_nvml_records_why_and_runs_the_block() -> None:
    """Real: this machine has no NVIDIA driver, so NVML cannot start."""
    ran = False
    with GpuTelemetry(interval_s=0.05) as tel:
        ran = True
    assert ran
    res = tel.result()
    assert res["available"] is False
    assert res["reason"]
    assert json.dumps(res)


def test_worker_module_imports_only_stdlib() -> None:
    code = (
        "import sys; import kit.worker.telemetry, kit.shared.nccl_log; "
        "bad = [m for m in ('pydantic','docker','jinja2','rich','numpy','torch','pynvml') "
        "if m in sys.modules]; print(bad)"
    )
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=root
    )
    assert out.stdout.strip() == "[]"


def test_sampler_records_columns_and_flags_power_throttle() -> None:
    fake = ScriptedNvml()
    with GpuTelemetry(interval_s=0.01, nvml=fake, env={}) as tel:
        time.sleep(0.15)
    res = tel.result()
    assert fake.shutdown
    assert res["available"] is True
    assert [g["uuid"][:12] for g in res["gpus"]] == ["GPU-00000000", "GPU-00000001"]
    g0, g1 = res["gpus"]
    n = len(g0["samples"]["t_s"])
    assert n >= 4
    assert all(len(col) == len(g0["samples"]["t_s"]) for col in g0["samples"].values())
    assert g0["samples"]["power_w"][0] == 650.0
    assert g0["name"] == "NVIDIA H200"
    assert g0["summary"]["throttled"] is False
    assert g1["summary"]["throttled"] is True
    assert g1["summary"]["throttle_reasons_busy"] == {"SwPowerCap": 1.0}
    assert g1["summary"]["thermal_or_hw_slowdown"] is False
    assert res["throttled"] is True and res["throttle_reasons_seen"] == ["SwPowerCap"]
    s = g0["summary"]
    assert s["busy_samples"] == n - 1  # the first sample was idle
    assert s["nvlink_tx_gbs"] > 0 and s["pcie_rx_gbs"] > 0
    assert s["pcie_tx_gbs_sampled"] is None  # byte counters answered, no slow fallback
    assert json.loads(json.dumps(res)) == res


def test_sampler_without_nvlink_or_pcie_counters_falls_back() -> None:
    fake = ScriptedNvml(nvlink=False, pcie_fields=False)
    with GpuTelemetry(interval_s=0.2, nvml=fake, env={}) as tel:
        time.sleep(0.05)
    s = tel.result()["gpus"][0]["summary"]
    assert s["nvlink_tx_gbs"] is None and s["pcie_tx_gbs"] is None
    assert s["pcie_tx_gbs_sampled"] == 2.0


def test_sampler_halves_its_record_when_full() -> None:
    with GpuTelemetry(interval_s=0.005, max_samples=8, nvml=ScriptedNvml(), env={}) as tel:
        time.sleep(0.3)
    res = tel.result()
    assert len(res["gpus"][0]["samples"]["t_s"]) <= 9 + 1
    assert res["interval_s"] > 0.005


def test_visible_devices_by_index_and_uuid() -> None:
    fake = ScriptedNvml()
    assert visible_indices(fake, {}) == [0, 1]
    assert visible_indices(fake, {"CUDA_VISIBLE_DEVICES": "1"}) == [1]
    assert visible_indices(fake, {"CUDA_VISIBLE_DEVICES": "GPU-00000001"}) == [1]
    assert visible_indices(fake, {"CUDA_VISIBLE_DEVICES": ""}) == []
    with GpuTelemetry(nvml=fake, env={"CUDA_VISIBLE_DEVICES": ""}) as tel:
        pass
    assert tel.result() == {
        "available": False,
        "reason": "no visible GPU",
        "started_at": tel._started_at,
    }


def test_summary_of_thermal_slowdown() -> None:
    cols = {
        "t_s": [0.0, 1.0, 2.0],
        "sm_clock_mhz": [1980, 1500, 1400],
        "mem_clock_mhz": [3201] * 3,
        "power_w": [100.0, 600.0, 590.0],
        "temp_c": [40, 88, 91],
        "util_gpu": [0, 100, 100],
        "util_mem": [0, 50, 50],
        "throttle_mask": [0x1, 0x20, 0x20 | 0x4],
        "pcie_tx_bytes": [None] * 3,
        "pcie_rx_bytes": [None] * 3,
        "pcie_tx_kbs": [None] * 3,
        "pcie_rx_kbs": [None] * 3,
        "nvlink_tx_kib": [0, 1_000_000, 2_000_000],
        "nvlink_rx_kib": [None] * 3,
    }
    s = summarize(cols)
    assert s["throttled"] is True and s["thermal_or_hw_slowdown"] is True
    assert s["throttle_reasons_busy"] == {"SwThermalSlowdown": 1.0, "SwPowerCap": 0.5}
    assert s["sm_clock_mhz_busy"] == {"min": 1400, "mean": 1450.0, "max": 1500}
    assert s["nvlink_tx_gbs"] == 1.024
    assert decode_reasons(0x1 | 0x40) == ["GpuIdle", "HwThermalSlowdown"]


def test_pcie_rate_refuses_a_32_bit_counter() -> None:
    from kit.worker.telemetry import _counter_rate

    times = [0.0, 0.25, 0.5, 0.75]
    # recorded on 2x H200 with P2P off: a 32-bit counter wrapping between samples
    wrapped = [1621023776, 2020791908, 1991652584, 2882826596]
    assert _counter_rate(wrapped, times) is None
    wide = [2**40, 2**40 + 10**9, 2**40 + 2 * 10**9, 2**40 + 3 * 10**9]
    assert _counter_rate(wide, times) == 4.0
