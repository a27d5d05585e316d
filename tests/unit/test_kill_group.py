"""Stopping a launch stops the whole process group before the driver goes on to seal: torchrun
can exit on SIGTERM before its ranks, and a rank still writing into the run folder after the seal
changed a sealed bundle (a stop-signal test failed so under load)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from kit.runtime.containers.process import group_runs, kill_group

# the leader ends at once on SIGTERM; its child takes a second over its last write
LEADER = """
import os, signal, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[2], sys.argv[3]])
time.sleep(60)
"""
CHILD = """
import signal, sys, time
def late(*_):
    time.sleep(1.0)
    open(sys.argv[1], "w").write("written after the leader ended")
    sys.exit(0)
signal.signal(signal.SIGTERM, late)
open(sys.argv[2], "w").write("armed")
time.sleep(60)
"""


def test_the_stop_returns_once_every_process_of_the_group_ended(tmp_path):
    late, armed = tmp_path / "late.txt", tmp_path / "armed.txt"
    proc = subprocess.Popen(
        [sys.executable, "-c", LEADER, CHILD, str(late), str(armed)], start_new_session=True
    )
    try:
        deadline = time.monotonic() + 60
        while not armed.exists():  # the child has set its handler
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.02)
        kill_group(proc)
        # the child's last write happened before the stop returned, and nothing of it runs
        assert late.read_text() == "written after the leader ended"
        assert not group_runs(proc.pid)
    finally:
        if group_runs(proc.pid):
            os.killpg(proc.pid, 9)


def test_a_group_that_ended_does_not_run():
    proc = subprocess.Popen([sys.executable, "-c", "pass"], start_new_session=True)
    proc.wait(timeout=30)
    assert not group_runs(proc.pid)
