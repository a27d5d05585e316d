"""One-off instrument: the CPU each test phase costs, its processes included.

Loaded as a pytest plugin in a clean clone (`-p cpu_per_test` with this folder on PYTHONPATH);
each xdist worker appends one line per phase to $CPU_PER_TEST_DIR/<worker>.tsv: the wall time,
the worker's own CPU, the CPU of its waited-for children (torchrun, kit commands started fresh)
and the growth of its live descendants' CPU (the zygote and what it forked), in seconds.
Daemons (dockerd, containerd, podman's conmon) are not the worker's descendants and are not
counted; the suite's `/usr/bin/time` total says how much the tests' own processes cost.
"""

from __future__ import annotations

import os
import resource
import time
from pathlib import Path

import pytest

TICK = os.sysconf("SC_CLK_TCK")


def _descendants_cpu() -> float:
    """utime + stime + cutime + cstime of every live descendant of this process, in seconds."""
    me = os.getpid()
    parent: dict[int, int] = {}
    cpu: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        pid = int(entry)
        parent[pid] = int(fields[1])
        cpu[pid] = sum(int(f) for f in fields[11:15]) / TICK
    total = 0.0
    for pid in cpu:
        p, hops = parent.get(pid), 0
        while p and p != me and hops < 64:
            p, hops = parent.get(p), hops + 1
        if p == me:
            total += cpu[pid]
    return total


def _sample() -> tuple[float, float, float, float]:
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (
        time.monotonic(),
        own.ru_utime + own.ru_stime,
        kids.ru_utime + kids.ru_stime,
        _descendants_cpu(),
    )


def _out() -> Path:
    folder = Path(os.environ.get("CPU_PER_TEST_DIR", "/tmp/cpu-per-test"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"{os.environ.get('PYTEST_XDIST_WORKER', 'main')}.tsv"


def _record(nodeid: str, phase: str, before: tuple, after: tuple) -> None:
    wall, own, kids, live = (a - b for a, b in zip(after, before, strict=True))
    with _out().open("a") as f:
        f.write(f"{nodeid}\t{phase}\t{wall:.2f}\t{own:.2f}\t{kids:.2f}\t{live:.2f}\n")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item):
    before = _sample()
    yield
    _record(item.nodeid, "setup", before, _sample())


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    before = _sample()
    yield
    _record(item.nodeid, "call", before, _sample())


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item):
    before = _sample()
    yield
    _record(item.nodeid, "teardown", before, _sample())


@pytest.hookimpl(hookwrapper=True)
def pytest_collection(session):
    before = _sample()
    yield
    _record("(collection)", "collect", before, _sample())
