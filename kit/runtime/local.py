"""This machine: the placement of a run on the machine the driver runs on, in any container.

One fresh launch per run, waited for: the torchrun command and its variables come from
kit.runtime.launch, the container (none, Docker, Apptainer) from kit.runtime.containers. While a
launch goes, the driver touches a heartbeat file in the run directory that the ranks watch (a
SIGKILLed driver's ranks end by themselves). A timeout, Ctrl-C or SIGTERM stops the launch; a
container that fails under the run makes that run a failed run, with the reason.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from kit.model.hardware import NodeInventory
from kit.runtime import launch
from kit.runtime.base import LaunchRequest, RunOutcome
from kit.runtime.containers.base import Container, LaunchError
from kit.runtime.hashmemo import HashMemo, scope_of
from kit.runtime.heartbeat import Heartbeat
from kit.shared import files


class LocalRuntime:
    """Runs each planned launch on this machine, in `container`."""

    placement = "local"

    def __init__(self, container: Container, environment: dict[str, Any] | None = None) -> None:
        self.container = container
        self.name = container.name
        self.engine = container.engine
        self.pinned = container.pinned
        self.environment = environment  # environment.json (set by prepare)
        self.inventory: list[NodeInventory] | None = None  # one machine: no `nodes`
        self.software: dict[str, Any] | None = None  # software.json: the image's inventory

    def close(self) -> None:
        self.container.close()

    def known_environment(self) -> dict[str, Any] | None:
        """environment.json as far as it is known before the first run (a pinned image was
        probed when prepared); None when only the runs can tell."""
        return self.environment if self.pinned else None

    def command(self, run_dir: Path, nproc: int) -> list[str]:
        spec = f"{self.container.run_dir(run_dir)}/{files.SPEC}"
        return launch.torchrun(nproc, spec, python=self.container.python)

    def launch_env(self, run_dir: Path, env: dict[str, str], device: str) -> dict[str, str]:
        beat = Heartbeat(run_dir).path
        seen = (
            f"{self.container.run_dir(run_dir)}/{beat.name}"
            if self.container.isolated
            else str(beat.resolve())
        )
        return launch.environment(env, device, heartbeat=seen, container=self.container.isolated)

    def run(self, req: LaunchRequest) -> RunOutcome:
        argv = self.command(req.run_dir, req.nproc)
        shown = self.container.shown(argv)
        # the container gets the whole launch environment, not only the variant's variables
        inside = replace(req, env=self.launch_env(req.run_dir, req.env, req.device))
        t0 = time.perf_counter()
        memo = HashMemo(req.run_dir, scope_of(self.environment))
        with open(req.log_path, "ab") as log, memo, Heartbeat(req.run_dir) as heartbeat:
            log.write(f"$ {' '.join(shown)}\n".encode())
            log.flush()
            started = None
            try:
                try:
                    started = self.container.start(argv, inside, log)
                except LaunchError as e:
                    return RunOutcome(None, False, False, time.perf_counter() - t0, shown, str(e))
                heartbeat.beat()  # after the fork: no thread of ours runs while preexec_fn does
                try:
                    code, timed_out = started.wait(req.timeout_s)
                    if timed_out:
                        code = started.stop()
                except LaunchError as e:
                    return RunOutcome(None, False, False, time.perf_counter() - t0, shown, str(e))
                except BaseException:  # Ctrl-C / SIGTERM: stop the launch, then let it propagate
                    with contextlib.suppress(LaunchError):
                        started.stop()
                    raise
                return RunOutcome(
                    code,
                    timed_out,
                    False,
                    time.perf_counter() - t0,
                    shown,
                    None if code == 0 else started.reason(),
                )
            finally:
                if started is not None:
                    started.remove()
