"""The environment probe ends itself: a probe container whose driver was SIGKILLed (no handler
runs, nobody waits for it) must not live on if the probe hangs."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

from tests.conftest import ROOT

HANG = (
    "import time, kit.worker.probe as p\n"
    "p.PROBE_LIMIT_S = 1\n"
    "p.collect = lambda: time.sleep(60)\n"
    "p.main()\n"
)


def test_a_hung_probe_ends_itself():
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", HANG], cwd=ROOT, capture_output=True, timeout=30)
    assert proc.returncode == -signal.SIGALRM
    assert time.monotonic() - t0 < 20


def test_the_limit_outlasts_the_drivers_wait():
    from kit.runtime.images.fingerprint import PROBE_WAIT_S
    from kit.worker.probe import PROBE_LIMIT_S

    assert PROBE_LIMIT_S > PROBE_WAIT_S
