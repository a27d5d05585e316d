"""The host runtime: torchrun in the current Python environment, one fresh launch per run.

Used where Docker is absent (the lent GPU machines, a laptop) and for CPU smoke runs. The
environment is not pinned: the report says so.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import kit
from kit.runtime.base import RunOutcome, RuntimeRequest

GRACE_S = 10


def _kill_group(proc: subprocess.Popen) -> None:
    """Stop torchrun and every rank it started: TERM first, KILL after a grace period."""
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
        """Nothing outlives a run: each launch's process group is stopped when it ends."""

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
        t0 = time.perf_counter()
        with open(log_path, "ab") as log:
            log.write(f"$ {' '.join(cmd)}\n".encode())
            log.flush()
            try:
                proc = subprocess.Popen(
                    cmd, stdout=log, stderr=subprocess.STDOUT, env=full_env, cwd=run_dir,
                    start_new_session=True,
                )  # fmt: skip
            except OSError as exc:
                return RunOutcome(None, False, False, 0.0, cmd, f"could not start torchrun: {exc}")
            try:
                code = proc.wait(timeout=timeout_s)
                return RunOutcome(code, False, False, time.perf_counter() - t0, cmd)
            except subprocess.TimeoutExpired:
                _kill_group(proc)
                return RunOutcome(proc.returncode, True, False, time.perf_counter() - t0, cmd)
            except BaseException:  # Ctrl-C / SIGTERM: stop the ranks, then let it propagate
                _kill_group(proc)
                raise
