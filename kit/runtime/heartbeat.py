"""The driver's heartbeat: a file touched every second while a run goes, watched by its workers.

A parent-death signal only reaches a direct child on the same machine; a worker in a container
(or orphaned by a killed torchrun) cannot see the driver die. So every runtime gives each launch
a heartbeat file in its run directory (mounted into containers) and the worker's watchdog
(kit.worker.watchdog) ends the worker when the file has not changed for STALE_S seconds: the
driver was killed (SIGKILL: no handler runs), or the run ended without it.

STALE_S = 8: eight missed beats. The beat is the driver's own thread writing a small file, not
the workload: a run that is slow, or a workload that takes every core, never delays it, and a
driver descheduled on a loaded machine, a slow bind mount or a GC pause misses a beat or two, not
eight. Short enough that a killed driver's container stops itself within about ten seconds of
its last beat (the guard's poll and grace included, kit.worker.guard), not at the run's timeout.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from kit.shared import stop

INTERVAL_S = 1.0
STALE_S = 8.0
FILE = "heartbeat"
ENV_PATH = "KIT_HEARTBEAT"  # the file, as the worker sees it
ENV_STALE = "KIT_HEARTBEAT_STALE_S"


def worker_env(path_seen_by_worker: str, stale_s: float = STALE_S) -> dict[str, str]:
    """The variables that arm a worker's watchdog."""
    return {ENV_PATH: path_seen_by_worker, ENV_STALE: f"{stale_s:g}"}


class Heartbeat:
    """Touch RUN_DIR/heartbeat every INTERVAL_S while the `with` block runs; remove it after.

    The file is written before the block starts, so a worker never finds it missing while the
    driver lives; the thread starts in `beat()` (after a fork with preexec_fn, which threads
    make unsafe) or on entering the block.
    """

    def __init__(self, run_dir: Path, interval_s: float = INTERVAL_S) -> None:
        self.path = run_dir / FILE
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def touch(self) -> None:
        try:
            with open(self.path, "w") as f:
                f.write(f"{os.getpid()}\n")
        except OSError:  # a full disk or a vanished run dir: the worker decides, not the driver
            pass

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.touch()

    def beat(self) -> None:
        """Start the beating thread (idempotent)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="kit-heartbeat", daemon=True)
            stop.start_thread(self._thread)

    def __enter__(self) -> Heartbeat:
        self.touch()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        try:  # a stop signal that lands in the join still removes the file before the seal
            if self._thread is not None:
                self._thread.join(timeout=5)
        finally:
            self.path.unlink(missing_ok=True)
