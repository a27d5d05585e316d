"""NCCL's own word on the algorithm and protocol it picked, for one untimed call per size.

NCCL reads NCCL_DEBUG / NCCL_DEBUG_SUBSYS once, when it first logs; `ncclResetDebugInit` (an
exported symbol since NCCL 2.24, deprecated as API in 2.28 but still exported) makes it read
them again. So rank 0 points NCCL's log at a private file with TUNING added to the subsystems
the run prints, resets, runs one call, reads the file, puts the environment back and resets
again; one more call after that lets NCCL re-read its settings before any timing starts. The
file's other lines are copied back to stdout: a connection NCCL makes lazily for that call
still shows in the log where the driver checks transports. Logging costs host time, so it never
happens inside a timed window; anything that fails here only means "not logged", never a
failed or different measurement. Worker side: standard library only.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
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


def info_on() -> bool:
    """Whether the run's own NCCL_DEBUG prints INFO lines (the kit sets INFO on CUDA runs)."""
    return os.environ.get("NCCL_DEBUG", "").upper() in ("INFO", "TRACE")


def with_tuning(subsys: str | None) -> str:
    """NCCL_DEBUG_SUBSYS with TUNING added to what the run prints: NCCL's default set when
    unset, the list plus TUNING, or for "^A,B" (all but A, B) the same list without TUNING."""
    if subsys is None or not subsys.strip():
        return "INIT,BOOTSTRAP,ENV,TUNING"
    if subsys.startswith("^"):
        kept = [x for x in subsys[1:].split(",") if x.strip().upper() != "TUNING"]
        return "^" + ",".join(kept)
    return f"{subsys},TUNING"


@contextlib.contextmanager
def _tuning_env(path: Path, reset: Callable[[], None]) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in _KEYS}
    subsys = with_tuning(saved["NCCL_DEBUG_SUBSYS"]) if info_on() else "TUNING"
    os.environ.update(
        {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": subsys, "NCCL_DEBUG_FILE": str(path)}
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


def echo(text: str) -> None:
    """Put back on stdout what NCCL would have printed there anyway: while the log went to the
    private file, a connection NCCL set up for this call (it connects lazily) logged its
    transport, which the driver's transport check reads from the run's log. TUNING lines stay
    out; without INFO on, only warnings come back."""
    keep = [
        line
        for line in text.splitlines()
        if line.strip() and not parse_tuning(line) and (info_on() or "NCCL WARN" in line)
    ]
    if keep:
        sys.stdout.write("\n".join(keep) + "\n")
        sys.stdout.flush()


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
                try:
                    self.dir = tempfile.TemporaryDirectory(prefix="kit-nccl-tuning-")
                except OSError as exc:  # no writable temporary directory: no log, same timing
                    self.reset, self.reason = None, f"not logged: no file for NCCL's log ({exc})"

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
            text = path.read_text(errors="replace") if path.exists() else ""
            echo(text)
            return parse_tuning(text)
        except OSError as exc:
            self.reason = f"not logged: NCCL's log file could not be read ({exc})"
            self.reset = None
            return None

    def close(self) -> None:
        if self.dir is not None:
            self.dir.cleanup()
            self.dir = None
