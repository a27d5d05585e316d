"""NCCL's own word on the algorithm and protocol it picked, for one untimed call per size.

NCCL reads NCCL_DEBUG / NCCL_DEBUG_SUBSYS once, when it first logs; `ncclResetDebugInit` (an
exported symbol since NCCL 2.24, deprecated as API in 2.28 but still exported) makes it read
them again. So rank 0 points NCCL's log at a private file with only the TUNING subsystem on,
resets, runs one call, reads the file, puts the environment back and resets again; one more
call after that lets NCCL re-read its settings before any timing starts. Logging costs host
time, so it never happens inside a timed window; anything that fails here only means "not
logged", never a failed or different measurement. Worker side: standard library only.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from kit.shared.nccl_log import parse_tuning

_KEYS = ("NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE")


def loaded_nccl() -> str | None:
    """The path of the libnccl this process has loaded (torch loads it), from /proc/self/maps."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/maps").read_text().splitlines():
            path = line.split(maxsplit=5)[-1] if line.count(" ") >= 5 else ""
            if "/libnccl.so" in path:
                return path.strip()
    return None


def reset_function() -> tuple[Callable[[], None] | None, str]:
    """(NCCL's ncclResetDebugInit, "") or (None, why the tuning log cannot be turned on)."""
    if os.environ.get("NCCL_DEBUG_FILE"):
        return None, "not logged: NCCL_DEBUG_FILE is set, and the kit does not redirect it"
    path = loaded_nccl()
    if path is None:
        return None, "not logged by this NCCL: no libnccl among the process's libraries"
    try:
        lib = ctypes.CDLL(path)  # already loaded: the same library, not a second copy
        fn = lib.ncclResetDebugInit
    except (OSError, AttributeError):
        return None, "not logged by this NCCL: it has no ncclResetDebugInit (before 2.24)"
    fn.restype = None
    fn.argtypes = []
    return fn, ""


@contextlib.contextmanager
def _tuning_env(path: Path, reset: Callable[[], None]) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in _KEYS}
    os.environ.update(
        {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "TUNING", "NCCL_DEBUG_FILE": str(path)}
    )
    reset()
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        reset()


class TuningLog:
    """Rank 0's switch for NCCL's TUNING log; every rank calls `choice` (it runs collectives)."""

    def __init__(self, rank: int, enabled: bool, reason: str = "") -> None:
        self.rank = rank
        self.enabled = enabled  # every rank agrees: then all make the extra calls
        self.reset: Callable[[], None] | None = None
        self.reason = reason
        self.dir: tempfile.TemporaryDirectory[str] | None = None
        if enabled and rank == 0:
            self.reset, why = reset_function()
            self.reason = self.reason or why
            if self.reset is not None:
                self.dir = tempfile.TemporaryDirectory(prefix="kit-nccl-tuning-")

    def choice(
        self, logged: Callable[[], None], settle: Callable[[], None]
    ) -> list[dict[str, Any]] | None:
        """Run `logged` (one collective, synchronized) with the log on, then `settle` (one more,
        unlogged) so NCCL re-reads its settings before timing. Rank 0 returns the calls NCCL
        printed; other ranks, or a rank with no log, return None after the same calls; with the
        log off on every rank, no call is made. A fault of the collective itself propagates as
        it would unlogged; a fault of the log only makes the rest of the sweep "not logged"."""
        if not self.enabled:
            return None
        if self.reset is None or self.dir is None:
            logged()
            settle()
            return None
        path = Path(self.dir.name) / "tuning.log"
        with _tuning_env(path, self.reset):
            logged()
        settle()
        try:
            return parse_tuning(path.read_text(errors="replace")) if path.exists() else []
        except OSError as exc:
            self.reason = f"not logged: NCCL's log file could not be read ({exc})"
            self.reset = None
            return None

    def close(self) -> None:
        if self.dir is not None:
            self.dir.cleanup()
            self.dir = None
