"""What a run runs in: every engine by one name (environment.json's `engine`), and the one
answer to "does this engine run an image the kit builds". Standard library only: the model,
the runtimes and the reaper's light process read it."""

from __future__ import annotations

from enum import StrEnum


class Engine(StrEnum):
    """No container (this machine's Python), or a container engine ("kubernetes": the pods of
    `kit k8s`, in whatever container runtime the cluster's nodes run). A member is its name as
    environment.json writes it: it compares, formats and serializes as that string."""

    NONE = "none"
    DOCKER = "docker"
    PODMAN = "podman"
    APPTAINER = "apptainer"
    PYXIS = "pyxis"
    ENROOT = "enroot"
    KUBERNETES = "kubernetes"

    @staticmethod
    def builds_image(engine: str) -> bool:
        """Whether `engine` runs an image the kit builds FROM a base (or loads from a `kit
        export` archive): --env, --base-image and --image-archive apply to it. The one place
        this is answered (the runtimes' registry asks it of each runtime's engine)."""
        return engine in IMAGE_ENGINES


IMAGE_ENGINES: tuple[Engine, ...] = (Engine.DOCKER, Engine.PODMAN)
"""The engines whose image the kit builds: each is also a runtime of this machine under its own
name (`--runtime docker`, `kit build --runtime podman`); the CLI's help lists them from here."""
