"""Power, clocks, throttling and energy inside a run's timed window.

Telemetry samples every GPU every ~0.25 s from before the model is built until the benchmark
returns; the figures a buyer needs (joules per token, "was it power-limited?") must come from
the samples inside the timed window only, not from the warm-up or the model build.

Where the window lies on telemetry's clock (`t_s`, seconds since telemetry started):
- "recorded": the worker wrote `data.window_monotonic_s` (time.monotonic at the window's start
  and end) and telemetry wrote `t0_monotonic_s`; window = those minus t0. Exact.
- "inferred": older results have neither. The training worker returns right after its window
  (only a few cross-rank reductions follow) and telemetry stops when it returns, so the window
  is taken as the last `data.window_s` seconds before the last sample. Off by at most one
  sampling interval plus the reductions (~0.3 s) at the start and end.

Energy integrates GPU board power (NVML's power reading, summed over the GPUs the run used) over the
window with the trapezoid rule, power interpolated at the window's edges. It excludes the CPU,
memory, fans and power-supply losses: say "GPU board power" wherever it is printed.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from kit.model import Hardware, RunResult
from kit.shared.throttle import SLOWDOWN_MASK, decode_reasons

POWER_LIMITED_WITHIN = 0.05
"""A sample is "at the cap" when its power is within 5% of the enforced power limit."""
POWER_LIMITED_SHARE = 0.5
"""A figure is power-limited when most (over half) of its window's samples sit at the cap, by
the power reading or by NVML's own SwPowerCap clock-event reason (the cap acts faster than the
one-second power average shows: a window can read 0% at the cap with SwPowerCap in half of it)."""
POWER_CAP_REASON = "SwPowerCap"


@dataclass(frozen=True)
class Window:
    """The timed window on telemetry's clock, and how it was found ("recorded"/"inferred")."""

    start_s: float
    end_s: float
    method: str

    @property
    def seconds(self) -> float:
        return self.end_s - self.start_s


@dataclass(frozen=True)
class WindowFacts:
    """What the GPUs the run used did inside the window (`used_gpus`: idle ones left out).

    energy_j: GPU board energy summed over GPUs. power_w_mean: mean total board power (all GPUs).
    power_w_per_gpu_mean / sm_clock_mhz_mean: per-GPU means over the window's samples.
    throttle_share: reason -> share of window samples (all GPUs) showing it (slowdown reasons
    only: power cap, thermal, hardware slowdown, power brake). at_cap_share: share of samples
    within POWER_LIMITED_WITHIN of the GPU's power limit; power_limited when above
    POWER_LIMITED_SHARE.
    """

    window: Window
    gpus: int
    samples: int
    energy_j: float
    power_w_mean: float
    power_w_per_gpu_mean: float
    sm_clock_mhz_mean: float | None
    sm_clock_mhz_max_spec: float | None
    power_limit_w: float | None
    at_cap_share: float | None
    power_limited: bool
    throttle_share: dict[str, float]
    throttled_share: float

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["window"]["seconds"] = self.window.seconds
        d["window"]["label"] = window_label(self.window)
        return d


def used_gpus(run: RunResult) -> list[dict[str, Any]]:
    """The telemetry entries of the GPUs the run's processes drove, in telemetry's order.

    Telemetry samples every GPU visible to the run's first process, and a container or host
    handed every GPU of the box shows idle ones beside those the ranks drove: a mean over all of
    them reads an idle GPU's 75 W as part of the run's power. The GPUs used are, first, those the
    run recorded (the energy counter's per-rank UUIDs); else local rank i drives the i-th visible
    GPU (CUDA's order is NVML's: the runtime sets CUDA_DEVICE_ORDER=PCI_BUS_ID), so the first
    `processes on the sampled node` entries. Without a process count, every sampled GPU."""
    tel = run.telemetry
    if tel is None or not tel.gpus:
        return []
    counter = run.data.extra("energy_counter")
    recorded = counter.get("gpus") if isinstance(counter, dict) else None
    uuids = {g.get("uuid") for g in recorded or [] if isinstance(g, dict) and g.get("uuid")}
    mine = [g for g in tel.gpus if g.get("uuid") in uuids]
    if mine:
        return mine
    per_node = _processes_on_sampled_node(run)
    return list(tel.gpus[:per_node] if per_node else tel.gpus)


def _processes_on_sampled_node(run: RunResult) -> int | None:
    """The processes on the node whose first rank sampled telemetry: the world size on one
    node, each node's count when every node ran as many; None when that is not known."""
    if run.nodes:
        counts = {n.nproc for n in run.nodes}
        return counts.pop() if len(counts) == 1 else None
    return run.world_size


def timed_window(run: RunResult) -> Window | None:
    """The run's timed window on telemetry's clock, or None (no telemetry, no window_s)."""
    tel = run.telemetry
    if tel is None or not tel.available or not tel.gpus:
        return None
    mono, t0 = run.data.extra("window_monotonic_s"), tel.extra("t0_monotonic_s")
    if isinstance(mono, Sequence) and len(mono) == 2 and isinstance(t0, int | float):
        return Window(float(mono[0]) - t0, float(mono[1]) - t0, "recorded")
    window_s = run.data.extra("window_s")
    times = tel.gpus[0]["samples"].get("t_s") or []
    if not isinstance(window_s, int | float) or window_s <= 0 or not times:
        return None
    end = float(times[-1])
    return Window(max(0.0, end - float(window_s)), end, "inferred")


def window_label(w: Window) -> str:
    how = (
        "marked by the worker"
        if w.method == "recorded"
        else "inferred: the last window_s seconds before telemetry stopped"
    )
    return f"timed window {w.start_s:.1f}-{w.end_s:.1f} s on the telemetry clock ({how})"


def window_facts(
    run: RunResult,
    hardware: Hardware | None = None,
    window: Window | None = None,
) -> WindowFacts | None:
    """Power, energy, clocks and throttling inside `window` (default: the run's timed window),
    over the GPUs the run used (`used_gpus`), never an idle GPU beside them.

    The power limit comes from hardware.json's GPU of the same index (`power_limit_w`, the
    enforced limit); without it `power_limited` is False and `at_cap_share` None.
    """
    w = window or timed_window(run)
    used = used_gpus(run)
    if w is None or not used:
        return None
    hw_gpus = hardware.gpus if hardware else []
    limits = {g.index: g.power_limit_w for g in hw_gpus}
    energy = 0.0
    n_samples = at_cap = throttled = 0
    power_sum = clock_sum = 0.0
    clock_n = 0
    reasons: dict[str, int] = {}
    max_clocks = []
    for gpu in used:
        s = gpu["samples"]
        t, p = s["t_s"], s["power_w"]
        energy += integrate(t, p, w.start_s, w.end_s)
        limit = limits.get(gpu.get("index"))
        for i, ti in enumerate(t):
            if not (w.start_s <= ti <= w.end_s) or p[i] is None:
                continue
            n_samples += 1
            power_sum += p[i]
            if s["sm_clock_mhz"][i] is not None:
                clock_sum += s["sm_clock_mhz"][i]
                clock_n += 1
            if limit:
                at_cap += p[i] >= (1 - POWER_LIMITED_WITHIN) * limit
            mask = (s["throttle_mask"][i] or 0) & SLOWDOWN_MASK
            throttled += bool(mask)
            for name in decode_reasons(mask):
                reasons[name] = reasons.get(name, 0) + 1
        for hw in hw_gpus:
            if hw.index == gpu.get("index"):
                max_clocks.append((hw.clocks_max_mhz or {}).get("sm"))
    if n_samples == 0:
        return None
    gpus = len(used)
    known_limits = [limits.get(g.get("index")) for g in used]
    share = at_cap / n_samples if all(known_limits) else None
    return WindowFacts(
        window=w,
        gpus=gpus,
        samples=n_samples,
        energy_j=energy,
        power_w_mean=energy / w.seconds if w.seconds > 0 else power_sum / n_samples * gpus,
        power_w_per_gpu_mean=power_sum / n_samples,
        sm_clock_mhz_mean=clock_sum / clock_n if clock_n else None,
        sm_clock_mhz_max_spec=max(max_clocks) if max_clocks and all(max_clocks) else None,
        power_limit_w=known_limits[0] if share is not None else None,
        at_cap_share=share,
        power_limited=(share is not None and share > POWER_LIMITED_SHARE)
        or reasons.get(POWER_CAP_REASON, 0) / n_samples > POWER_LIMITED_SHARE,
        throttle_share={k: v / n_samples for k, v in sorted(reasons.items())},
        throttled_share=throttled / n_samples,
    )


def power_capped(run: RunResult, hardware: Hardware | None = None) -> bool:
    """Whether the run's GPUs sat at their power cap for most of the timed window (then the
    median step hides the clock swings and the headline is whole-window throughput)."""
    facts = window_facts(run, hardware)
    return facts is not None and facts.power_limited


def integrate(t: Sequence[float], y: Sequence[float | None], a: float, b: float) -> float:
    """Trapezoid integral of the sampled y(t) over [a, b], y linearly interpolated at a and b
    (held flat beyond the first and last sample). Samples with y None are skipped."""
    pts = [(float(ti), float(yi)) for ti, yi in zip(t, y, strict=True) if yi is not None]
    if not pts or b <= a:
        return 0.0

    ts = [ti for ti, _ in pts]
    ordered = all(t0 <= t1 for t0, t1 in itertools.pairwise(ts))

    def at(x: float) -> float:
        if x <= pts[0][0]:
            return pts[0][1]
        if x >= pts[-1][0]:
            return pts[-1][1]
        if ordered:  # the first pair holding x, found by bisection: one pass, not one per x
            i = bisect.bisect_left(ts, x)
            pairs = [(pts[i - 1], pts[i])]
        else:  # samples out of order (a bundle someone edited): the first pair that holds x
            pairs = list(itertools.pairwise(pts))
        for (t0, y0), (t1, y1) in pairs:
            if t0 <= x <= t1:
                return y0 if t1 == t0 else y0 + (y1 - y0) * (x - t0) / (t1 - t0)
        raise AssertionError("unreachable: x lies between the first and last sample")

    xs = [a, *(ti for ti, _ in pts if a < ti < b), b]
    ys = [at(x) for x in xs]
    return sum(
        (x1 - x0) * (y0 + y1) / 2
        for (x0, x1), (y0, y1) in zip(itertools.pairwise(xs), itertools.pairwise(ys), strict=True)
    )
