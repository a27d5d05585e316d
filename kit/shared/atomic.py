"""The one atomic write of both halves: the driver's bundle files (kit.safeio) and the worker's
result (kit.worker.common). Standard library only."""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path

TMP_SUFFIX = ".tmp"
"""What a temporary file beside its target ends with (`kit seal` leaves such leftovers out)."""


def write_atomic(path: Path, data: bytes) -> None:
    """Create `path` anew with `data`, so a reader never sees half: a new temporary file beside
    it (O_EXCL|O_NOFOLLOW: never opened through a link), fsynced, renamed over `path` (a link
    there is replaced, never written through); the temporary file removed on any failure. An
    OSError is raised as it came (the caller words it)."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}{TMP_SUFFIX}")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(tmp, flags, 0o644)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
