"""enroot/pyxis: a Slurm task's container, named by srun flags (a SPANK plug-in of srun).

Only a Slurm placement can use it: pyxis has no command of its own. The named container is
imported once per job and reused by the later steps.
"""

from __future__ import annotations

from dataclasses import dataclass

from kit.runtime.containers.base import Face
from kit.runtime.launch import MOUNT
from kit.shared.engines import Engine
from kit.shared.files import SPEC


@dataclass(frozen=True)
class Pyxis:
    engine = Engine.PYXIS
    pinned = True

    image: str  # a squashfs file or an image reference enroot imports
    name: str  # the container's name within the job

    def flags(self) -> list[str]:
        """The srun flags that run a task in the image (no run directory: inventory steps)."""
        return [f"--container-image={self.image}", f"--container-name={self.name}"]

    def run_flags(self, run_dir: str) -> list[str]:
        """The srun flags of one run: the image, the run directory at /kit/run, its workdir."""
        return [
            *self.flags(),
            f'--container-mounts="{run_dir}:{MOUNT}"',
            f"--container-workdir={MOUNT}",
        ]

    def face(self, run_dir: str | None, device: str) -> Face:
        """srun's own flags: pyxis has no command of its own."""
        flags = self.flags() if run_dir is None else self.run_flags(run_dir)
        return Face(flags=flags, spec=f"{MOUNT}/{SPEC}")
