"""The worker's watchdog: end this worker when the driver's heartbeat stops.

The driver (kit.runtime.heartbeat) touches a file every second while a run goes and passes its
path in KIT_HEARTBEAT. A daemon thread here watches the file's modification time; when it has not
changed for KIT_HEARTBEAT_STALE_S seconds of this process's own monotonic clock (no clock
comparison between machines or a container and its host), the driver is gone or the run is over,
and the worker kills its process group (torchrun starts each rank in its own session: that is the
rank and anything it started). Works wherever the file is visible, with no help from process
ancestry: on the host, in a container, or under a torchrun that was itself killed.

Unarmed when KIT_HEARTBEAT is not set (a worker started by hand).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

POLL_S = 1.0


def _mtime(path: str) -> float | None:
    try:
        return os.stat(path).st_mtime_ns / 1e9
    except OSError:
        return None


def watch(path: str, stale_s: float, poll_s: float = POLL_S) -> None:
    """Block until the heartbeat is stale, then end the process group (never returns)."""
    last, seen = _mtime(path), time.monotonic()
    while True:
        time.sleep(poll_s)
        now = _mtime(path)
        if now is not None and now != last:
            last, seen = now, time.monotonic()
        elif time.monotonic() - seen > stale_s:
            break
    print(
        f"kit.worker: the driver's heartbeat {path} stopped {stale_s:g} s ago; ending this worker",
        file=sys.stderr,
        flush=True,
    )
    try:
        os.killpg(os.getpgrp(), signal.SIGKILL)
    finally:
        os._exit(137)


def start_from_env(environ: dict[str, str] | None = None) -> threading.Thread | None:
    """Arm the watchdog when the driver asked for it (KIT_HEARTBEAT); the thread, or None."""
    env = os.environ if environ is None else environ
    path = env.get("KIT_HEARTBEAT")
    if not path:
        return None
    try:
        stale_s = float(env.get("KIT_HEARTBEAT_STALE_S", "8"))
    except ValueError:
        stale_s = 8.0
    thread = threading.Thread(
        target=watch, args=(path, max(stale_s, 2.0)), name="kit-watchdog", daemon=True
    )
    thread.start()
    return thread
