"""Preflight findings, one fixture change per fault, and how options decide what is fatal."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kit.inventory import build_inventory
from kit.io.errors import KitError
from kit.model import Hardware
from kit.recipe import load_recipe
from kit.run.preflight import (
    PreflightError,
    PreflightOptions,
    check_recipe,
    raise_if_fatal,
    run_checks,
)

FIXTURES = Path(__file__).parent.parent / "fixtures" / "nvml"
GIB = 2**30


def snap(name: str = "h100x8_dgx") -> dict:
    return json.loads((FIXTURES / f"{name}.json").read_text())


def check(s: dict, **kw) -> list[dict]:
    kw.setdefault("gpus_needed", 2)
    return run_checks(Hardware.model_validate(build_inventory(s)), **kw)


def test_healthy_machines_have_no_findings() -> None:
    for name in ("h100x8_dgx", "h200x2_nvswitch", "rtx3090x8_pcie_2socket"):
        assert check(snap(name), needs_shm=True) == []


def test_fewer_gpus_than_needed() -> None:
    assert check(snap("h200x2_nvswitch"), gpus_needed=4) == [
        {
            "level": "error",
            "check": "gpu-count",
            "message": "the recipe needs 4 GPU(s), this machine has 2",
        }
    ]
    found = check(snap("no_gpu"))
    assert found[0]["check"] == "gpu-count"
    assert found[0]["message"].startswith(
        "the recipe needs 2 GPU(s), this machine has 0 (NVML did not start"
    )


def test_variant_gpu_ids_beyond_the_machine() -> None:
    found = check(snap("h200x2_nvswitch"), gpu_ids=[0, 4])
    assert found == [
        {
            "level": "error",
            "check": "gpu-count",
            "message": "a variant asks for GPU id(s) [4], this machine has ids 0-1",
        }
    ]


def test_cpu_device_skips_gpu_checks() -> None:
    assert check(snap("no_gpu"), device="cpu") == []


def test_busy_gpu() -> None:
    s = snap()
    s["nvml"]["gpus"][1]["processes"] = [{"pid": 4242, "used_memory_bytes": 20 * GIB}]
    assert check(s) == [
        {
            "level": "error",
            "check": "gpu-busy",
            "message": "GPU 1 already runs 1 process(es): pid 4242 (20.0 GiB); "
            "a busy GPU slows every rank",
        }
    ]
    # a busy GPU the recipe does not use is none of our business
    assert check(s, gpu_ids=[2, 3]) == []


def test_busy_without_visible_process_warns() -> None:
    s = snap()
    s["nvml"]["gpus"][0]["utilization"] = {"gpu": 87, "memory": 40}
    [f] = check(s)
    assert f["level"] == "warn" and f["check"] == "gpu-busy" and "87% busy" in f["message"]


def test_small_shm_for_no_p2p() -> None:
    s = snap()
    s["host"]["shm_bytes"] = 64 * 2**20  # docker's default
    assert check(s, needs_shm=True) == [
        {
            "level": "error",
            "check": "shm-size",
            "message": "/dev/shm on this host is 64 MiB; the no-P2P variant sends through "
            "NCCL's SHM transport, which wants at least 1.0 GiB "
            "(docker: --shm-size=1g or --ipc=host)",
        }
    ]
    assert check(s, needs_shm=False) == []
    [f] = check(s, needs_shm=True, shm_bytes=512 * 2**20, shm_where="the container's /dev/shm")
    assert f["level"] == "warn" and f["message"].startswith("the container's /dev/shm is 512 MiB")


def test_pcie_width_and_generation() -> None:
    s = snap()
    s["nvml"]["gpus"][0]["pcie"]["width_current"] = 8
    assert check(s) == [
        {
            "level": "warn",
            "check": "pcie-link",
            "message": "GPU 0 PCIe link runs x8 of x16: reseat the card or check the slot/riser",
        }
    ]
    # Gen1 at idle is power saving, not a fault (the 3090 fixture idles at Gen1 of Gen3)
    assert check(snap("rtx3090x8_pcie_2socket")) == []
    s = snap("rtx3090x8_pcie_2socket")
    s["nvml"]["gpus"][1]["throttle_reasons_mask"] = 0  # not idle
    [f] = check(s)
    assert f["message"].startswith("GPU 1 PCIe link runs Gen1 of Gen3 while not idle")


def test_ecc_errors_and_remapping() -> None:
    s = snap()
    s["nvml"]["gpus"][0]["ecc"]["volatile_uncorrected"] = 2
    s["nvml"]["gpus"][1]["ecc"]["aggregate_uncorrected"] = 1
    found = check(s)
    assert found == [
        {
            "level": "error",
            "check": "ecc",
            "message": "GPU 0 has 2 uncorrected ECC error(s) since boot",
        },
        {
            "level": "warn",
            "check": "ecc",
            "message": "GPU 1 has 1 uncorrected ECC error(s) over its lifetime",
        },
    ]
    s = snap()
    s["nvml"]["gpus"][0]["remapped_rows"]["pending"] = 1
    s["nvml"]["gpus"][1]["remapped_rows"]["failure"] = 1
    assert [(f["level"], f["message"]) for f in check(s)] == [
        ("warn", "GPU 0 has a row remapping pending: reset the GPU to apply it"),
        ("error", "GPU 1 row remapping failed: the GPU needs service"),
    ]
    s = snap("rtx3090x8_pcie_2socket")
    s["nvml"]["gpus"][0]["retired_pages"] = {"sbe": 0, "dbe": 3, "pending": 1}
    assert [f["message"] for f in check(s)] == [
        "GPU 0 has a page retirement pending: reset the GPU to apply it",
        "GPU 0 has 3 page(s) retired for double-bit ECC errors",
    ]


def test_hot_and_throttling_gpu() -> None:
    s = snap()
    s["nvml"]["gpus"][0]["temperature_c"] = 84
    s["nvml"]["gpus"][1]["throttle_reasons_mask"] = (
        0x4 | 0x20 | 0x1 | 0x2
    )  # idle/app clocks ignored
    assert check(s) == [
        {
            "level": "warn",
            "check": "gpu-temperature",
            "message": "GPU 0 is already at 84 C before the run "
            "(limit 80 C, it slows down at 87 C)",
        },
        {
            "level": "warn",
            "check": "gpu-throttle",
            "message": "GPU 1 clocks are held down by SwPowerCap, SwThermalSlowdown before the run",
        },
    ]
    assert check(s, options=PreflightOptions(max_temperature_c=90))[0]["check"] == "gpu-throttle"


def test_options_strict_and_allow() -> None:
    s = snap()
    s["nvml"]["gpus"][0]["pcie"]["width_current"] = 8
    s["nvml"]["gpus"][1]["processes"] = [{"pid": 7, "used_memory_bytes": None}]
    found = check(s)
    assert [(f["check"], f["level"]) for f in found] == [
        ("pcie-link", "warn"),
        ("gpu-busy", "error"),
    ]
    with pytest.raises(PreflightError) as err:
        raise_if_fatal(found)
    assert str(err.value) == (
        "preflight refused the run: gpu-busy: GPU 1 already runs 1 process(es): pid 7; "
        "a busy GPU slows every rank. To run anyway: --allow gpu-busy"
    )
    allowed = check(s, options=PreflightOptions(allow=frozenset({"gpu-busy"})))
    assert {f["level"] for f in allowed} == {"warn"}
    raise_if_fatal(allowed)  # nothing fatal left
    strict = check(s, options=PreflightOptions(strict=True, allow=frozenset({"gpu-busy"})))
    assert [(f["check"], f["level"]) for f in strict] == [
        ("pcie-link", "error"),
        ("gpu-busy", "warn"),
    ]
    with pytest.raises(PreflightError, match="--allow pcie-link"):
        raise_if_fatal(strict)


def test_unknown_allow_name_is_an_input_error() -> None:
    with pytest.raises(
        KitError, match=r"unknown check\(s\) in allow: gpu-hot \(allowed: gpu-count,"
    ) as err:
        PreflightOptions(allow=frozenset({"gpu-hot"}))
    assert err.value.exit_code == 2


def test_a_recipe_is_checked_against_the_typed_inventory() -> None:
    """check_recipe reads the inventory the engine measures and writes (kit.inventory.measure():
    kit.model's Hardware), here built from a recorded machine with a busy GPU."""
    s = snap("h200x2_nvswitch")
    s["nvml"]["gpus"][1]["processes"] = [{"pid": 4242, "used_memory_bytes": 2 * GIB}]
    inv = Hardware.model_validate(build_inventory(s))
    recipe = load_recipe(Path(__file__).resolve().parents[2] / "recipes" / "allreduce.yaml")
    found = check_recipe(recipe, "cuda", inv, PreflightOptions())
    assert [f["check"] for f in found] == ["gpu-busy"] and "pid 4242 (2.0 GiB)" in found[0][
        "message"
    ]
