"""Whatever ends `kit`, no torchrun or worker of its run outlives it by more than a few seconds.

Real processes: `kit reproduce` of a CPU recipe with the host runtime in a subprocess; once its
torchrun and ranks exist (found in /proc by the run directory in their command line), the driver
gets SIGKILL, SIGHUP, SIGTERM or repeated SIGINT, and no process of that run may remain 20 s later.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from kit.runtime.heartbeat import Heartbeat
from tests.conftest import ROOT, allreduce_recipe, sigint_as_default

pytestmark = pytest.mark.slow

RECIPE = allreduce_recipe(
    "driver-death",
    "max_bytes: 4096, factor: 4, iters: 1000000, warmup_iters: 1, trials: 100",
    timeout_s=600,
)


def _processes_of(marker: str, exclude: int) -> dict[int, str]:
    """pid -> command line of every process whose command line holds `marker`."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == exclude:
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker in cmd and state != "Z":  # a zombie holds nothing and waits for its reaper
            found[int(entry.name)] = cmd
    return found


def _start(tmp_path: Path) -> tuple[subprocess.Popen, str]:
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(RECIPE)
    out = tmp_path / "bundle"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "kit", "reproduce", str(recipe), "--device", "cpu",
           "--runtime", "host", "--out", str(out)]  # fmt: skip
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, preexec_fn=sigint_as_default)  # fmt: skip
    marker = str(out / "runs")
    deadline = time.monotonic() + 120
    while True:  # torchrun and both ranks (their command lines name the run's spec)
        procs = _processes_of(marker, proc.pid)
        if sum("kit.worker" in c for c in procs.values()) >= 3:
            return proc, marker
        assert proc.poll() is None, "kit ended before its ranks started"
        assert time.monotonic() < deadline, f"no ranks after 120 s: {procs}"
        time.sleep(0.5)


def _assert_all_gone(proc: subprocess.Popen, marker: str, within_s: float = 20) -> None:
    deadline = time.monotonic() + within_s
    left = _processes_of(marker, proc.pid)
    while left and time.monotonic() < deadline:
        time.sleep(0.5)
        left = _processes_of(marker, proc.pid)
    for pid in left:  # never leave them to the next test
        os.kill(pid, signal.SIGKILL)
    assert not left, f"still running {within_s:g} s after the driver died: {left}"


@pytest.mark.parametrize(
    "sig", [signal.SIGKILL, signal.SIGHUP, signal.SIGTERM], ids=lambda s: s.name
)
def test_the_driver_s_death_ends_its_run(tmp_path, sig):
    proc, marker = _start(tmp_path)
    try:
        time.sleep(1)
        proc.send_signal(sig)
        proc.wait(timeout=180)  # sealing renders the report: slow on a loaded machine
        _assert_all_gone(proc, marker)
    finally:
        if proc.poll() is None:
            proc.kill()
    if sig != signal.SIGKILL:  # a handled signal: the bundle is sealed, the run interrupted
        assert proc.returncode == 128 + sig  # SIGTERM 143, SIGHUP 129: as at every stage
        assert (tmp_path / "bundle" / "MANIFEST.sha256").is_file()


def test_repeated_ctrl_c_ends_the_run(tmp_path):
    proc, marker = _start(tmp_path)
    try:
        for _ in range(4):
            time.sleep(0.3)
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
        proc.wait(timeout=180)
        _assert_all_gone(proc, marker)
    finally:
        if proc.poll() is None:
            proc.kill()


WATCHED = """
import sys, time
from kit.worker.watchdog import start_from_env
start_from_env({"KIT_HEARTBEAT": sys.argv[1], "KIT_HEARTBEAT_STALE_S": "2"})
print("armed", flush=True)
time.sleep(60)
"""


def _watched(path: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-c", WATCHED, str(path)], env=env,
                            stdout=subprocess.PIPE, text=True, start_new_session=True)  # fmt: skip
    assert proc.stdout is not None and proc.stdout.readline() == "armed\n"
    return proc


def test_the_watchdog_ends_a_worker_whose_heartbeat_stops(tmp_path):
    """No process ancestry involved: only the file (as in a container, or under a dead torchrun)."""
    with Heartbeat(tmp_path, interval_s=0.5) as beat:
        beat.beat()
        proc = _watched(beat.path)
        time.sleep(5)  # beating: more than twice the stale limit, and it lives
        assert proc.poll() is None
    # the driver stopped beating (and removed the file): ended within the limit and a poll
    t0 = time.monotonic()
    assert proc.wait(timeout=15) == -signal.SIGKILL
    assert time.monotonic() - t0 < 6


def test_the_watchdog_ends_a_worker_whose_driver_never_beats(tmp_path):
    stale = tmp_path / "heartbeat"
    stale.write_text("")
    proc = _watched(stale)
    assert proc.wait(timeout=15) == -signal.SIGKILL


def test_no_watchdog_without_a_heartbeat():
    from kit.worker.watchdog import start_from_env

    assert start_from_env({}) is None
    assert threading.active_count() >= 1
