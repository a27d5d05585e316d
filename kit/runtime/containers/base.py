"""The container protocol: start one launch inside it, watch it, stop it, remove what it left."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Protocol

from kit.runtime.base import LaunchRequest


class LaunchError(Exception):
    """A launch that could not start, or whose container or daemon failed under it: one line,
    which becomes the run's error (the run fails; the driver goes on)."""


@dataclass(frozen=True)
class Face:
    """A container as words of a shell script (its command-line face): what a scheduler
    composes into a task's line, `srun FLAGS PREFIX torchrun ... SPEC` (kit.run.slurm)."""

    flags: list[str] = field(default_factory=list)  # the scheduler's own (pyxis: --container-*)
    prefix: list[str] = field(default_factory=list)  # before the command (apptainer exec SIF)
    spec: str = ""  # the run spec's path as the task sees it


class Started(Protocol):
    """A launch in progress."""

    def wait(self, timeout_s: float) -> tuple[int | None, bool]:
        """Wait for the end: (exit code, timed out). Raises LaunchError on a container fault."""
        ...

    def stop(self) -> int | None:
        """Stop it (TERM, then KILL after a grace period); its exit code if known."""
        ...

    def remove(self) -> None:
        """Remove whatever the launch left (a container); called in every case."""
        ...

    def reason(self) -> str | None:
        """After it ended: why, when the container knows more than the exit code (killed for
        memory, say); None otherwise."""
        ...


class Container(Protocol):
    """What a run executes in, on this machine."""

    name: str  # environment.json's "runtime": "host" (no container) | "docker" | "apptainer"
    engine: str  # environment.json's "engine": "none" | "docker" | "podman" | "apptainer"
    pinned: bool  # True when the software is a pinned image
    python: str | None  # the interpreter that runs torchrun as a module, or None: `torchrun`
    isolated: bool  # its own filesystem (HOME set, the run directory mounted at MOUNT)

    def run_dir(self, run_dir: Path) -> str:
        """The run directory as the launched processes see it."""
        ...

    def shown(self, argv: list[str]) -> list[str]:
        """The command as the log and the run result show it."""
        ...

    def start(self, argv: list[str], req: LaunchRequest, log: IO[bytes]) -> Started:
        """Start `argv` in it as `req` says (req.env: the whole launch environment); its output
        goes to `log`. Raises LaunchError when it cannot."""
        ...

    def face(self, run_dir: str | None, device: str) -> Face:
        """The words a scheduler's script runs one task in it with (`run_dir` may hold shell
        $VARIABLES: it is double-quoted; None: nothing bound, an inventory step)."""
        ...

    def close(self) -> None:
        """Remove anything of this driver's still there (called once, after the runs)."""
        ...


def first_line(e: BaseException) -> str:
    text = str(getattr(e, "explanation", None) or e).strip().splitlines()
    return text[0][:200] if text else type(e).__name__
