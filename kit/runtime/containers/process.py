"""Containers that are a command line: none (this machine's Python) and Apptainer (`exec --nv`).

Both start a process group the driver owns: it dies with the driver (a parent-death signal) and
is stopped whole (TERM, then KILL after a grace period) on a timeout, Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

from kit.runtime.base import LaunchRequest
from kit.runtime.containers.base import Face, LaunchError
from kit.runtime.launch import MOUNT, with_kit
from kit.shared import scratch as launch_dir
from kit.shared import stop
from kit.shared.engines import Engine
from kit.shared.files import SPEC

GRACE_S = 10
PR_SET_PDEATHSIG = 1


def kill_group(proc: subprocess.Popen) -> None:
    """Stop torchrun and every rank it started: TERM first, KILL after a grace period; return
    once no process of the group runs (torchrun can exit before its ranks, and a rank still
    writing into the run folder after the bundle was sealed broke its manifest).

    A second Ctrl-C during the grace period skips to KILL (and still propagates).
    """
    try:
        for sig, wait in ((signal.SIGTERM, GRACE_S), (signal.SIGKILL, 5)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                return
            if _ended(proc, wait):
                return
    except BaseException:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        raise


def _ended(proc: subprocess.Popen, timeout_s: float) -> bool:
    """Whether the group's leader and every other member ended within timeout_s."""
    deadline = time.monotonic() + timeout_s
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return False
    while group_runs(proc.pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)
    return True


def group_runs(pgid: int) -> bool:
    """Whether a process of group `pgid` still runs. Linux reads /proc (a zombie, which writes
    nothing, does not count: a member whose parent died waits there to be reaped); elsewhere
    whether the group can still be signalled."""
    if not os.path.isdir("/proc/self"):
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(os.path.join(entry.path, "stat")) as f:
                fields = f.read().rpartition(")")[2].split()  # state, ppid, pgrp, ...
        except OSError:  # ended while read
            continue
        if len(fields) > 2 and fields[2] == str(pgid) and fields[0] not in ("Z", "X"):
            return True
    return False


def parent_death_signal(sig: int = signal.SIGTERM) -> Callable[[], None] | None:
    """A preexec_fn that makes the kernel send `sig` to the child when this driver dies.

    Linux only (prctl PR_SET_PDEATHSIG); None elsewhere. SIGTERM, not SIGKILL: torchrun's agent
    then stops its ranks itself; the ranks' watchdog (kit.worker.watchdog) is the backstop. The
    race: a driver killed between fork and prctl would never signal, so the child checks that
    its parent is still the driver after arming it, and ends itself otherwise.
    """
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up here: not in the forked child
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def arm() -> None:
        prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
        if os.getppid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)

    return arm


class Process:
    """A launched process group."""

    def __init__(self, proc: subprocess.Popen, scratch: str | None = None) -> None:
        self.proc = proc
        self.scratch = scratch  # the launch's own TMPDIR, removed with it

    def wait(self, timeout_s: float) -> tuple[int | None, bool]:
        """In short waits, so that a stop signal whose exception was swallowed is seen."""
        deadline = time.monotonic() + timeout_s
        while True:
            stop.check()
            try:
                return self.proc.wait(
                    timeout=max(0.0, min(0.5, deadline - time.monotonic()))
                ), False
            except subprocess.TimeoutExpired:
                if time.monotonic() >= deadline:
                    return None, True

    def stop(self) -> int | None:
        kill_group(self.proc)
        return self.proc.returncode

    def remove(self) -> None:
        """A process group leaves nothing once stopped: its TMPDIR (torchrun's
        torchelastic_* folders, the ranks' files) goes with it. A driver killed outright
        leaves it: the next `kit reproduce` removes it (kit.shared.scratch.sweep)."""
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)

    def reason(self) -> str | None:
        return None


class NoContainer:
    """This machine's Python, as it is (not pinned): the host runtime's container."""

    name = "host"
    engine = Engine.NONE
    pinned = False
    isolated = False

    def __init__(self, python: str | None = None) -> None:
        self.python = python or sys.executable

    def run_dir(self, run_dir: Path) -> str:
        return str(run_dir)

    def shown(self, argv: list[str]) -> list[str]:
        return argv

    def process_env(self, env: dict[str, str], gpu_ids: list[int] | None) -> dict[str, str]:
        full = {**os.environ, **env}
        if self.isolated:  # the host's environment passes into Apptainer: not its Python path
            full.pop("PYTHONPATH", None)  # (the image's own kit runs, not this checkout)
        else:
            # the worker package must be importable from the launch, wherever kit is installed
            # (an image carries its own copy)
            full["PYTHONPATH"] = with_kit(os.environ)["PYTHONPATH"]
        if gpu_ids is not None:
            full["CUDA_VISIBLE_DEVICES"] = ",".join(map(str, gpu_ids))
        return full

    def command(
        self, argv: list[str], run_dir: Path, device: str, scratch: str | None = None
    ) -> list[str]:
        return argv

    def face(self, run_dir: str | None, device: str) -> Face:
        """The task runs in the run directory, the spec read where it lies."""
        if run_dir is None:
            return Face()
        return Face(flags=[f'--chdir="{run_dir}"'], spec=f'"{run_dir}/{SPEC}"')

    def start(self, argv: list[str], req: LaunchRequest, log: IO[bytes]) -> Process:
        env = self.process_env(req.env, req.gpu_ids)
        # torchrun leaves torchelastic_* folders in TMPDIR, and an Apptainer container shares
        # the host's /tmp: each launch gets a TMPDIR of its own, removed with it
        try:  # named for this driver: a later run removes it if the driver is killed
            scratch = launch_dir.make()
        except OSError as exc:  # a full or unwritable TMPDIR: the run fails, with the reason
            raise LaunchError(f"could not make a TMPDIR for the launch: {exc.strerror}") from exc
        proc = None
        try:
            env["TMPDIR"] = scratch
            # a stop signal while Popen runs waits for it to return: raised inside it, after the
            # fork, it left torchrun running with no one to stop it (its ranks started while the
            # driver sealed, 2026-12-02); raised here, the launch is stopped below
            with stop.held():
                proc = subprocess.Popen(
                    self.command(argv, req.run_dir, req.device, scratch),
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=env,
                    cwd=req.run_dir,
                    # its own group (the driver stops it whole); dies with the driver
                    start_new_session=True,
                    preexec_fn=parent_death_signal(),
                )
        except BaseException as exc:  # a stop signal while it starts included: no Process to
            if proc is not None:  # stop and remove later, so it stops and its TMPDIR goes now
                kill_group(proc)
            shutil.rmtree(scratch, ignore_errors=True)
            if isinstance(exc, (OSError, subprocess.SubprocessError)):
                raise LaunchError(f"could not start torchrun: {exc}") from exc
            raise
        return Process(proc, scratch)

    def close(self) -> None:
        """Nothing outlives a run: each launch's process group is stopped when it ends, and a
        killed driver takes torchrun with it (parent-death signal) and its ranks (heartbeat)."""


class Apptainer(NoContainer):
    """An Apptainer image (SIF): `apptainer exec [--nv] [--bind TMP] --bind RUN:/kit/run --pwd
    /kit/run SIF` (TMP: a local launch's own TMPDIR; a Slurm task's has none).

    GPUs come through `--nv` (the host's driver libraries bound in), restricted by
    CUDA_VISIBLE_DEVICES; the host's environment passes through, as Apptainer does by default.
    """

    name = "apptainer"
    engine = Engine.APPTAINER
    pinned = True
    isolated = True

    def __init__(self, image: str, executable: str = "apptainer") -> None:
        self.image = image
        self.executable = executable
        self.python = None  # the image's torchrun

    def run_dir(self, run_dir: Path) -> str:
        return MOUNT

    def prefix(
        self, run_dir: str | None, device: str, shell: bool = False, scratch: str | None = None
    ) -> list[str]:
        """The command line in front of torchrun (also what a Slurm task runs). `shell`: words
        for a shell script (the run directory may hold $VARIABLES, so it is double-quoted; the
        image is quoted). No run directory: nothing bound (an inventory step). `scratch`: a
        local launch's TMPDIR, bound where it lies."""
        nv = ["--nv"] if device == "cuda" else []
        bind = [] if scratch is None else ["--bind", scratch]
        if run_dir is not None:
            mount = f"{run_dir}:{MOUNT}"
            bind += ["--bind", f'"{mount}"' if shell else mount, "--pwd", MOUNT]
        image = shlex.quote(self.image) if shell else self.image
        return [self.executable, "exec", *nv, *bind, image]

    def shown(self, argv: list[str]) -> list[str]:
        return [self.executable, "exec", self.image, *argv]

    def face(self, run_dir: str | None, device: str) -> Face:
        return Face(prefix=self.prefix(run_dir, device, shell=True), spec=f"{MOUNT}/{SPEC}")

    def command(
        self, argv: list[str], run_dir: Path, device: str, scratch: str | None = None
    ) -> list[str]:
        """The run directory bound at MOUNT, and the launch's TMPDIR (passed through, as the
        host's environment is) bound where it lies: not every TMPDIR is under the /tmp that
        Apptainer binds by default."""
        where = str(run_dir.resolve())
        for path, what, instead in (
            (where, "the run directory", "choose another --out"),
            (scratch or "", "the launch's TMPDIR", "set TMPDIR to another folder"),
        ):
            if any(c in path for c in ":,"):  # --bind SRC:DST[,SRC:DST]: its separators
                raise LaunchError(
                    f"apptainer --bind cannot take {what} {path!r} (a ':' or ','): {instead}"
                )
        return [*self.prefix(where, device, scratch=scratch), *argv]
