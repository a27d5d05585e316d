"""The library hashes of earlier runs, handed to the next run's worker through its run directory.

Why: each run records the shared libraries it had mapped, with their sha256 (kit.worker.loaded);
a GPU run maps gigabytes of them (torch, cuBLAS, cuDNN, NCCL), and hashing them again after every
run would cost seconds. Before a launch the driver copies its memo for this environment (an image
id, or this machine's Python) into RUN_DIR/hash-memo.json, where any container sees it; the
worker reuses an entry whose path, size and modification time still match and writes back what
it hashed; after the launch the driver keeps the merged memo under the kit's cache and removes
the file from the run directory (`kit seal` removes one a killed driver left).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from pathlib import Path
from typing import Any

from kit.runtime.images.environments import cache_dir
from kit.shared import files
from kit.shared.atomic import write_atomic

MAX_ENTRIES = 20_000
"""A memo larger than this starts again: a memo is a cache, never a record."""


def scope_of(environment: dict[str, Any] | None) -> str | None:
    """What one memo serves: the image (its id) or this machine's Python (its path); None when
    the environment names neither (no memo, each run hashes what it mapped)."""
    env = environment or {}
    scope = env.get("image_id") or env.get("python_executable")
    return str(scope) if scope else None


def _entries(text: str) -> dict[str, list[Any]]:
    try:
        data = json.loads(text)
    except ValueError:
        return {}
    if not isinstance(data, dict):
        return {}
    return {
        k: v
        for k, v in data.items()
        if isinstance(k, str) and isinstance(v, list) and len(v) == 3 and isinstance(v[2], str)
    }


class HashMemo:
    """RUN_DIR/hash-memo.json while the `with` block runs: the scope's memo in, the worker's
    additions back into the cache after."""

    def __init__(self, run_dir: Path, scope: str | None) -> None:
        self.path = run_dir / files.HASH_MEMO
        key = hashlib.sha256(scope.encode()).hexdigest()[:24] if scope else None
        self.store = cache_dir() / "hash-memo" / f"{key}.json" if key else None

    def _stored(self) -> dict[str, list[Any]]:
        if self.store is None:
            return {}
        try:
            return _entries(self.store.read_text())
        except OSError:
            return {}

    def __enter__(self) -> HashMemo:
        if self.store is not None:
            with contextlib.suppress(OSError):
                write_atomic(self.path, json.dumps(self._stored()).encode())
        return self

    def __exit__(self, *exc: object) -> None:
        if self.store is None:
            return
        try:
            added = _entries(self.path.read_text())
        except OSError:
            added = {}
        with contextlib.suppress(OSError):
            self.path.unlink(missing_ok=True)
        if not added:
            return
        merged = {**self._stored(), **added}
        if len(merged) > MAX_ENTRIES:
            merged = added
        with contextlib.suppress(OSError):
            self.store.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(self.store, json.dumps(merged, separators=(",", ":")).encode())
