"""The host runtime: this machine, no container: torchrun in the current Python environment.

Used where Docker is absent (a GPU machine without it, a laptop) and for CPU smoke runs. The
environment is not pinned: the report says so, and the versions come from the runs themselves.
"""

from __future__ import annotations

import os
from typing import Any

import kit
from kit.io.child import ChildFailed, child_json
from kit.model.environment import axes_record
from kit.runtime.base import RuntimeRequest
from kit.runtime.containers.process import NoContainer
from kit.runtime.launch import with_kit
from kit.runtime.local import LocalRuntime
from kit.shared.engines import Engine
from kit.worker.probe import driver_version

PROBE_TIMEOUT_S = 120


class HostRuntime(LocalRuntime):
    name = "host"
    engine = Engine.NONE
    pinned = False

    def __init__(self, python: str | None = None, environment_name: str | None = None) -> None:
        container = NoContainer(python)
        self.python = container.python
        super().__init__(
            container,
            {
                **axes_record(self.placement, self.engine),
                "name": environment_name,
                "pinned": False,
                "runtime": self.name,
                "kit_version": kit.__version__,
                "python_executable": self.python,
                "container": None,
            },
        )

    @classmethod
    def prepare(cls, request: RuntimeRequest) -> HostRuntime:
        """Nothing to build: this Python, as it is."""
        return cls(environment_name=request.environment)

    def known_environment(self) -> dict[str, Any] | None:
        """The versions this Python's workers will report, read now by a short subprocess.

        The same function the worker uses (kit.worker.common.versions), so the keys match what
        the runs record; the driver version comes from NVML here. None when the probe fails
        (then only the runs themselves can tell).
        """
        code = (
            "import json, torch; from kit.worker.common import versions; "
            "print(json.dumps(versions()))"
        )
        env = with_kit(os.environ)
        try:
            versions = child_json([self.python, "-c", code], PROBE_TIMEOUT_S, env)
        except ChildFailed:
            return None
        versions["driver"] = driver_version()
        return {
            **axes_record(self.placement, self.engine),
            "runtime": self.name,
            "pinned": False,
            "container": versions,
        }
