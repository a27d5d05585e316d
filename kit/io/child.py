"""A probe run in a child process that answers with one JSON line: what CUDA sees, what versions
a Python holds. A child, so the driver loads nothing it would then carry (a CUDA context on the
GPUs it is about to benchmark, a torch import), and a limit, so a probe that hangs does not hang
the driver."""

from __future__ import annotations

import json
import subprocess
from typing import Any


class ChildFailed(Exception):
    """Why a child gave no answer, as a phrase ("did not finish: ...", "failed: <its last line on
    stderr>", "printed no JSON"); the caller says whose probe it was."""


def child_json(argv: list[str], timeout_s: float, env: dict[str, str]) -> Any:
    """The JSON on the last line a child printed, after it exited 0 within `timeout_s`."""
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, env=env)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ChildFailed(f"did not finish: {exc}") from None
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise ChildFailed(f"failed: {last}")
    try:
        return json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise ChildFailed("printed no JSON") from None
