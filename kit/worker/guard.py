"""The container's own watchdog: `python -m kit.worker.guard -- torchrun ...`.

The ranks' watchdog (kit.worker.watchdog) arms only once a rank has started, and it ends that
rank alone; torchrun, its start-up and anything else in the container do not watch the driver.
A Docker run's command is therefore this guard: it starts the command in its own process group,
forwards SIGTERM/SIGINT/SIGHUP to it, and when the driver's heartbeat file (KIT_HEARTBEAT) has
not changed for KIT_HEARTBEAT_STALE_S seconds (the driver was killed, SIGKILL included) it ends
the group and exits. The guard is the child of the container's init, so its exit stops the
container: every process in it ends with its PID namespace.

Without KIT_HEARTBEAT it simply runs the command (a container started by hand).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable

from kit.worker.watchdog import _mtime

POLL_S = 0.5
GRACE_S = 2.0  # between SIGTERM to the group and SIGKILL: the driver that wanted it is dead


def _signal_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def _exit_code(code: int) -> int:
    return 128 - code if code < 0 else code


def supervise(
    argv: list[str], path: str, stale_s: float, clock: Callable[[], float] = time.monotonic
) -> int:
    """Run `argv` until it ends (its exit status) or the heartbeat at `path` goes stale (137)."""
    child = subprocess.Popen(argv, start_new_session=True)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda s, _f: _signal_group(child.pid, s))
    last, seen = _mtime(path), clock()
    while True:
        try:
            return _exit_code(child.wait(timeout=POLL_S))
        except subprocess.TimeoutExpired:
            pass
        now = _mtime(path)
        if now is not None and now != last:
            last, seen = now, clock()
        elif clock() - seen > stale_s:
            break
    print(
        f"kit.worker.guard: the driver's heartbeat {path} stopped {stale_s:g} s ago; "
        "stopping this container",
        file=sys.stderr,
        flush=True,
    )
    _signal_group(child.pid, signal.SIGTERM)
    try:
        child.wait(timeout=GRACE_S)
    except subprocess.TimeoutExpired:
        _signal_group(child.pid, signal.SIGKILL)
        child.wait()
    return 137


def main(args: list[str]) -> int:
    argv = args[1:] if args[:1] == ["--"] else args
    if not argv:
        print("usage: python -m kit.worker.guard -- COMMAND...", file=sys.stderr)
        return 2
    path = os.environ.get("KIT_HEARTBEAT")
    if not path:
        os.execvp(argv[0], argv)
    try:
        stale_s = max(float(os.environ.get("KIT_HEARTBEAT_STALE_S", "8")), 2.0)
    except ValueError:
        stale_s = 8.0
    return supervise(argv, path, stale_s)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
