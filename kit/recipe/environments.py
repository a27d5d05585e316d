"""The kit's environments by name: the folders docker/<name>/ that hold a Dockerfile.

A recipe names one; the image toolchain (kit.runtime.images.environments) loads it. The names
live here, below both, so that reading a recipe never reaches the runtime.
"""

from __future__ import annotations

from pathlib import Path

from kit.io.errors import InputError

REPO_ROOT = Path(__file__).resolve().parents[2]
ENV_ROOT = REPO_ROOT / "docker"


def available() -> list[str]:
    """Names of the environments under docker/."""
    return sorted(p.parent.name for p in ENV_ROOT.glob("*/Dockerfile"))


def check_environment(name: str, source: str) -> None:
    """A recipe file names one of the kit's environments. Checked for recipe files only: a
    bundle's recipe keeps the name it ran with, whatever this kit holds; and only where the kit
    has its docker/ folder (a copy of the package alone cannot tell, and builds nothing)."""
    names = available()
    if names and name not in names:
        raise InputError(
            f"{source}: environment: {name!r} is not one of the kit's environments "
            f"(docker/<name>/): {', '.join(names) or 'none'}"
        )
