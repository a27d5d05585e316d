"""Shared test helpers: run the real `kit` command in a subprocess, as a user would."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def run_kit(
    *args: str, cwd: Path | None = None, timeout: float = 600, **kw
) -> subprocess.CompletedProcess:
    # the checkout first on the path, whatever the working directory of the command
    env = kw.pop("env", None) or dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    return subprocess.run(
        [sys.executable, "-m", "kit", *args],
        env=env,
        cwd=cwd or ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        **kw,
    )


@pytest.fixture
def kit_cmd():
    return run_kit
