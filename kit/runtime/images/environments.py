"""Pinned environments: a folder docker/<name>/ (Dockerfile, hashed requirements.lock, optional env.yaml)
and the locked wheels, downloaded on the host into a wheelhouse.

The driver downloads the locked wheels on the host (a wheelhouse, so the image builds with no
index: clusters are often offline and our containers reach no index).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from kit.bundle import sha256_file
from kit.io.errors import InputError, KitError
from kit.io.locks import held
from kit.recipe.environments import ENV_ROOT, available


def cache_dir() -> Path:
    """$KIT_CACHE, else ~/.cache/kit: the wheelhouse and the build logs. Read when used, not at
    import, so that the environment of the command that uses it decides."""
    return Path(os.environ.get("KIT_CACHE") or Path.home() / ".cache" / "kit")


class EnvFile(BaseModel):
    """env.yaml: what the Dockerfile cannot say (the wheel target of its Python)."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = None
    description: str = ""
    python: str = "3.11"  # major.minor of the image's python3: selects cpXY wheels
    glibc: str = "2.28"  # the image's glibc: the newest manylinux tag its wheels may use
    arch: str = "x86_64"
    device: str = "cuda"  # "cuda" | "cpu": what this environment can run
    # where the Python packages come from: "lock" (requirements.lock, installed from a wheelhouse
    # the driver downloads) or "image" (the base image's own, as its maker pinned them: only the
    # worker package is added; the fingerprint reads the versions inside)
    packages: str = "lock"


@dataclass
class Environment:
    """A loaded docker/<name>/ folder."""

    name: str
    path: Path
    description: str
    python: str
    glibc: str
    arch: str
    device: str
    packages: str = "lock"

    @property
    def dockerfile(self) -> Path:
        return self.path / "Dockerfile"

    @property
    def lock(self) -> Path:
        return self.path / "requirements.lock"

    @property
    def locked(self) -> bool:
        """True when the packages come from requirements.lock (False: from the base image)."""
        return self.packages == "lock"

    def default_base_image(self) -> str:
        """The BASE_IMAGE default declared in the Dockerfile (`ARG BASE_IMAGE=...`)."""
        m = re.search(r"^ARG\s+BASE_IMAGE=(\S+)", self.dockerfile.read_text(), re.MULTILINE)
        if not m:
            raise InputError(f"{self.dockerfile}: no `ARG BASE_IMAGE=<image>@sha256:...` line")
        return m.group(1)


def load(name_or_path: str | Path) -> Environment:
    """Load an environment by name (a folder under docker/) or by path to such a folder."""
    path = Path(name_or_path)
    own = ENV_ROOT / str(name_or_path)
    if isinstance(name_or_path, str) and "/" not in name_or_path and (own / "Dockerfile").is_file():
        path = own  # a name is the kit's own environment, never a folder of that name here
    elif not (path.is_dir() and (path / "Dockerfile").is_file()):
        path = own
    if not (path / "Dockerfile").is_file():
        raise InputError(
            f"environment {str(name_or_path)!r}: no {path / 'Dockerfile'}; "
            f"available: {', '.join(available()) or 'none'}"
        )
    data: dict[str, Any] = {}
    env_yaml = path / "env.yaml"
    if env_yaml.is_file():
        try:
            data = yaml.safe_load(env_yaml.read_text()) or {}
            spec = EnvFile.model_validate(data)
        except yaml.YAMLError as e:
            raise InputError(f"{env_yaml}: not valid YAML: {e}".replace("\n", " ")) from e
        except ValidationError as e:
            err = e.errors()[0]
            field_name = ".".join(str(x) for x in err["loc"])
            raise InputError(f"{env_yaml}: field {field_name!r}: {err['msg']}") from e
    else:
        spec = EnvFile()
    if spec.packages not in ("lock", "image"):
        raise InputError(f"{env_yaml}: field 'packages': {spec.packages!r}; allowed: lock, image")
    if spec.packages == "lock" and not (path / "requirements.lock").is_file():
        raise InputError(f"environment {path.name!r}: no {path / 'requirements.lock'}")
    if spec.device not in ("cuda", "cpu"):
        raise InputError(f"{env_yaml}: field 'device': {spec.device!r}; allowed: cuda, cpu")
    if not re.fullmatch(r"3\.\d+", spec.python):
        raise InputError(f"{env_yaml}: field 'python': {spec.python!r}; expected like '3.12'")
    if not re.fullmatch(r"2\.\d+", spec.glibc):
        raise InputError(f"{env_yaml}: field 'glibc': {spec.glibc!r}; expected like '2.36'")
    return Environment(
        name=spec.name or path.name,
        path=path,
        description=spec.description,
        python=spec.python,
        glibc=spec.glibc,
        arch=spec.arch,
        device=spec.device,
        packages=spec.packages,
    )


# --- the wheel target -------------------------------------------------------------------------


def pip_target_args(env: Environment) -> list[str]:
    """pip options that select wheels for the image's interpreter and glibc, not the host's."""
    minor = int(env.glibc.split(".")[1])
    plats = [f"manylinux_2_{i}_{env.arch}" for i in range(minor, 4, -1)]
    plats += [f"manylinux2014_{env.arch}", f"manylinux2010_{env.arch}", f"manylinux1_{env.arch}"]
    args = ["--only-binary=:all:", "--implementation", "cp", "--python-version", env.python]
    args += ["--abi", "cp" + env.python.replace(".", "")]
    for p in plats:
        args += ["--platform", p]
    return args


def compile_lock(env: Environment, requirements_in: Path | None = None) -> str:
    """Resolve requirements.in for the image's target and return a lock with sha256 hashes.

    Uses pip's resolver (`pip install --dry-run --report`), which reads the hashes from the
    index without downloading the wheels. Environment markers are evaluated by the running
    interpreter: run this with the image's Python version (e.g. python3.12 for cuda13).
    """
    req = requirements_in or env.path / "requirements.in"
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--dry-run",
            "--ignore-installed",
            "--quiet",
            "--report",
            str(report),
            "--target",
            str(Path(tmp) / "t"),
            *pip_target_args(env),
            "-r",
            str(req),
        ]
        _run_pip(cmd, "resolve the lock")
        items = json.loads(report.read_text())["install"]
    lines = [
        f"# kit environment {env.name}: Python {env.python}, glibc {env.glibc}, {env.arch}.",
        f"# Generated from {req.name} by scripts/lock_env.py; do not edit by hand.",
    ]
    for it in sorted(items, key=lambda i: i["metadata"]["name"].lower()):
        name, version = it["metadata"]["name"], it["metadata"]["version"]
        hashes = it["download_info"].get("archive_info", {}).get("hashes", {})
        if "sha256" not in hashes:
            raise KitError(f"{name}=={version}: the index gave no sha256 for its wheel")
        lines.append(f"{name}=={version} \\\n    --hash=sha256:{hashes['sha256']}")
    return "\n".join(lines) + "\n"


def lock_hashes(lock: Path) -> set[str]:
    """The sha256 values the lock allows."""
    return set(re.findall(r"--hash=sha256:([0-9a-f]{64})", lock.read_text()))


# --- wheelhouse -------------------------------------------------------------------------------


def _run_pip(cmd: list[str], what: str) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = [ln for ln in proc.stderr.splitlines() if ln.strip() and "Location" not in ln]
        last = tail[-1] if tail else "(no output)"
        raise KitError(
            f"pip could not {what} (exit {proc.returncode}): {last} [command: {' '.join(cmd)}]"
        )


def wheelhouse(env: Environment, cache: Path | None = None) -> dict[str, Path]:
    """Download the locked wheels on the host into a shared cache; return {sha256: path}.

    pip checks every file against the lock (--require-hashes) and skips files already in the
    cache. Only the files the lock names are returned (the cache holds every environment's).
    """
    cache = cache or cache_dir() / "wheels" / f"cp{env.python.replace('.', '')}-{env.arch}"
    cache.mkdir(parents=True, exist_ok=True)
    wanted = lock_hashes(env.lock)
    # another kit on this host (a second user, parallel tests) may fill the same cache meanwhile,
    # and would hash a wheel pip is still writing
    with held(cache / ".lock"):
        found = _index_wheels(cache, wanted)
        if set(found) != wanted:
            cmd = [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--require-hashes",
                "--disable-pip-version-check",
                "-d",
                str(cache),
                *pip_target_args(env),
                "-r",
                str(env.lock),
            ]
            _run_pip(cmd, f"download the wheels of {env.lock}")
            found = _index_wheels(cache, wanted)
    missing = wanted - set(found)
    if missing:
        raise KitError(
            f"wheelhouse {cache}: {len(missing)} locked wheel(s) missing after download "
            f"(e.g. sha256 {sorted(missing)[0]}); the lock may name a wheel for another platform"
        )
    return found


def _index_wheels(cache: Path, wanted: set[str]) -> dict[str, Path]:
    """Hash the cached wheels (memoized in <wheel>.sha256 next to each) and keep the wanted."""
    found: dict[str, Path] = {}
    for whl in cache.glob("*.whl"):
        memo = whl.with_name(whl.name + ".sha256")
        if memo.is_file() and memo.stat().st_mtime >= whl.stat().st_mtime:
            digest = memo.read_text().strip()
        else:
            digest = sha256_file(whl)
            memo.write_text(digest)
        if digest in wanted:
            found[digest] = whl
    return found


def for_device(recipe_env: str, device: str, override: str | None) -> tuple[str, str | None]:
    """The environment a Docker run uses, and a line saying why when it is not the recipe's.

    --env wins; a CPU run of a recipe whose environment is for GPUs uses the pinned cpu one (a
    CPU smoke run needs neither the CUDA base image nor its wheels); otherwise the recipe's.
    """
    if override:
        return override, None
    if device == "cpu" and load(recipe_env).device == "cuda":
        return "cpu", (
            f"CPU run in a container: environment cpu (the recipe's {recipe_env} is for GPUs; "
            f"--env {recipe_env} uses it anyway)"
        )
    return recipe_env, None
