"""NVML's clock event (throttle) reason bits, one table: the worker's telemetry records the mask,
the preflight, the inventory and the report's facts decode it. Standard library only."""

from __future__ import annotations

# nvmlClocksEventReasons bits, NVML's names.
THROTTLE_REASONS = {
    0x1: "GpuIdle",
    0x2: "ApplicationsClocksSetting",
    0x4: "SwPowerCap",
    0x8: "HwSlowdown",
    0x10: "SyncBoost",
    0x20: "SwThermalSlowdown",
    0x40: "HwThermalSlowdown",
    0x80: "HwPowerBrakeSlowdown",
    0x100: "DisplayClockSetting",
    0x200: "BoardLimit",
    0x400: "Reliability",
}
# The reasons that mean "slower than it could be" (not idle, not a clock setting someone chose).
SLOWDOWN_MASK = 0x4 | 0x8 | 0x20 | 0x40 | 0x80
THERMAL_MASK = 0x8 | 0x20 | 0x40 | 0x80


def decode_reasons(mask: int) -> list[str]:
    return [name for bit, name in THROTTLE_REASONS.items() if mask & bit]
