"""What an image holds, read from inside it: Python distributions, Debian packages, the CUDA,
cuDNN, NCCL and driver libraries, and the version variables its maker set.

Why: two environments whose recorded versions agree can still differ (a rebuilt library, a
package the base image's maker added); a rerun and a comparison name such a difference only if
each image's contents were listed. This file is run inside the image as `python -c SOURCE` by
kit.runtime.images.software (so an image built by another kit version needs nothing of ours) and
prints one JSON line; its parsers are imported by the tests. Standard library only, hashes and
names only (never file contents): the record stays a few hundred KB at most.
"""

from __future__ import annotations

import csv
import glob
import hashlib
import io
import json
import os
import re
import signal
import sys
from collections.abc import Iterable
from importlib import metadata
from typing import Any

SCAN_VERSION = 2
"""Bumped when what the scan records changes (a reader tells older records by it; the cache of an
image's inventory is keyed by this file's whole text: kit.runtime.images.software)."""
MAX_DISTRIBUTIONS = 4000
MAX_DEBIAN = 6000
MAX_LIBRARIES = 2000
MAX_PACKAGE_LIBS = 300
"""Caps that keep the record bounded; a list cut short is named in `truncated`."""

CUDA_LIBRARY = re.compile(
    r"^lib(cuda|cudart|cublas|cublasLt|cudnn[a-z_]*|nccl[a-z_-]*|cufft[a-z]*|curand|"
    r"cusparse[a-zA-Z]*|cusolver[a-zA-Z]*|nvrtc[a-z-]*|nvJitLink|cupti|nvperf_[a-z]+|"
    r"nvToolsExt|nvtx3interop|cufile[a-z_]*|nvidia-[a-z0-9_-]+|nvshmem[a-z_]*|nvblas|"
    r"nvjpeg|npp[a-z]*|cudla|nvfatbin)\.so(\.[0-9][0-9.]*)?$"
)
"""The CUDA toolkit's, cuDNN's, NCCL's and the driver's shared libraries, by file name."""
SHARED_LIBRARY = re.compile(r"\.so(\.[0-9][0-9.]*)?$")
VARIABLE_PREFIXES = (
    "NV_",
    "NVIDIA_",
    "CUDA_",
    "CUDNN_",
    "NCCL_",
    "NVSHMEM_",
    "TORCH_",
    "PYTORCH_",
    "CUBLAS_",
)
VARIABLES = ("LD_LIBRARY_PATH", "LD_PRELOAD", "PYTHONPATH")
MAX_VALUE = 500
LIBRARY_ROOTS = (
    "/usr/local/cuda*",
    "/usr/local/nvidia",
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/lib64",
    "/usr/local/lib",
    "/opt/nvidia",
)
"""Where the CUDA, cuDNN, NCCL and driver libraries live in CUDA and NGC images (walked a few
folders deep), besides the nvidia/ and torch/lib folders of every site-packages."""
WALK_DEPTH = 4
LIMIT_S = 900
"""The scan ends itself by then (SIGALRM): a container whose driver was killed never lingers."""


def normalized(name: str) -> str:
    """A distribution's name as PEP 503 compares them: `Foo_Bar` is `foo-bar`."""
    return re.sub(r"[-_.]+", "-", name).lower()


def record_rows(text: str) -> list[tuple[str, str]]:
    """(path, hash) of a RECORD's files that carry a hash and belong to the distribution's own
    content: not its .dist-info metadata (pip writes the installer and the source path there) and
    not files outside site-packages (scripts whose first line names the interpreter's path)."""
    rows = []
    for row in csv.reader(io.StringIO(text)):
        if len(row) < 2 or not row[1]:
            continue
        path = row[0]
        first = path.split("/", 1)[0]
        if first.endswith(".dist-info") or path.startswith(("../", "/")):
            continue
        rows.append((path, row[1]))
    return sorted(rows)


MODULE_DIGITS = 16
"""A module's digest is cut to 16 hex digits (64 bits): it is only compared, one run's with
another's, and a run imports hundreds of top-level modules."""


def files_digest(rows: Iterable[tuple[str, str]]) -> str:
    """A package's digest over (path inside its folder of packages, sha256) of every file: what a
    run records for a module no distribution lists (kit.worker.loaded.module_digest), and what
    the driver computes for the kit's own files in an image before a run (a rerun's check)."""
    h = hashlib.sha256()
    for rel, sha in sorted(set(rows)):
        h.update(f"{rel}\0{sha}\n".encode())
    return h.hexdigest()[:MODULE_DIGITS]


def record_digest(text: str | None) -> str | None:
    """One sha256 over a distribution's RECORD (its files and their hashes), or None without one."""
    if not text:
        return None
    rows = record_rows(text)
    if not rows:
        return None
    return hashlib.sha256("".join(f"{p},{h}\n" for p, h in rows).encode()).hexdigest()


def top_names(record: str | None, top_level: str | None) -> list[str]:
    """The import names a distribution provides: top_level.txt, else the first part of each path
    its RECORD lists (a module file without its suffix)."""
    if top_level:
        names = {n.strip().split("/")[0] for n in top_level.splitlines() if n.strip()}
        return sorted(n for n in names if n)
    names = set()
    for path, _ in record_rows(record or ""):
        first = path.split("/", 1)[0]
        if "/" not in path:
            if not first.endswith((".py", ".so", ".pyd")):
                continue
            first = first.split(".", 1)[0]
        if first and first != "__pycache__" and not first.endswith((".data", ".libs")):
            names.add(first)
    return sorted(names)


def parse_dpkg_status(text: str) -> list[dict[str, str]]:
    """The installed packages of /var/lib/dpkg/status: name, version, architecture."""
    out = []
    for para in re.split(r"\n\s*\n", text):
        fields: dict[str, str] = {}
        for line in para.splitlines():
            if line[:1] in (" ", "\t") or ":" not in line:
                continue  # a continuation line (a description): not a field
            key, _, value = line.partition(":")
            fields[key.strip()] = value.strip()
        if "Package" in fields and fields.get("Status", "").endswith(" installed"):
            name, version = fields["Package"], fields.get("Version", "")
            out.append({"name": name, "version": version, "arch": fields.get("Architecture", "")})
    return sorted(out, key=lambda p: (p["name"], p["arch"]))


def wanted_variable(name: str) -> bool:
    """The version and tuning variables an image's maker sets (NGC's NV_*, CUDA_VERSION,
    NCCL_VERSION, PYTORCH_VERSION...) and the loader's search paths."""
    return name.endswith("_VERSION") or name.startswith(VARIABLE_PREFIXES) or name in VARIABLES


def sha256_of(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def read_or_none(path: str) -> str | None:
    """A metadata file's text (bad bytes replaced), or None where it cannot be read: a scan
    records what it finds and passes over what it cannot open."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return None


def _real_file(path: str) -> str | None:
    real = os.path.realpath(path)
    return real if os.path.isfile(real) else None


def distributions(truncated: list[str]) -> list[dict[str, Any]]:
    """Every distribution this interpreter imports from (the first of a name on sys.path)."""
    seen: dict[str, dict[str, Any]] = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"] if dist.metadata else None
        if not name or normalized(name) in seen:
            continue
        record = dist.read_text("RECORD")
        seen[normalized(name)] = {
            "name": normalized(name),
            "version": dist.version or "",
            "sha256": record_digest(record),
            "top": top_names(record, dist.read_text("top_level.txt")),
        }
    out = sorted(seen.values(), key=lambda d: d["name"])
    if len(out) > MAX_DISTRIBUTIONS:
        truncated.append(f"distributions: {len(out)}, kept {MAX_DISTRIBUTIONS}")
    return out[:MAX_DISTRIBUTIONS]


DPKG_STATUS = "/var/lib/dpkg/status"
"""Debian's package database: an image without it (a base imported from a file tree) lists no
Debian packages because it has none on record, not because its OS has none."""


def debian(truncated: list[str], root: str = "/var/lib/dpkg") -> list[dict[str, Any]]:
    """Each installed package with the sha256 of its md5sums (the files it shipped) and its
    shared libraries by real path (what a run's mapped libraries are matched against)."""
    status = read_or_none(f"{root}/status")
    if status is None:
        return []
    out = []
    for pkg in parse_dpkg_status(status)[:MAX_DEBIAN]:
        stems = [f"{root}/info/{pkg['name']}:{pkg['arch']}", f"{root}/info/{pkg['name']}"]
        sums = next((t for s in stems if (t := read_or_none(s + ".md5sums")) is not None), None)
        listed = next((t for s in stems if (t := read_or_none(s + ".list")) is not None), "")
        found = (_real_file(ln.strip()) for ln in listed.splitlines() if SHARED_LIBRARY.search(ln))
        libs = sorted({r for r in found if r})
        if len(libs) > MAX_PACKAGE_LIBS:
            truncated.append(
                f"debian {pkg['name']}: {len(libs)} libraries, kept {MAX_PACKAGE_LIBS}"
            )
        pkg["sha256"] = hashlib.sha256(sums.encode()).hexdigest() if sums else None
        pkg["libs"] = libs[:MAX_PACKAGE_LIBS]
        out.append(pkg)
    return out


def _walk(root: str, depth: int) -> list[str]:
    found = []
    for folder, dirs, names in os.walk(root):
        if folder[len(root) :].count(os.sep) >= depth:
            dirs[:] = []
        found += [os.path.join(folder, n) for n in names if CUDA_LIBRARY.match(n)]
    return found


def libraries(truncated: list[str]) -> list[dict[str, Any]]:
    """The CUDA, cuDNN, NCCL and driver libraries by real path, size and sha256."""
    roots = [r for pattern in LIBRARY_ROOTS for r in sorted(glob.glob(pattern))]
    for entry in sys.path:
        roots += sorted(glob.glob(os.path.join(entry, "nvidia", "*", "lib")))
        roots += [os.path.join(entry, "torch", "lib")]
    paths: set[str] = set()
    for root in dict.fromkeys(roots):
        if os.path.isdir(root):
            paths.update(r for p in _walk(root, WALK_DEPTH) if (r := _real_file(p)))
    ordered = sorted(paths)
    if len(ordered) > MAX_LIBRARIES:
        truncated.append(f"libraries: {len(ordered)}, kept {MAX_LIBRARIES}")
    out = []
    for path in ordered[:MAX_LIBRARIES]:
        try:
            out.append({"path": path, "size": os.path.getsize(path), "sha256": sha256_of(path)})
        except OSError:
            continue
    return out


def variables(environ: dict[str, str]) -> dict[str, str]:
    return {k: v[:MAX_VALUE] for k, v in sorted(environ.items()) if wanted_variable(k)}


def os_name() -> str | None:
    text = read_or_none("/etc/os-release") or ""
    m = re.search(r'^PRETTY_NAME="?([^"\n]*)"?', text, re.MULTILINE)
    return m.group(1) if m else None


def scan() -> dict[str, Any]:
    truncated: list[str] = []
    return {
        "scan_version": SCAN_VERSION,
        "python": sys.version.split()[0],
        "python_executable": os.path.realpath(sys.executable),
        "os": os_name(),
        "distributions": distributions(truncated),
        "debian": debian(truncated),
        "dpkg_status": os.path.isfile(DPKG_STATUS),
        "libraries": libraries(truncated),
        "variables": variables(dict(os.environ)),
        "truncated": truncated,
    }


def main() -> None:
    if hasattr(signal, "alarm"):
        signal.alarm(LIMIT_S)
    print(json.dumps(scan(), sort_keys=True, separators=(",", ":")), flush=True)


if __name__ == "__main__":
    main()
