"""The apptainer runtime: this machine, each run in `apptainer exec` of a SIF the user names.

The container is kit.runtime.containers.process.Apptainer, whose command line is the same one a
Slurm task runs (its `face`); the placement is kit.runtime.local. Nothing is built: the SIF is
the environment (`apptainer build kit.sif docker-archive://FILE.tar` of a `kit export`, so it
holds the kit's worker). environment.json records it by its sha256 (`image_id`, and
`content_hash`: a rerun in another SIF differs where it matters) and path (`image`), with the
versions read inside it by one probe (`python -m kit.worker.probe`).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from pathlib import Path
from typing import Any

import kit
from kit.bundle import sha256_file
from kit.io.errors import InputError, KitError
from kit.io.terminal import console
from kit.model.environment import axes_record
from kit.runtime.base import RuntimeRequest
from kit.runtime.containers.process import Apptainer
from kit.runtime.images import software
from kit.runtime.local import LocalRuntime
from kit.shared.engines import Engine

OPTION = "--apptainer"  # the option that names the SIF (kit reproduce, kit slurm)
PROBE_TIMEOUT_S = 120


def missing() -> str | None:
    """Why `apptainer` cannot run here (not on PATH), or None."""
    return None if shutil.which("apptainer") else "`apptainer` is not on PATH"


def probe(
    image: Path,
    device: str,
    command: tuple[str, ...] = ("-m", "kit.worker.probe"),
    timeout_s: float = PROBE_TIMEOUT_S,
) -> dict[str, Any]:
    """The versions inside the SIF, read by `apptainer exec [--nv] SIF python -m kit.worker.probe`
    with the environment a launch gets (the image's own kit answers, not the host's); or what
    another `python COMMAND` prints last as JSON (the image's inventory)."""
    box = Apptainer(str(image))
    argv = [*box.prefix(None, device), "python", *command]
    try:
        proc = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env=box.process_env({}, None),
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise KitError(f"probing {image}: {type(e).__name__}: {e}") from e
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    if proc.returncode != 0 or not lines:
        last = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise KitError(
            f"probing {image} failed (exit {proc.returncode}): {last[:200]} (a SIF of "
            "the kit's image: apptainer build kit.sif docker-archive://FILE.tar of a "
            "kit export)"
        )
    try:
        return json.loads(lines[-1])
    except json.JSONDecodeError as e:
        raise KitError(f"probing {image}: output is not JSON: {lines[-1][:200]}") from e


def sif_file(path: str | Path, absent_ok: bool = False) -> Path:
    """The SIF --apptainer names, resolved: a regular file (not a folder, a device, a FIFO).
    `absent_ok`: kit slurm, whose script may be submitted where the cluster's filesystem holds
    a SIF this machine does not have; what is here must still be a file."""
    try:
        image = Path(path).resolve()
        regular = stat.S_ISREG(os.stat(image).st_mode)
    except FileNotFoundError:
        regular = absent_ok
    except (OSError, ValueError):
        regular = False
    if not regular:
        raise InputError(f"{OPTION} {path}: not a file (an Apptainer .sif image)")
    return image


class ApptainerRuntime(LocalRuntime):
    """Runs each launch as `apptainer exec [--nv] --bind TMP --bind RUN:/kit/run --pwd /kit/run
    SIF torchrun` (TMP: the launch's own TMPDIR, kit.runtime.containers.process)."""

    name = "apptainer"
    engine = Engine.APPTAINER
    pinned = True

    def __init__(self, image: Path, environment: dict[str, Any] | None = None) -> None:
        super().__init__(Apptainer(str(image)), environment)

    @classmethod
    def check(cls, request: RuntimeRequest) -> Path:
        """The refusals that need no work (a SIF named, `apptainer` on PATH, the SIF a file):
        a caller runs them before it prints anything (kit.run.registry.check_ready)."""
        if request.apptainer is None:
            raise InputError(f"--runtime apptainer: name the image: {OPTION} IMAGE.sif")
        if why := missing():
            raise InputError(
                f"--runtime apptainer: {why} (install Apptainer, or use another "
                "--runtime: host, docker, podman)"
            )
        return sif_file(request.apptainer)

    @classmethod
    def prepare(cls, request: RuntimeRequest) -> ApptainerRuntime:
        """Check the SIF and `apptainer`, hash and probe the SIF: environment.json."""
        image = cls.check(request)
        digest = sha256_file(image)
        out = console(highlight=False, soft_wrap=True)
        out.print(f"kit: Apptainer image {image} (sha256:{digest})", markup=False)
        versions = probe(image, request.device)
        made = cls(
            image,
            {
                **axes_record(cls.placement, cls.engine),
                "name": None,
                "pinned": True,
                "runtime": cls.name,
                "image": str(image),
                "image_id": f"sha256:{digest}",
                # what the image holds, as a rerun compares it (kit.env.diff): another SIF matters
                "content_hash": digest,
                "kit_version": kit.__version__,
                "container": versions,
            },
        )
        # what the SIF holds (software.json), made once per SIF content: a rerun names what differs
        scan = ("-c", software.SOURCE)
        try:
            made.software, cached = software.made(
                str(image),
                f"sha256:{digest}",
                lambda: probe(image, request.device, scan, software.WAIT_S),
            )
            out.print(f"kit: {software.line(made.software, cached)}", markup=False)
        except KitError as exc:  # the runs do not need it: said, and the bundle has none
            out.print(f"kit: no image inventory: {exc}", markup=False)
        return made
