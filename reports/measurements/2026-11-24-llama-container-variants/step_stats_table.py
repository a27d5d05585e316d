#!/usr/bin/env python3
"""What the host did in each timed step, per run, from bundles made with reports/measurements/2026-11-24-llama-container-variants/step_stats.py.

    python3 reports/measurements/2026-11-24-llama-container-variants/step_stats_table.py BUNDLE...

One row per run: whole-window throughput, the GPU's mean utilisation (telemetry), and over the
timed window the main thread's CPU time, its wait on a run queue, its involuntary context
switches and page faults, the garbage collector's time, and how far the host ran ahead of the
GPU (the lead: the GPU's time at a step boundary less the host's time at the same boundary; a
lead near zero means the GPU waited for the host). Then, per run, the slow steps (over 1.1x the
median) against the others, the busiest threads and the machine's CPU time over the window.
"""

from __future__ import annotations

import json
import statistics as st
import sys
from itertools import pairwise
from pathlib import Path

TICK = 100  # USER_HZ of /proc/stat
THREADS = ("main", "autograd")  # the threads whose CPU per step is recorded


def load(bundle: Path) -> list[tuple[str, dict]]:
    results = json.loads((bundle / "results.json").read_text())
    return [(bundle.name, run) for run in results["runs"] if "exp_step_stats" in run["data"]]


def deltas(samples: list[list[float]], col: int) -> list[float]:
    return [b[col] - a[col] for a, b in pairwise(samples)]


def util(run: dict) -> float | None:
    tel, d = run.get("telemetry") or {}, run["data"]
    if not tel.get("available"):
        return None
    s = tel["gpus"][0]["samples"]
    w0, w1 = (t - tel["t0_monotonic_s"] for t in d["window_monotonic_s"])
    u = [x for t, x in zip(s["t_s"], s["util_gpu"], strict=True) if w0 <= t <= w1 and x is not None]
    return st.mean(u) if u else None


def proc_stat(edges: list[dict]) -> dict[str, float]:
    names = ["user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal"]
    a, b = (e["proc_stat"][0].split()[1:9] for e in edges)
    return {n: (int(y) - int(x)) / TICK for n, x, y in zip(names, a, b, strict=True)}


def cg_stat(edges: list[dict]) -> dict[str, int]:
    def parse(text: str | None) -> dict[str, int]:
        return {k: int(v) for k, v in (ln.split() for ln in (text or "").splitlines())}

    a, b = (parse(e.get("cgroup_cpu_stat")) for e in edges)
    return {k: b[k] - a[k] for k in b if k in a and b[k] != a[k]}


def slow_and_rest(steps: list[float]) -> tuple[list[int], list[int]]:
    """The slow steps (over 1.1x the median) and the others, by index."""
    med = st.median(steps)
    slow = [i for i, t in enumerate(steps) if t > 1.1 * med]
    return slow, [i for i in range(len(steps)) if i not in slow]


def per_step(run: dict) -> dict[str, list[float]]:
    """Per timed step (s): the main thread's CPU, the autograd thread's (zeros where not
    recorded), and the step times after warm-up."""
    x, d = run["data"]["exp_step_stats"], run["data"]
    c = {n: i for i, n in enumerate(x["columns"])}
    cpu = deltas(x["samples"], c["thread_cpu_s"])
    autograd = (
        deltas(x["samples"], c["autograd_run_s"]) if "autograd_run_s" in c else [0.0] * len(cpu)
    )
    return {"main": cpu, "autograd": autograd, "steps": d["step_times_s"][d["warmup_steps"] :]}


def ordinary_cpu_ms(run: dict) -> dict[str, float | None]:
    """Mean CPU per ordinary (not slow) step, ms, of the main and autograd threads: the figures
    the per-run lines give after the slash, and calls_table.py compares across calls."""
    p = per_step(run)
    _, rest = slow_and_rest(p["steps"])
    out: dict[str, float | None] = {}
    for thread in THREADS:
        xs = p[thread]
        out[thread] = st.mean(xs[i] for i in rest) * 1e3 if rest and any(xs) else None
    return out


def row(name: str, run: dict) -> tuple[str, list[str]]:
    x, d = run["data"]["exp_step_stats"], run["data"]
    c = {n: i for i, n in enumerate(x["columns"])}
    s = x["samples"]
    wall = deltas(s, c["host_t"])
    wait = deltas(s, c["sched_wait_s"])
    gc = [sum(v) for v in zip(*(deltas(s, c[f"gc{g}_s"]) for g in range(3)), strict=True)]
    gc2 = deltas(s, c["gc2_n"])
    p = per_step(run)
    cpu, autograd, steps = p["main"], p["autograd"], p["steps"]
    lead = [
        g - (h - s[0][c["host_t"]])
        for g, h in zip(x["gpu_t"], (r[c["host_t"]] for r in s), strict=False)
    ]
    u = util(run)
    rollup = x["edges"][0].get("smaps_rollup") or ""
    pmd = next(
        (ln.split()[1] for ln in rollup.splitlines() if ln.startswith("FilePmdMapped:")), None
    )
    cells = [
        f"{d['throughput_window']:.0f}",
        f"{u:.1f}" if u is not None else "-",
        f"{st.median(steps) * 1e3:.0f} / {sorted(steps)[int(0.9 * len(steps))] * 1e3:.0f}",
        f"{sum(cpu) / sum(wall):.3f}",
        f"{sum(wait) * 1e3:.0f}",
        f"{s[-1][c['nivcsw']] - s[0][c['nivcsw']]:.0f}",
        f"{s[-1][c['minflt']] - s[0][c['minflt']]:.0f}",
        f"{sum(gc) * 1e3:.0f} ({sum(gc2):.0f} full)",
        f"{st.median(lead[1:]) * 1e3:.0f} / {min(lead[1:]) * 1e3:.0f}" if len(lead) > 1 else "-",
        f"{int(pmd) // 1024}" if pmd is not None else "-",
    ]
    slow, rest = slow_and_rest(steps)

    def mean_ms(xs: list[float], idx: list[int]) -> str:
        return f"{st.mean(xs[i] for i in idx) * 1e3:.1f}" if idx else "-"

    threads_a, threads_b = (e["threads"] for e in x["edges"])
    busy = sorted(
        ((v[0], v[1] - threads_a.get(tid, [None, 0.0])[1]) for tid, v in threads_b.items()),
        key=lambda t: -t[1],
    )[:5]
    ps, cg = proc_stat(x["edges"]), cg_stat(x["edges"])
    detail = (
        f"- `{name}`: {len(slow)} slow steps of {len(steps)}; slow / other steps, mean ms: "
        f"step {mean_ms(steps, slow)} / {mean_ms(steps, rest)}, main-thread CPU "
        f"{mean_ms(cpu, slow)} / {mean_ms(cpu, rest)}, autograd-thread CPU "
        f"{mean_ms(autograd, slow)} / {mean_ms(autograd, rest)}, run-queue wait {mean_ms(wait, slow)} / "
        f"{mean_ms(wait, rest)}, GC {mean_ms(gc, slow)} / {mean_ms(gc, rest)}. Busiest threads "
        f"(CPU s): {', '.join(f'{n} {t:.1f}' for n, t in busy)}. Machine CPU s over the window: "
        f"{', '.join(f'{k} {v:.1f}' for k, v in ps.items() if v)}"
        + (f"; cgroup cpu.stat: {cg}" if cg else "")
    )
    prof = x.get("profile") or {}
    if prof.get("ops_by_self_cpu_ms"):
        top = prof["ops_by_self_cpu_ms"]
        detail += (
            f"\n  - profiled steps {prof['steps'][0]}-{prof['steps'][1]} (torch.profiler, CPU and CUDA): "
            f"{prof['gpu_kernels']} GPU kernels, GPU busy {prof['gpu_busy_ms']:.0f} ms of "
            f"{prof['gpu_span_ms']:.0f} ms; self CPU of the 40 costliest ops "
            f"{sum(r[2] for r in top):.0f} ms ("
            + ", ".join(f"{r[0]} {r[2]:.0f}" for r in top[:6])
            + "); device time of the costliest op "
            + f"{prof['ops_by_device_ms'][0][0]} {prof['ops_by_device_ms'][0][3]:.0f} ms"
        )
    return "| " + " | ".join([name, *cells]) + " |", [detail]


def main(paths: list[str]) -> int:
    print(
        "| run | tokens/s (window) | GPU util % | step median / p90 (ms) | main-thread CPU / wall "
        "| run-queue wait (ms) | involuntary switches | minor faults | GC ms | lead median / min (ms) "
        "| file text on 2 MiB pages (MiB) |"
    )
    print("|" + "---|" * 11)
    details: list[str] = []
    for p in paths:
        for name, run in load(Path(p)):
            line, more = row(name, run)
            print(line)
            details += more
    print()
    print("\n".join(details))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
