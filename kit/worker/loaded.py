"""What this run loaded: the shared libraries mapped into the process and the Python modules it
imported, each with a hash, read after the timed windows end.

Why: an image holds far more than a run uses. When two environments differ, what decides
whether the difference can have touched a number is whether the runs loaded it; the driver
(kit.env.content) sorts each difference by these records. Rank 0 records once, after the workload
returned (never inside a timed window). Each library is hashed once: the driver places a memo of
earlier runs' hashes in the run directory (kit.runtime.hashmemo, files.HASH_MEMO), keyed by path,
size and modification time, and this process adds what it hashed. Standard library only.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from kit.shared import files
from kit.shared.atomic import write_atomic
from kit.shared.imagescan import MODULE_DIGITS, files_digest, read_or_none, record_digest

MAX_LIBRARIES = 4000
MAX_MODULES = 4000
MAX_PACKAGE_FILES = 5000
"""A package of more files than this (and no distribution's RECORD) is hashed by its one file."""


RUN_MADE_MODULES = ("/.triton/", "/.cache/", "/torchinductor_")
"""Modules a run builds for itself: Triton's launcher (`cuda_utils`, compiled into its cache on
each machine, so its bytes differ from machine to machine) and torch.compile's generated code.
Narrower than RUN_MADE: the kit itself may run from a clone under /tmp."""
RUN_MADE = ("/tmp/", "/dev/shm/", "/kit/run/", *RUN_MADE_MODULES)
"""Libraries a run builds for itself (torch.compile's and Triton's kernels, under the temporary
folder or a cache): products of the run, not of the environment, and named by content hashes."""


def made_by_run(path: str) -> bool:
    tmp = os.environ.get("TMPDIR")
    return any(part in path for part in RUN_MADE) or bool(tmp and path.startswith(tmp + "/"))


def mapped_paths(maps: str, executable: str | None = None) -> list[str]:
    """The shared libraries (and the interpreter) of a /proc/PID/maps text, each once: files by
    absolute path, not deleted ones, not anonymous memory, not what the run built itself."""
    out: dict[str, None] = {}
    for line in maps.splitlines():
        parts = line.split(None, 5)
        if len(parts) < 6 or not parts[5].startswith("/"):
            continue
        path = parts[5].strip()
        if path.endswith(" (deleted)") or made_by_run(path):
            continue
        name = os.path.basename(path)
        if ".so" in name or path == executable:
            out[path] = None
    return list(out)


def top_modules(modules: dict[str, Any]) -> dict[str, tuple[str, bool]]:
    """Each imported top-level name: its file (absolute: a module found through the working
    directory may name it relative to it) and whether it is a package (a folder of modules); not
    the modules the run compiled for itself (RUN_MADE_MODULES)."""
    out: dict[str, tuple[str, bool]] = {}
    for name, module in list(modules.items()):
        path = getattr(module, "__file__", None)
        if "." in name or not isinstance(path, str) or not path:
            continue
        if any(part in path for part in RUN_MADE_MODULES):
            continue
        out[name] = (os.path.abspath(path), hasattr(module, "__path__"))
    return out


class Owners:
    """Which installed distribution provides a top-level name, per folder of distributions: a
    *.dist-info's top_level.txt, else the distribution's own name (`torch-2.13.0.dist-info`)."""

    def __init__(self) -> None:
        self.folders: dict[str, dict[str, str]] = {}

    @staticmethod
    def _table(folder: str) -> dict[str, str]:
        table: dict[str, str] = {}
        for info in sorted(glob.glob(os.path.join(glob.escape(folder), "*.dist-info"))):
            dist = os.path.basename(info)[: -len(".dist-info")].rsplit("-", 1)[0]
            names = read_or_none(os.path.join(info, "top_level.txt")) or dist
            for name in names.split():
                table.setdefault(name.lower().replace("-", "_"), info)
        return table

    def record(self, folder: str, name: str) -> str | None:
        """The RECORD of the distribution in `folder` that provides `name`, or None."""
        if folder not in self.folders:
            self.folders[folder] = self._table(folder)
        info = self.folders[folder].get(name.lower())
        return read_or_none(os.path.join(info, "RECORD")) if info else None


def package_files(folder: str) -> list[str] | None:
    """Every file of a package folder but compiled bytecode; None past MAX_PACKAGE_FILES."""
    out: list[str] = []
    for root, dirs, names in os.walk(folder):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        out += [os.path.join(root, n) for n in names if not n.endswith(".pyc")]
        if len(out) > MAX_PACKAGE_FILES:
            return None
    return out


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


def module_digest(name: str, path: str, package: bool, owners: Owners, memo: Memo) -> str:
    """One digest of a top-level module that does not depend on which of its files a run
    imported (torch imports submodules lazily): the sha256 over its distribution's RECORD
    (kit.shared.imagescan.record_digest, as an image's inventory lists it) when one provides it,
    else over every file of its package (its one file for a module), each file's sha256."""
    site = os.path.dirname(os.path.dirname(path) if package else path)
    listed = record_digest(owners.record(site, name))
    if listed is not None:
        return hashlib.sha256(f"distribution {listed}".encode()).hexdigest()[:MODULE_DIGITS]
    paths = (package_files(os.path.dirname(path)) if package else None) or [path]
    return files_digest((os.path.relpath(p, site), memo.sha256(p) or "-") for p in set(paths))


def record(run_dir: Path, maps_path: str = "/proc/self/maps") -> dict[str, Any] | None:
    """{libraries: {path: sha256}, modules: {name: digest}, seconds, read_bytes} of this process
    (read_bytes: the libraries' bytes hashed, those the memo did not know), or None where /proc
    cannot be read (not Linux). A module's files are hashed each time (small, and none where a
    distribution's RECORD lists them); libraries through the run directory's memo, which is
    written back for the next run."""
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
    owners = Owners()
    tops = sorted(top_modules(dict(sys.modules)).items())[:MAX_MODULES]
    modules = {name: module_digest(name, p, pkg, owners, memo) for name, (p, pkg) in tops}
    if memo_path.exists():  # the driver placed one: it takes the libraries' hashes back
        Memo(kept).save(memo_path)
    return {
        "libraries": libs,
        "modules": modules,
        "seconds": round(time.perf_counter() - t0, 3),
        "read_bytes": library_bytes,  # the libraries read (not found in the memo)
    }
