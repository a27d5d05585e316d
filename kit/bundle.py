"""The bundle: one directory per `kit reproduce`, the unit that is attached, verified and compared.

    recipe.yaml  results.json  hardware.json  environment.json  logs/  runs/
    report.html  report.pdf  MANIFEST.sha256

results.json is rewritten after every run, so an interruption or a crash of a later step never
loses what was already measured. MANIFEST.sha256 (sha256sum's format) is written last.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from kit import __version__
from kit.errors import InputError
from kit.worker.common import now_iso, write_json

BUNDLE_SCHEMA = 1
MANIFEST = "MANIFEST.sha256"


def default_bundle_dir(root: Path, recipe_name: str) -> Path:
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    path = root / f"{recipe_name}-{stamp}"
    n = 1
    while path.exists():
        n += 1
        path = root / f"{recipe_name}-{stamp}-{n}"
    return path


@dataclass
class Bundle:
    path: Path
    results: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def create(cls, path: Path, recipe: dict[str, Any], header: dict[str, Any]) -> Bundle:
        if path.exists() and any(path.iterdir()):
            raise InputError(f"{path}: already exists and is not empty; choose another --out")
        (path / "logs").mkdir(parents=True, exist_ok=True)
        (path / "runs").mkdir(exist_ok=True)
        (path / "recipe.yaml").write_text(yaml.safe_dump(recipe, sort_keys=False))
        bundle = cls(path)
        bundle.results = {
            "schema": BUNDLE_SCHEMA,
            "kit_version": __version__,
            "created_at": now_iso(),
            "finished_at": None,
            "status": "running",
            "preflight": [],
            "reproduces": None,
            **header,
            "runs": [],
        }
        bundle.save()
        return bundle

    @classmethod
    def load(cls, path: Path) -> Bundle:
        path = Path(path)
        results = path / "results.json"
        if not path.is_dir() or not results.is_file():
            raise InputError(f"{path}: not a kit bundle (no results.json)")
        try:
            data = json.loads(results.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise InputError(f"{results}: not valid JSON ({exc})") from None
        if data.get("schema") != BUNDLE_SCHEMA:
            raise InputError(
                f"{results}: bundle schema {data.get('schema')!r}; this kit reads {BUNDLE_SCHEMA}"
            )
        return cls(path, data)

    def read_json(self, name: str) -> Any:
        file = self.path / name
        return json.loads(file.read_text()) if file.is_file() else None

    def write_json(self, name: str, data: Any) -> None:
        write_json(self.path / name, data)

    @property
    def recipe(self) -> dict[str, Any]:
        return yaml.safe_load((self.path / "recipe.yaml").read_text())

    def run_dir(self, run_id: str) -> Path:
        path = self.path / "runs" / run_id
        path.mkdir(parents=True, exist_ok=True)
        return path

    def log_path(self, run_id: str) -> Path:
        return self.path / "logs" / f"{run_id}.log"

    def add_run(self, result: dict[str, Any]) -> None:
        self.results["runs"].append(result)
        self.save()

    def save(self) -> None:
        write_json(self.path / "results.json", self.results)

    def finish(self, status: str) -> None:
        self.results["status"] = status
        self.results["finished_at"] = now_iso()
        self.save()


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _bundle_files(root: Path) -> list[Path]:
    return sorted(
        p
        for p in root.rglob("*")
        if p.is_file() and p.name != MANIFEST and not p.name.endswith(".tmp")
    )


def write_manifest(root: Path) -> Path:
    """Hash every file of the bundle (but the manifest) in sha256sum's format."""
    lines = [f"{sha256_file(p)}  {p.relative_to(root).as_posix()}" for p in _bundle_files(root)]
    out = root / MANIFEST
    out.write_text("\n".join(lines) + "\n")
    return out


@dataclass
class Verification:
    ok: bool
    checked: int
    changed: list[str]
    missing: list[str]
    extra: list[str]


def verify_manifest(root: Path) -> Verification:
    """Compare the bundle's files with its manifest: changed, missing and unlisted files."""
    manifest = root / MANIFEST
    if not manifest.is_file():
        raise InputError(f"{root}: no {MANIFEST}; this bundle was never sealed")
    recorded: dict[str, str] = {}
    for n, line in enumerate(manifest.read_text().splitlines(), 1):
        if not line.strip():
            continue
        digest, sep, name = line.partition("  ")
        if not sep or len(digest) != 64:
            raise InputError(f"{manifest}:{n}: not a sha256sum line: {line[:80]!r}")
        recorded[name] = digest
    present = {p.relative_to(root).as_posix(): p for p in _bundle_files(root)}
    changed = sorted(
        n for n, d in recorded.items() if n in present and sha256_file(present[n]) != d
    )
    missing = sorted(n for n in recorded if n not in present)
    extra = sorted(n for n in present if n not in recorded)
    return Verification(not (changed or missing or extra), len(recorded), changed, missing, extra)
