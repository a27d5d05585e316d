"""Work per joule, per GPU, per dollar, and as a share of the datasheet peak.

Pure functions over one run result (a results.json `runs` entry) and hardware.json. The peaks
and link figures come from kit.shared.gpu_specs, the one table the worker's MFU also uses, so
the report can name the exact peak, dtype and datasheet it divides by.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from kit.model import Hardware, RunResult
from kit.report.facts.window import WindowFacts, window_facts, window_label
from kit.shared.gpu_specs import pcie_gbs, peak_flops, spec_for

KWH_J = 3.6e6


COUNTER = "counter"
"""Energy.source when NVML's total-energy counter was read at the window's edges (exact)."""
SAMPLED = "sampled"
"""Energy.source when only sampled power was integrated (older bundles; reads low on short
windows because NVML's power reading is a one-second average)."""


@dataclass(frozen=True)
class Energy:
    """Energy per unit of work inside the timed window, GPU board only.

    `source`: COUNTER (NVML's total-energy counter of every GPU, read by the worker at the
    window's edges) or SAMPLED (board power sampled every ~0.25 s and integrated: what bundles
    made before the counter was read hold). `gpus_sampled` of `gpus` GPUs had a reading; when
    fewer, the figure covers only those and `complete` is False (the report must not print it
    as the machine's figure).
    """

    unit: str  # "tokens", "images", "samples"
    units: float  # work done inside the window (all GPUs)
    energy_j: float
    j_per_unit: float
    units_per_kwh: float
    gpus: int
    gpus_sampled: int
    complete: bool
    power_limited: bool
    basis: str
    source: str = SAMPLED

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def window_units(run: RunResult) -> tuple[float, str] | None:
    """(units of work in the timed window, unit) of a training result: per-step units x steps."""
    unit = run.data.unit
    per_step, steps = run.data.extra(f"{unit}_per_step"), run.data.steps
    if not unit or not isinstance(per_step, int | float) or not isinstance(steps, int):
        return None
    return float(per_step) * steps, unit


def energy_per_unit(run: RunResult, hardware: Hardware | None = None) -> Energy | None:
    """Joules per token/image/sample and units per kWh over the run's timed window, or None
    (not a training result, no energy reading, no window).

    From NVML's energy counter when the worker recorded it for every GPU (`data.energy_counter`),
    else from sampled power integrated over the window, labelled as such."""
    work = window_units(run)
    if work is None:
        return None
    facts = window_facts(run, hardware)
    units, unit = work
    counter = run.data.extra("energy_counter") or {}
    if counter.get("complete") and (counter.get("energy_j") or 0) > 0:
        energy_j, gpus = float(counter["energy_j"]), len(counter.get("gpus") or [])
        world = run.world_size or gpus
        return Energy(
            unit=unit,
            units=units,
            energy_j=energy_j,
            j_per_unit=energy_j / units,
            units_per_kwh=units / energy_j * KWH_J,
            gpus=world,
            gpus_sampled=gpus,
            complete=gpus >= world,
            power_limited=facts is not None and facts.power_limited,
            basis=(
                f"NVML's total-energy counter ({counter.get('counter')}) of {gpus} GPU(s), read "
                "at the timed window's edges; GPU board only, excludes CPU, memory, fans and "
                "PSU losses"
            ),
            source=COUNTER,
        )
    if facts is None or facts.energy_j <= 0:
        return None
    world = run.world_size or facts.gpus
    return Energy(
        unit=unit,
        units=units,
        energy_j=facts.energy_j,
        j_per_unit=facts.energy_j / units,
        units_per_kwh=units / facts.energy_j * KWH_J,
        gpus=world,
        gpus_sampled=facts.gpus,
        complete=facts.gpus >= world,
        power_limited=facts.power_limited,
        basis=(
            f"GPU board power (NVML) of {facts.gpus} GPU(s) sampled every ~0.25 s and "
            f"integrated over the {window_label(facts.window)} (no energy counter recorded; "
            "NVML's power reading is a one-second average, so this reads low on windows of a "
            "few seconds); excludes CPU, memory, fans and PSU losses"
        ),
        source=SAMPLED,
    )


def power_sentence(facts: WindowFacts) -> str:
    """E.g. "power-limited: 100% of window samples within 5% of the 700 W cap, 1741 MHz mean
    (1980 max), throttled by SwPowerCap in 100%"."""
    parts = []
    if facts.at_cap_share is not None:
        head = "power-limited" if facts.power_limited else "not power-limited"
        parts.append(
            f"{head}: {facts.at_cap_share:.0%} of window samples within 5% of the "
            f"{facts.power_limit_w:g} W cap, {facts.power_w_per_gpu_mean:.0f} W per GPU mean"
        )
    if facts.sm_clock_mhz_mean is not None:
        spec = f" ({facts.sm_clock_mhz_max_spec:g} max)" if facts.sm_clock_mhz_max_spec else ""
        parts.append(f"SM clock {facts.sm_clock_mhz_mean:.0f} MHz mean{spec}")
    if facts.throttle_share:
        parts.append(
            "throttled by "
            + ", ".join(f"{k} in {v:.0%}" for k, v in facts.throttle_share.items())
            + " of window samples"
        )
    return "; ".join(parts)


def per_gpu(value: float, gpus: int) -> float:
    """Throughput per GPU (the figure to compare machines with different GPU counts)."""
    return value / gpus


def scaling_efficiency(throughput_a: float, gpus_a: int, throughput_b: float, gpus_b: int) -> float:
    """Per-GPU throughput of a over that of b: 1.0 is perfect scaling from b's count to a's."""
    return (throughput_a / gpus_a) / (throughput_b / gpus_b)


def mfu_basis(run: RunResult, dtype: str | None = None) -> dict[str, Any] | None:
    """MFU with its peak named: {mfu, dtype, peak_flops_per_gpu, source, gpus}, or None.

    Uses the peak the worker recorded when present (it is what the MFU was divided by), else
    the table's row for the run's GPU and `dtype` (default: the run's precision).
    """
    data = run.data
    mfu, dtype = data.extra("mfu"), dtype or data.extra("precision")
    if mfu is None or not dtype:
        return None
    peak, source = data.extra("peak_flops_per_gpu"), data.extra("peak_flops_source")
    if not peak:
        found = peak_flops(data.extra("gpu"), dtype)
        if found is None:
            return None
        peak, source = found
    return {
        "mfu": mfu,
        "dtype": dtype,
        "peak_flops_per_gpu": peak,
        "source": source,
        "gpus": run.world_size,
        "sentence": f"{mfu:.0%} MFU of {peak / 1e12:g} TFLOP/s {dtype} dense per GPU ({source})",
    }


def link_share(busbw_gbs: float, hardware: Hardware, link: str) -> dict[str, Any] | None:
    """Bus bandwidth as a share of the link's spec figure, per direction.

    link "nvlink": active NVLink links of GPU 0 (hardware.json) x the table's per-link figure.
    link "pcie": PCIe gen x width of GPU 0 (current) from hardware.json. Which link bounds a
    variant is the caller's to say from the NCCL transport (P2P/NVLink: "nvlink"; SHM or P2P
    over PCIe: "pcie"). None when the figure is unknown.
    """
    gpus = hardware.gpus
    if not gpus:
        return None
    g = gpus[0]
    if link == "nvlink":
        spec = spec_for(g.name)
        links = sum(1 for x in g.nvlinks or [] if x.active)
        if spec is None or not links or not spec.nvlink_gbs_per_link:
            return None
        figure = links * spec.nvlink_gbs_per_link
        basis = (
            f"{links} NVLink links x {spec.nvlink_gbs_per_link:g} GB/s per direction "
            f"= {figure:g} GB/s ({spec.source})"
        )
    elif link == "pcie":
        gen, width = (g.pcie.gen_current, g.pcie.width_current) if g.pcie else (None, None)
        figure = pcie_gbs(gen, width)
        if figure is None:
            return None
        basis = f"PCIe gen {gen} x{width} = {figure:.1f} GB/s per direction (PCI-SIG)"
    else:
        raise ValueError(f"link must be 'nvlink' or 'pcie', got {link!r}")
    return {"share": busbw_gbs / figure, "figure_gbs": figure, "link": link, "basis": basis}


def cost_per_million(throughput_per_s: float, gpus: int, price_per_gpu_hour: float) -> float:
    """Price of 1M units (tokens, images, samples) at this throughput on `gpus` GPUs:
    price x GPUs / (units per hour) x 1e6."""
    if throughput_per_s <= 0 or gpus <= 0:
        raise ValueError("throughput and GPU count must be positive")
    return price_per_gpu_hour * gpus / (throughput_per_s * 3600.0) * 1e6
