"""The one atomic write of both halves: the driver's bundle files (kit.io.safe) and the worker's
result (kit.worker.common). Standard library only."""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Callable, Iterable
from pathlib import Path

TMP_SUFFIX = ".tmp"
"""What a temporary file beside its target ends with (`kit seal` leaves such leftovers out)."""


def write_atomic(
    path: Path, data: bytes | Iterable[bytes], check: Callable[[], None] | None = None
) -> int:
    """Create `path` anew with `data` (bytes, or chunks: an image archive of gigabytes), so a
    reader never sees half: a new temporary file beside it (O_EXCL|O_NOFOLLOW: never opened
    through a link), fsynced, `check` called (a caller's last look at `path`), renamed over
    `path` (a link there is replaced, never written through); the temporary file removed on any
    failure. An OSError is raised as it came (the caller words it). Returns the bytes written."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}{TMP_SUFFIX}")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(tmp, flags, 0o644)
    size = 0
    try:
        with os.fdopen(fd, "wb") as f:
            for chunk in [data] if isinstance(data, bytes) else data:
                f.write(chunk)
                size += len(chunk)
            f.flush()
            os.fsync(f.fileno())
        if check is not None:
            check()
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return size
