"""One kit at a time on a shared thing of this host (the wheel cache, an image being built).

An flock on a file under the kit's cache: the kernel lets it go when the holder exits, however
it exits (SIGKILL included), so a killed kit never leaves a stale lock behind. Standard library
only.
"""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Callable, Iterator
from pathlib import Path


@contextlib.contextmanager
def held(path: Path, waiting: Callable[[], None] | None = None) -> Iterator[None]:
    """Hold an exclusive lock on `path` (made if absent) for the block. When another process
    holds it, call `waiting()` once (to say why nothing moves), then wait for it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if waiting is not None:
                waiting()
            fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
