#!/usr/bin/env python3
"""Host-side statistics of every timed step, written into a device call's copy of the tree.

    KIT_DEVICE_COPY=1 python3 reports/measurements/2026-11-24-llama-container-variants/step_stats.py

An experiment on why a training step reads slower in the kit's GPU container than on the host
(reports/measurements/*-llama-container-*): the GPU sits idler in the slow runs, so the host
falls behind now and then. This adds, to every training run of the call's copy only, what the
main thread did in each timed step and where the rest of the process spent its CPU:

  per step   the main thread's CPU time, its wait on a run queue (/proc/thread-self/schedstat),
             its context switches and page faults (RUSAGE_THREAD), the time in Python's garbage
             collector by generation, and the host's clock at each step boundary (against the
             CUDA events' times: how far the host ran ahead of the GPU)
  profile    PROFILE=1: steps 20-25 traced by torch.profiler (self CPU and device time per op)
  window     every thread's CPU time, /proc/stat's CPU lines (steal included), /proc/pressure/cpu
             and the cgroup's cpu.stat, at the window's edges

They land in the run's data as `exp_step_stats`; reports/measurements/2026-11-24-llama-container-variants/step_stats_table.py reads them.
Never run it in a checkout: it edits kit/worker/training.py and writes kit/worker/exp_step_stats.py.
"""

from __future__ import annotations

import os
from pathlib import Path

from device_copy import edit_copy  # beside this script

ROOT = Path(__file__).resolve().parents[3]
TRAINING = ROOT / "kit/worker/training.py"
MODULE = ROOT / "kit/worker/exp_step_stats.py"

SOURCE = '''"""Experiment (device copy only): host-side statistics of every timed step."""

from __future__ import annotations

import gc
import os
import resource
import time
from typing import Any

_steps: list[list[float]] = []
_gc = {"t": [0.0, 0.0, 0.0], "n": [0, 0, 0], "t0": 0.0}
_edges: list[dict[str, Any]] = []


def _gc_cb(phase: str, info: dict[str, Any]) -> None:
    if phase == "start":
        _gc["t0"] = time.perf_counter()
    else:
        g = info.get("generation", 2)
        _gc["t"][g] += time.perf_counter() - _gc["t0"]
        _gc["n"][g] += 1


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def _threads() -> dict[str, list[Any]]:
    out = {}
    tick = os.sysconf("SC_CLK_TCK")
    for tid in os.listdir("/proc/self/task"):
        stat = _read(f"/proc/self/task/{tid}/stat")
        if not stat:
            continue
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        rest = stat[stat.rindex(")") + 2 :].split()
        out[tid] = [comm, (int(rest[11]) + int(rest[12])) / tick, int(rest[36])]  # cpu s, last cpu
    return out


def _edge() -> dict[str, Any]:
    return {
        "t": time.perf_counter(),
        "threads": _threads(),
        "proc_stat": [ln for ln in (_read("/proc/stat") or "").splitlines() if ln.startswith("cpu")],
        "pressure_cpu": _read("/proc/pressure/cpu"),
        "cgroup_cpu_stat": _read("/sys/fs/cgroup/cpu.stat"),
        "cgroup": _read("/proc/self/cgroup"),
        "affinity": sorted(os.sched_getaffinity(0)),
        "gc_count": list(gc.get_count()),
        "gc_stats": gc.get_stats(),
        "loadavg": _read("/proc/loadavg"),
    }


_helper: list[str] = []  # the autograd thread's schedstat file, found at start


def _libraries() -> list[str]:
    paths = set()
    for line in (_read("/proc/self/maps") or "").splitlines():
        parts = line.split(None, 5)
        if len(parts) == 6 and parts[5].startswith("/"):
            paths.add(parts[5])
    return sorted(paths)


def _text_pages() -> list[list[Any]]:
    """Each mapped file of over 20 MiB resident: [path, Rss KiB, FilePmdMapped KiB]."""
    out: dict[str, list[int]] = {}
    path = None
    for line in (_read("/proc/self/smaps") or "").splitlines():
        head = line.split(None, 5)
        if len(head) >= 5 and "-" in head[0] and ":" not in head[0]:
            path = head[5] if len(head) == 6 and head[5].startswith("/") else None
        elif path and line.startswith(("Rss:", "FilePmdMapped:")):
            acc = out.setdefault(path, [0, 0])
            acc[0 if line.startswith("Rss:") else 1] += int(line.split()[1])
    return [[p, *v] for p, v in sorted(out.items(), key=lambda kv: -kv[1][0]) if v[0] > 20 << 10]


def _sample() -> list[float]:
    ru = resource.getrusage(resource.RUSAGE_THREAD)
    sched = (_read("/proc/thread-self/schedstat") or "0 0 0").split()
    other = (_read(_helper[0]) or "0 0 0").split() if _helper else ["0", "0"]
    return [
        time.perf_counter(),
        time.thread_time(),
        int(sched[0]) / 1e9,
        int(sched[1]) / 1e9,
        ru.ru_nvcsw,
        ru.ru_nivcsw,
        ru.ru_minflt,
        ru.ru_majflt,
        *_gc["t"],
        *_gc["n"],
        int(other[0]) / 1e9,
        int(other[1]) / 1e9,
    ]


def start() -> None:
    _steps.clear()
    _edges.clear()
    _edges.append(_edge())
    _edges[0]["libraries"] = _libraries()
    _edges[0]["environ"] = dict(os.environ)
    _edges[0]["smaps_rollup"] = _read("/proc/self/smaps_rollup")
    _edges[0]["text_pages"] = _text_pages()
    _edges[0]["status"] = _read("/proc/self/status")
    _edges[0]["cpuinfo_mhz"] = [
        ln for ln in (_read("/proc/cpuinfo") or "").splitlines() if ln.startswith("cpu MHz")
    ]
    _helper.clear()
    _helper.extend(
        f"/proc/self/task/{tid}/schedstat"
        for tid, v in _edges[0]["threads"].items()
        if v[0] == "pt_autograd_0"
    )
    gc.callbacks.append(_gc_cb)
    _steps.append(_sample())


PROFILE = __PROFILE__  # the window's steps traced by torch's profiler (CPU and CUDA), or (-1, -1)
_prof: list[Any] = []


def mark() -> None:
    _steps.append(_sample())
    n = len(_steps) - 1  # steps done in the window
    if n == PROFILE[0]:
        import torch

        acts = [torch.profiler.ProfilerActivity.CPU]
        if torch.cuda.is_available():
            acts.append(torch.profiler.ProfilerActivity.CUDA)
        prof = torch.profiler.profile(activities=acts)
        prof.start()
        _prof.append(prof)
    elif n == PROFILE[1] and _prof:
        _prof[0].stop()


def _profile_summary() -> dict[str, Any]:
    """What the traced steps spent: per op self CPU and device time, and the GPU's busy time."""
    if not _prof:
        return {}
    prof = _prof.pop()
    out: dict[str, Any] = {"steps": list(PROFILE)}
    rows = []
    for e in prof.key_averages():
        rows.append([e.key, e.count, e.self_cpu_time_total / 1e3,
                     getattr(e, "self_device_time_total", 0.0) / 1e3])
    rows.sort(key=lambda r: -r[2])
    out["ops_by_self_cpu_ms"] = rows[:40]
    out["ops_by_device_ms"] = sorted(rows, key=lambda r: -r[3])[:25]
    spans = []
    for e in prof.events():
        dt = str(getattr(e, "device_type", ""))
        if "CUDA" in dt and e.time_range.end > e.time_range.start:
            spans.append((e.time_range.start, e.time_range.end))
    spans.sort()
    busy, end, first = 0.0, None, spans[0][0] if spans else 0
    for a, b in spans:
        if end is None or a > end:
            busy += b - a
            end = b
        elif b > end:
            busy += b - end
            end = b
    out["gpu_kernels"] = len(spans)
    out["gpu_busy_ms"] = busy / 1e3
    out["gpu_span_ms"] = ((end or 0) - first) / 1e3
    return out


def finish(marks: list[Any]) -> dict[str, Any]:
    """After the window's synchronize: the GPU's time at each mark from the first one."""
    _edges.append(_edge())
    if _gc_cb in gc.callbacks:
        gc.callbacks.remove(_gc_cb)
    gpu = [marks[0].elapsed_time(m) / 1e3 for m in marks] if hasattr(marks[0], "elapsed_time") else []
    return {
        "columns": [
            "host_t", "thread_cpu_s", "sched_run_s", "sched_wait_s", "nvcsw", "nivcsw",
            "minflt", "majflt", "gc0_s", "gc1_s", "gc2_s", "gc0_n", "gc1_n", "gc2_n",
            "autograd_run_s", "autograd_wait_s",
        ],
        "samples": _steps,
        "gpu_t": gpu,
        "edges": _edges,
        "profile": _profile_summary(),
    }
'''

EDITS = [
    (
        "        window_t0, mono_t0 = time.perf_counter(), time.monotonic()\n        timer.mark()\n",
        "        from kit.worker import exp_step_stats as _xs\n\n"
        "        window_t0, mono_t0 = time.perf_counter(), time.monotonic()\n        timer.mark()\n"
        "        _xs.start()\n",
    ),
    (
        "                timer.mark()\n                i += 1\n",
        "                timer.mark()\n                _xs.mark()\n                i += 1\n",
    ),
    (
        '        "window_monotonic_s": [mono_t0, time.monotonic()],\n',
        '        "window_monotonic_s": [mono_t0, time.monotonic()],\n'
        '        "exp_step_stats": _xs.finish(timer._marks),\n',
    ),
]


def profiled() -> tuple[int, int]:
    """The window's steps to trace: PROFILE=1 traces steps 20-25 (the trace slows them, so a
    profiled run's throughput compares only with other profiled runs); none by default."""
    return (20, 25) if os.environ.get("PROFILE") == "1" else (-1, -1)


def main() -> int:
    module = SOURCE.replace("__PROFILE__", repr(profiled()))
    return edit_copy(
        "step_stats.py", TRAINING, EDITS, "exp_step_stats",
        "step statistics (kit/worker/exp_step_stats.py)", also=lambda: MODULE.write_text(module),
    )  # fmt: skip


if __name__ == "__main__":
    raise SystemExit(main())
