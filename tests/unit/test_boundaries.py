"""The hard line between the halves: the worker runs where the driver's packages are absent."""

import subprocess
import sys

from kit.workloads.registry import KINDS
from tests.conftest import ROOT

WORKER_MODULES = [
    "kit.worker.__main__", "kit.worker.telemetry", "kit.shared.nccl_log", "kit.worker.probe",
    "kit.worker.nodeinfo", "kit.workloads.registry", "kit.workloads.collective_sweep",
    *(f"kit.workloads.{kind}.{part}" for kind in KINDS for part in ("params", "worker", "spec")),
]  # fmt: skip
DRIVER_ONLY = [
    "pydantic",
    "docker",
    "jinja2",
    "weasyprint",
    "matplotlib",
    "scipy",
    "rich",
    "typer",
    "yaml",
]


def _import_blocking(blocked: list[str], modules: list[str]) -> subprocess.CompletedProcess:
    code = (
        "import sys\n"
        + "".join(f"sys.modules[{m!r}] = None\n" for m in blocked)
        + "".join(f"import {m}\n" for m in modules)
    )
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )


def test_worker_imports_no_driver_package():
    proc = _import_blocking(DRIVER_ONLY, WORKER_MODULES)
    assert proc.returncode == 0, proc.stderr


def test_driver_runs_without_docker_and_weasyprint():
    # the lent GPU machines have neither: reproduce must still import (reports render elsewhere)
    proc = _import_blocking(
        ["docker", "weasyprint"], ["kit.cli", "kit.run.engine", "kit.run.rerun"]
    )
    assert proc.returncode == 0, proc.stderr
