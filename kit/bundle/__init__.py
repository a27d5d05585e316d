"""The bundle: one directory per `kit reproduce`, the unit that is attached, verified and compared.

    recipe.yaml  results.json  hardware.json  environment.json  logs/  runs/
    report.html  report.pdf  MANIFEST.sha256

results.json is rewritten after every run, so an interruption or a crash of a later step never
loses what was already measured. MANIFEST.sha256 (sha256sum's format) is written last; it lists
every file, and a bundle may hold nothing else: no links, FIFOs, devices, empty folders or files
the manifest does not name. The one entry beside it is MANIFEST.sha256.sig, the signature of
the manifest (kit/bundle/signature.py), which the manifest cannot list since it signs the manifest.
Every file is written through kit.io.safe (new file, renamed into place, never through a link).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import subprocess
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel

from kit import __version__
from kit.io.errors import InputError
from kit.io.outputs import refuse_inside_bundle
from kit.io.safe import check_folder, read_bytes, scan, write_bytes, write_text
from kit.model import (
    BUNDLE_SCHEMA,
    BundleStatus,
    Environment,
    Hardware,
    Results,
    RunResult,
    RunSpec,
    Software,
    check_schema,
    read_model,
    validate,
)
from kit.model.files import read_json as read_model_json
from kit.model.loader import read_recipe
from kit.recipe import Recipe
from kit.shared import files
from kit.shared.jsonio import dumps, now_iso

MANIFEST = files.MANIFEST
SIGNATURE = files.SIGNATURE
# the files `kit report` writes, by exact name: the only ones it may replace in a sealed bundle
REPORT_FILES = files.REPORT_FILES


def default_bundle_dir(root: Path, recipe_name: str) -> Path:
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    path = root / f"{recipe_name}-{stamp}"
    n = 1
    while path.exists():
        n += 1
        path = root / f"{recipe_name}-{stamp}-{n}"
    return path


COMMIT_ENV = "KIT_COMMIT"
"""Names the kit's commit where the kit is a copy without .git (a wheel, an image, a tree copied to
a GPU machine): whoever made the copy states the commit it came from, as a CI system does."""
_COMMIT = re.compile(r"[0-9a-f]{40}(-dirty)?")


RUNS_FROM = ("kit", "docker", "pyproject.toml")
"""What of the checkout a kit runs from (its code, the environments' Dockerfiles and locks, its
dependencies): an uncommitted change there makes its commit "-dirty"; one elsewhere (a report
re-rendered under reports/, a README) does not."""


def kit_commit() -> str | None:
    """The git commit of the kit that made the bundle ("<sha>-dirty" with uncommitted changes
    to what it runs from, RUNS_FROM).

    A commit stated in $KIT_COMMIT (40 hex digits, with "-dirty" where the copy had changes)
    comes first: whoever copies the tree to a GPU machine knows its commit, and a copy's .git can
    be older than the tree beside it. A stated value of another shape is ignored (the bundle
    then never carries a string nobody can look up); without one, git is asked, else None.
    """
    root = Path(__file__).resolve().parents[2]
    stated = os.environ.get(COMMIT_ENV, "").strip().lower()
    if _COMMIT.fullmatch(stated):
        return stated
    if not (root / ".git").exists():
        return None
    try:
        sha = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            [
                "git",
                "-C",
                str(root),
                "status",
                "--porcelain",
                "--untracked-files=no",
                "--",
                *RUNS_FROM,
            ],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{sha}-dirty" if dirty else sha or None


@dataclass
class Bundle:
    """A bundle being written. results.json is carried typed (`results`: kit.model.Results, its
    header, runs and what the driver decided on the way) and written whole by `save`, with the
    model's own dump: the fields that were read, given or set, none filled in from defaults."""

    path: Path
    as_read: dict[str, Any] | None = field(default=None, repr=False)
    """results.json as `load` read it: checked against the model when a writer first asks for
    `results` (a reader of a received bundle checks its manifest first, then loads it typed)."""
    _results: Results | None = field(default=None, repr=False)

    @property
    def results(self) -> Results:
        """results.json, typed: what the driver sets and appends to; one InputError line for a
        loaded file that does not validate."""
        if self._results is None:
            self._results = validate(Results, self.as_read, self.path / files.RESULTS)
        return self._results

    @classmethod
    def create(cls, path: Path, recipe: dict[str, Any], header: dict[str, Any]) -> Bundle:
        """A new bundle: its folders, recipe.yaml and results.json with `header` (kit.model.Results'
        fields: recipe, device, runtime, pinned, smoke, repeats, ...)."""
        try:
            if path.exists() and (not path.is_dir() or any(path.iterdir())):
                raise InputError(f"{path}: already exists and is not empty; choose another --out")
            refuse_inside_bundle(path, "--out")  # every placement: never inside another bundle
            (path / files.LOGS).mkdir(parents=True, exist_ok=True)
            (path / files.RUNS).mkdir(exist_ok=True)
        except OSError as exc:
            raise InputError(f"{path}: cannot create the bundle there ({exc.strerror})") from None
        write_text(path / files.RECIPE, yaml.safe_dump(recipe, sort_keys=False))
        first = {
            "schema": BUNDLE_SCHEMA,
            "kit_version": __version__,
            "kit_commit": kit_commit(),
            "created_at": now_iso(),
            "finished_at": None,
            "status": "running",
            "preflight": [],
            "reproduces": None,
            **header,
            "runs": [],
        }
        bundle = cls(path, _results=validate(Results, first, path / files.RESULTS))
        bundle.save()
        return bundle

    @classmethod
    def load(cls, path: Path) -> Bundle:
        """A bundle to add to (kit seal, Slurm collect) or to render: results.json read by
        kit.model's strict reader (no link, no NaN, no duplicate key, bounded) and its schema
        version checked. Its fields are checked when a writer first asks for `results`, or by
        kit.model.load_bundle, which readers call after the manifest check."""
        path = Path(path)
        check_folder(path)
        if not os.path.lexists(path / files.RESULTS):
            raise InputError(f"{path}: not a kit bundle (no results.json)")
        shown = path / files.RESULTS
        data = read_model_json(path, files.RESULTS)
        if not isinstance(data, dict):
            raise InputError(f"{shown}: expected a JSON object, got {type(data).__name__}")
        check_schema(data, files.RESULTS, shown)
        for i, run in enumerate(data.get("runs") if isinstance(data.get("runs"), list) else []):
            check_schema(run, files.RESULT, Path(f"{shown}: runs.{i}"))
        return cls(path, data)

    def read_json(self, name: str) -> Any:
        """A JSON file of the bundle by kit.model's strict reader, or None when it is absent."""
        return read_model_json(self.path, name) if os.path.lexists(self.path / name) else None

    def read_typed(self, name: str) -> BaseModel | None:
        """A bundle file (results.json, hardware.json, environment.json, a run's spec.json or
        result.json) as its typed model (kit.model); None when absent. Each problem is one
        InputError line."""
        if not os.path.lexists(self.path / name):
            return None
        model = _model_of(name)
        if model is None:
            raise ValueError(f"{name}: not a file of the typed bundle model")
        return read_model(self.path, name, *model)

    def write_json(self, name: str, data: Any) -> None:
        write_json(self.path / name, data)

    def recipe_model(self) -> Recipe:
        """recipe.yaml through the recipe's strict loader (kit.model's, as load_bundle reads it)."""
        return read_recipe(self.path)

    def run_dir(self, run_id: str) -> Path:
        path = self.path / files.RUNS / run_id
        path.mkdir(parents=True, exist_ok=True)
        return path

    def log_path(self, run_id: str) -> Path:
        return self.path / files.LOGS / f"{run_id}.log"

    def add_run(self, result: RunResult) -> None:
        self.results.runs.append(result)
        self.save()

    def save(self) -> None:
        """results.json as the model holds it: each run as the worker wrote it plus the fields
        the driver set, the header and the driver's decisions (kit.model's own dump, once). A
        run's `loaded` record (tens of KB) stays in its own runs/<id>/result.json only."""
        data = self.results.dump(as_written=True)
        for run in data.get("runs") or []:
            run.pop("loaded", None)
        write_json(self.path / files.RESULTS, data)

    def finish(self, status: BundleStatus) -> None:
        self.results.status = status
        self.results.finished_at = now_iso()
        self.save()


def write_json(path: Path, data: Any) -> None:
    """JSON into a bundle, created anew (kit.io.safe.write_bytes), strict JSON: a NaN or infinity
    is written as null (kit.shared.jsonio.dumps, as the worker writes), never as `NaN`."""
    write_bytes(path, dumps(data).encode("utf-8"))


def _model_of(name: str) -> tuple[type[BaseModel], str | None] | None:
    """The model (and the schema name readers check) of a bundle file, by its path."""
    parts = name.split("/")
    if len(parts) == 3 and parts[0] == files.RUNS and parts[2] in (files.SPEC, files.RESULT):
        return (RunSpec, files.SPEC) if parts[2] == files.SPEC else (RunResult, files.RESULT)
    return {
        files.RESULTS: (Results, files.RESULTS),
        files.HARDWARE: (Hardware, files.HARDWARE),
        files.ENVIRONMENT: (Environment, files.ENVIRONMENT),
        files.SOFTWARE: (Software, files.SOFTWARE),
    }.get(name)


def sha256_file(path: Path) -> str:
    """The SHA-256 of a regular file, read without following a link."""
    digest = hashlib.sha256()
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _remove_empty_dirs(root: Path) -> None:
    """Empty folders cannot be listed in a manifest: a bundle is sealed without them, and
    without the folders that only held them (a run stopped before its spec was written left
    runs/<run>/ empty: removing it left runs/ empty, and the sealed bundle failed its check)."""
    while True:
        removed = False
        for folder in sorted(scan(root).empty_dirs, key=lambda n: -n.count("/")):
            with contextlib.suppress(OSError):
                os.rmdir(root / folder)
                removed = True
        if not removed:
            return


def _entries(root: Path) -> dict[str, Path]:
    """Every regular file of the bundle but the manifest and its signature (top level only)."""
    tree = scan(root)
    if tree.odd:
        raise InputError(
            f"{root}: holds entries that are not regular files or folders: {tree.odd_line()}; "
            "remove them before sealing"
        )
    return {n: root / n for n in tree.files if n not in (MANIFEST, SIGNATURE)}


def _manifest_text(root: Path, names: dict[str, str]) -> str:
    return "".join(f"{digest}  {name}\n" for name, digest in sorted(names.items()))


def write_manifest(root: Path) -> Path:
    """Hash every file of the bundle (but the manifest) in sha256sum's format.

    Empty folders are removed first (a manifest cannot name them); a link, FIFO, device or socket
    is refused. A signature of an older manifest would no longer match: it is removed.
    """
    root = Path(root)
    _remove_empty_dirs(root)
    hashes = {name: sha256_file(p) for name, p in _entries(root).items()}
    if os.path.lexists(root / SIGNATURE):
        os.unlink(root / SIGNATURE)
    out = root / MANIFEST
    write_text(out, _manifest_text(root, hashes))
    return out


@dataclass
class Verification:
    ok: bool
    checked: int
    changed: list[str]
    missing: list[str]
    extra: list[str]  # files and empty folders ("dir/") the manifest does not list
    odd: list[str] = field(default_factory=list)  # links, FIFOs, devices, sockets, odd names

    @property
    def names(self) -> list[str]:
        return self.changed + self.missing + self.extra + self.odd


def read_manifest(root: Path) -> dict[str, str]:
    """The recorded name -> sha256 of a sealed bundle; a malformed line is one error."""
    manifest = Path(root) / MANIFEST
    if not os.path.lexists(manifest):
        if not os.path.lexists(Path(root) / files.RESULTS):
            raise InputError(f"{root}: not a kit bundle (no results.json, no {MANIFEST})")
        raise InputError(f"{root}: no {MANIFEST}; this bundle was never sealed (`kit seal` it)")
    try:
        text = read_bytes(manifest).decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(f"{manifest}: not valid UTF-8") from None
    recorded: dict[str, str] = {}
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        digest, sep, name = line.partition("  ")
        parts = name.split("/")
        if (
            not sep
            or len(digest) != 64
            or any(c not in "0123456789abcdef" for c in digest)
            or name.startswith("/")
            or any(p in ("", ".", "..") for p in parts)
            or name in recorded
        ):
            raise InputError(f"{manifest}:{n}: not a sha256sum line of a bundle: {line[:80]!r}")
        recorded[name] = digest
    return recorded


def content_sha256(root: Path) -> str:
    """sha256 of the manifest's lines less its report files: what names a bundle's content
    across `kit report`, which re-renders the report and re-seals exactly those lines (the whole
    manifest's hash changes with every re-render, so a rerun's link to its source by that hash
    broke when the source was re-rendered)."""
    kept = {n: d for n, d in read_manifest(root).items() if n not in REPORT_FILES}
    return hashlib.sha256(_manifest_text(Path(root), kept).encode()).hexdigest()


def verify_manifest(root: Path) -> Verification:
    """Compare the bundle's whole tree with its manifest: every entry is accounted for.

    Changed, missing and unlisted files; empty folders (unlisted); and links, FIFOs, devices and
    sockets, which no bundle may hold and whose targets are never hashed. The only entries beside
    the listed files are the manifest and its signature.
    """
    root = Path(root)
    if not root.is_dir():
        raise InputError(f"{root}: not a kit bundle (not a folder)")
    recorded = read_manifest(root)
    tree = scan(root)
    present = {n for n in tree.files if n not in (MANIFEST, SIGNATURE)}
    changed = sorted(n for n in recorded if n in present and sha256_file(root / n) != recorded[n])
    missing = sorted(n for n in recorded if n not in present)
    extra = sorted([n for n in present if n not in recorded] + tree.empty_dirs)
    odd = tree.odd
    ok = not (changed or missing or extra or odd)
    return Verification(ok, len(recorded), changed, missing, extra, odd)


def require_sealed(root: Path, purpose: str) -> Verification:
    """A bundle that matches its manifest exactly, or one line naming what does not."""
    check = verify_manifest(root)
    if not check.ok:
        raise InputError(
            f"{root}: does not match its {MANIFEST} ({', '.join(check.names)}); "
            f"`kit verify {root}` shows what changed; {purpose}"
        )
    return check


def reseal_report(root: Path, render: Any) -> Path:
    """Re-render a sealed bundle's report; replace exactly the report files in its manifest.

    Anything else that differs from the manifest (an edit, an extra file, a link) is refused
    before rendering. A signed bundle is refused: a new report would void the signature.
    `render` writes the report files and returns the HTML's path.
    """
    root = Path(root)
    check = verify_manifest(root)
    touched = [n for n in check.names if n not in REPORT_FILES]
    if touched:
        raise InputError(f"{root}: files changed since the bundle was sealed: {', '.join(touched)}")
    if os.path.lexists(root / SIGNATURE):
        raise InputError(
            f"{root}: is signed ({SIGNATURE}); a new report would void the signature: "
            f"re-render a copy without {SIGNATURE}, then `kit sign` it"
        )
    if not os.access(root, os.W_OK | os.X_OK):  # a read-only mount, another user's folder
        raise InputError(
            f"{root}: not writable for you; the report and MANIFEST.sha256 are "
            "written there: re-render a copy"
        )
    recorded = read_manifest(root)
    try:
        return render()
    finally:  # whatever was written (report.html when the PDF failed) is sealed
        for name in REPORT_FILES:
            if os.path.lexists(root / name):
                recorded[name] = sha256_file(root / name)
            else:
                recorded.pop(name, None)
        write_text(root / MANIFEST, _manifest_text(root, recorded))


def add_to_manifest(root: Path, names: list[str]) -> None:
    """List files just written into a sealed bundle in its manifest, leaving every other line
    as it was (`kit refs nccl-tests`). The caller checked the bundle against the manifest first
    and refused a signed one: a changed manifest would void its signature."""
    root = Path(root)
    recorded = read_manifest(root)
    for name in names:
        recorded[name] = sha256_file(root / name)
    write_text(root / MANIFEST, _manifest_text(root, recorded))
