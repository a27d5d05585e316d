"""A pytest plugin that names the test during which a new entry appeared in the real /tmp.

Used on 2026-12-02 (twenty-third session) to find what the suite left there:
    PYTHONPATH=reports/measurements/2026-11-29-test-durations \
        .venv/bin/python -m pytest -n 2 --dist loadfile -p leakwatch -q
Each worker appends `START END TEST [NEW ENTRIES]` to /tmp/leakwatch/WORKER.txt. With two workers,
an entry made by one worker's test is seen by a test of the other that ran at the same time: read
the names across both files (an entry named under two tests belongs to the one that makes it
alone).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

OUT = Path("/tmp/leakwatch")


def _entries() -> set[str]:
    try:
        return set(os.listdir("/tmp"))
    except OSError:
        return set()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    before, start = _entries(), time.time()
    yield
    new = _entries() - before
    if new:
        OUT.mkdir(exist_ok=True)
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        with open(OUT / f"{worker}.txt", "a") as f:
            f.write(f"{start:.0f} {time.time():.0f} {item.nodeid} {sorted(new)}\n")
