"""What this run loaded: the shared libraries mapped into the process and the Python modules it
imported, each with a hash, read after the timed windows end.

Why: an image holds far more than a run uses. When two environments differ, what decides
whether the difference can have touched a number is whether the runs loaded it; the driver
(kit.envcontent) sorts each difference by these records. Rank 0 records once, after the workload
returned (never inside a timed window). Each library is hashed once: the driver places a memo of
earlier runs' hashes in the run directory (kit.runtime.hashmemo, files.HASH_MEMO), keyed by path,
size and modification time, and this process adds what it hashed. Standard library only.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from kit.shared import files
from kit.shared.atomic import write_atomic

MAX_LIBRARIES = 4000
MAX_MODULES = 4000
MODULE_DIGITS = 16
"""A module's digest is cut to 16 hex digits (64 bits): it is only compared, one run's with
another's, and a run imports hundreds of top-level modules."""


def mapped_paths(maps: str, executable: str | None = None) -> list[str]:
    """The shared libraries (and the interpreter) of a /proc/PID/maps text, each once: files by
    absolute path, not deleted ones, not the run's own files or anonymous memory."""
    out: dict[str, None] = {}
    for line in maps.splitlines():
        parts = line.split(None, 5)
        if len(parts) < 6 or not parts[5].startswith("/"):
            continue
        path = parts[5].strip()
        if path.endswith(" (deleted)"):
            continue
        name = os.path.basename(path)
        if ".so" in name or path == executable:
            out[path] = None
    return list(out)


def module_files(modules: dict[str, Any]) -> dict[str, list[str]]:
    """Each imported top-level name with the files its loaded modules came from (absolute: a
    module found through the working directory may name its file relative to it)."""
    tops: dict[str, list[str]] = {}
    for name, module in list(modules.items()):
        path = getattr(module, "__file__", None)
        if not isinstance(path, str) or not path:
            continue
        tops.setdefault(name.partition(".")[0], []).append(os.path.abspath(path))
    return tops


class Memo:
    """sha256 by (path, size, mtime): each file is read once, here and across runs."""

    def __init__(self, known: dict[str, list[Any]] | None = None) -> None:
        self.known = dict(known or {})
        self.read_bytes = 0

    @classmethod
    def load(cls, path: Path) -> Memo:
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            return cls()
        return cls(data if isinstance(data, dict) else None)

    def sha256(self, path: str) -> str | None:
        try:
            st = os.stat(path)
        except OSError:
            return None
        key = [st.st_size, st.st_mtime_ns]
        seen = self.known.get(path)
        if isinstance(seen, list) and len(seen) == 3 and seen[:2] == key:
            return str(seen[2])
        h = hashlib.sha256()
        try:
            with open(path, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    h.update(chunk)
        except OSError:
            return None
        self.read_bytes += st.st_size
        self.known[path] = [*key, h.hexdigest()]
        return h.hexdigest()

    def save(self, path: Path) -> None:
        write_atomic(path, json.dumps(self.known, separators=(",", ":")).encode())


def module_digest(paths: list[str], memo: Memo) -> str:
    """One digest over a top-level module's loaded files: their names relative to its folder,
    each file's sha256."""
    root = os.path.dirname(os.path.commonpath(paths)) if paths else ""
    h = hashlib.sha256()
    for path in sorted(set(paths)):
        h.update(f"{os.path.relpath(path, root)}\0{memo.sha256(path) or '-'}\n".encode())
    return h.hexdigest()[:MODULE_DIGITS]


def record(run_dir: Path, maps_path: str = "/proc/self/maps") -> dict[str, Any] | None:
    """{libraries: {path: sha256}, modules: {name: digest}, seconds, read_bytes} of this process
    (read_bytes: the libraries' bytes hashed, those the memo did not know),
    or None where /proc cannot be read (not Linux). Module files are hashed each time (small);
    libraries through the run directory's memo, which is written back for the next run."""
    t0 = time.perf_counter()
    try:
        with open(maps_path) as f:
            maps = f.read()
    except OSError:
        return None
    memo_path = run_dir / files.HASH_MEMO
    memo = Memo.load(memo_path)
    libs: dict[str, str] = {}
    for path in mapped_paths(maps, os.path.realpath(sys.executable))[:MAX_LIBRARIES]:
        digest = memo.sha256(path)
        if digest is not None:
            libs[path] = digest
    kept = dict(memo.known)  # the memo holds libraries only: module files change per run
    library_bytes = memo.read_bytes
    modules = {
        name: module_digest(paths, memo)
        for name, paths in sorted(module_files(dict(sys.modules)).items())[:MAX_MODULES]
    }
    if memo_path.exists():  # the driver placed one: it takes the libraries' hashes back
        Memo(kept).save(memo_path)
    return {
        "libraries": libs,
        "modules": modules,
        "seconds": round(time.perf_counter() - t0, 3),
        "read_bytes": library_bytes,  # the libraries read (not found in the memo)
    }
