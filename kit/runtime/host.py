"""The host runtime: torchrun in the current Python environment, one fresh launch per run.

Used where Docker is absent (the lent GPU machines, a laptop) and for CPU smoke runs. The
environment is not pinned: the report says so.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import kit
from kit.runtime.base import RunOutcome, RuntimeRequest
from kit.runtime.heartbeat import Heartbeat, worker_env

GRACE_S = 10
PR_SET_PDEATHSIG = 1


def _kill_group(proc: subprocess.Popen) -> None:
    """Stop torchrun and every rank it started: TERM first, KILL after a grace period.

    A second Ctrl-C during the grace period skips to KILL (and still propagates).
    """
    try:
        for sig, wait in ((signal.SIGTERM, GRACE_S), (signal.SIGKILL, 5)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                return
            try:
                proc.wait(timeout=wait)
                return
            except subprocess.TimeoutExpired:
                continue
    except BaseException:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        raise


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


class HostRuntime:
    name = "host"
    pinned = False

    def __init__(self, python: str | None = None, environment_name: str | None = None) -> None:
        self.python = python or sys.executable
        self.inventory = None
        # not pinned: the versions come from the runs themselves (`container`, filled after)
        self.environment = {
            "name": environment_name, "pinned": False, "runtime": self.name,
            "kit_version": kit.__version__, "python_executable": self.python, "container": None,
        }  # fmt: skip

    @classmethod
    def prepare(cls, request: RuntimeRequest) -> HostRuntime:
        """Nothing to build: this Python, as it is."""
        return cls(environment_name=request.environment)

    def close(self) -> None:
        """Nothing outlives a run: each launch's process group is stopped when it ends, and a
        killed driver takes torchrun with it (parent-death signal) and its ranks (heartbeat)."""

    def command(self, run_dir: Path, nproc: int) -> list[str]:
        return [
            self.python, "-m", "torch.distributed.run", "--standalone",
            f"--nproc-per-node={nproc}", "-m", "kit.worker", str(run_dir / "spec.json"),
        ]  # fmt: skip

    def run(
        self,
        run_dir: Path,
        nproc: int,
        env: dict[str, str],
        log_path: Path,
        timeout_s: float,
        gpu_ids: list[int] | None,
        device: str,
    ) -> RunOutcome:
        cmd = self.command(run_dir, nproc)
        full_env = {**os.environ, **env, "PYTHONUNBUFFERED": "1"}
        # the worker package must be importable from the launch, wherever kit is installed
        root = str(Path(__file__).resolve().parents[2])
        full_env["PYTHONPATH"] = os.pathsep.join(
            p for p in (root, os.environ.get("PYTHONPATH")) if p
        )
        if gpu_ids is not None:
            full_env["CUDA_VISIBLE_DEVICES"] = ",".join(map(str, gpu_ids))
        if device == "cpu":
            full_env.setdefault("OMP_NUM_THREADS", "1")
        heartbeat = Heartbeat(run_dir)
        full_env.update(worker_env(str(heartbeat.path.resolve())))
        t0 = time.perf_counter()
        with open(log_path, "ab") as log, heartbeat:
            log.write(f"$ {' '.join(cmd)}\n".encode())
            log.flush()
            try:
                proc = subprocess.Popen(
                    cmd, stdout=log, stderr=subprocess.STDOUT, env=full_env, cwd=run_dir,
                    # its own group (the driver stops it whole); dies with the driver
                    start_new_session=True, preexec_fn=parent_death_signal(),
                )  # fmt: skip
            except (OSError, subprocess.SubprocessError) as exc:
                return RunOutcome(None, False, False, 0.0, cmd, f"could not start torchrun: {exc}")
            heartbeat.beat()  # after the fork: no thread of ours runs while preexec_fn does
            try:
                code = proc.wait(timeout=timeout_s)
                return RunOutcome(code, False, False, time.perf_counter() - t0, cmd)
            except subprocess.TimeoutExpired:
                _kill_group(proc)
                return RunOutcome(proc.returncode, True, False, time.perf_counter() - t0, cmd)
            except BaseException:  # Ctrl-C / SIGTERM: stop the ranks, then let it propagate
                _kill_group(proc)
                raise
