"""GPU-or-CPU timing is written once (kit/workloads/timing.py) and the workloads use it."""

from __future__ import annotations

import time
from pathlib import Path

import torch

from kit.worker.common import Context
from kit.workloads.timing import StepTimer, elapsed
from tests.conftest import ROOT

CPU = Context({}, Path("."), 0, 0, 1, torch.device("cpu"), "gloo")


def test_elapsed_times_count_calls_on_the_host_clock():
    calls = []
    seconds = elapsed(CPU, lambda: (calls.append(1), time.sleep(0.01)), 3)
    assert len(calls) == 3 and 0.03 <= seconds < 1.0


def test_the_step_timer_gives_one_time_per_step():
    timer = StepTimer(CPU)
    timer.mark()
    for pause in (0.01, 0.02):
        time.sleep(pause)
        timer.mark()
    first, second = timer.times()
    # each step at least its pause (a sleep never returns early); no order between them: under
    # load a 10 ms sleep ran 22.4 ms and the 20 ms one 21.7 ms (2026-11-29, tests with -n 8)
    assert 0.01 <= first < 1.0 and 0.02 <= second < 1.0


# Timers of one method, kept where the method is: the spin-held batches and their calibration,
# and copy_bandwidth's simultaneous lanes on several streams.
OWN_METHOD = {
    "kit/workloads/collective_timing.py": 3,  # calibrate (1 line), spin_batch (2 lines)
    "kit/workloads/copy_bandwidth/worker.py": 2,  # one start and one end event per lane
}


def test_cuda_event_timing_is_written_once():
    """A CUDA event timer anywhere else in the worker side is a copy of kit.workloads.timing."""
    found = {}
    for path in sorted([*(ROOT / "kit" / "workloads").rglob("*.py"),
                        *(ROOT / "kit" / "worker").rglob("*.py")]):  # fmt: skip
        n = sum("Event(enable_timing=True)" in line for line in path.read_text().splitlines())
        if n:
            found[path.relative_to(ROOT).as_posix()] = n
    assert found == {"kit/workloads/timing.py": 1, **OWN_METHOD}
