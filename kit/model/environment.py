"""environment.json: the software the runs ran in (kit.runtime.images.fingerprint, or the host's).

`container` holds the versions read inside the environment (kit.worker.common.versions, plus
the driver and packages when the image was probed). Since schema 2 the file names where the runs
went (`placement`) and what they ran in (`engine`) as two fields; an older file's are read from
its `runtime`, `launcher` and `nodes` (`Environment.axes`).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from kit.model.base import ENVIRONMENT_SCHEMA, Open
from kit.shared.engines import Engine


class ContainerVersions(Open):
    python: str | None = None
    torch: str | None = None
    cuda: str | None = None
    cudnn: str | int | None = None  # early bundles recorded cuDNN's integer version
    nccl: str | None = None
    driver: str | None = None
    gpu: str | None = None
    packages: dict[str, str] | None = None
    # the workload libraries, where the environment holds them (kit.env.diff compares them)
    transformers: str | None = None
    peft: str | None = None
    accelerate: str | None = None
    torchvision: str | None = None


LOCAL_BASE = "local base image, not by digest"


def pin_of(
    base_image: str | None,
    base_digest: str | None,
    loaded_from: str | None = None,
    image_id: str | None = None,
) -> tuple[bool, str]:
    """Whether an image the kit built or loaded is pinned, and the words that say by what: the
    image of a `kit export` archive by its image id (a hash of its content), or a base named by
    its registry digest. A base the daemon holds without one (imported from a machine's own
    stack, built locally) is not: "local base image, not by digest". The one rule: the writer
    (kit.runtime.images.fingerprint) and every reader (Environment.pin) call it."""
    if loaded_from:
        return True, f"the image of a kit export archive, by its image id {image_id or 'unknown'}"
    digest = base_digest or (base_image.partition("@")[2] if base_image else None)
    if digest:
        return True, f"base image by digest {digest}"
    return False, LOCAL_BASE


OLD_LAUNCHERS = {
    "host": Engine.NONE,
    "pyxis": Engine.PYXIS,
    "apptainer": Engine.APPTAINER,
    "enroot": Engine.ENROOT,
}
"""A schema-1 Slurm bundle's `launcher` as the engine it names."""


class Environment(Open):
    """environment.json. Open: each runtime adds its own fields (image, launcher, nodes)."""

    name: str | None = None
    pinned: bool
    runtime: str
    # schema 2: where the runs went and what they ran in (see `axes` for older files)
    placement: str | None = None
    engine: str | None = None
    kit_version: str | None = None
    container: ContainerVersions | None = None
    python_executable: str | None = None
    image_id: str | None = None
    image_tag: str | None = None
    base_image: str | None = None
    base_image_digest: str | None = None
    base_image_id: str | None = None
    base_image_content: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")
    dockerfile_sha256: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")
    lock_sha256: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")
    content_hash: str | None = None
    build_args: dict[str, str] | None = None
    launcher: str | None = None
    image: str | None = None
    nodes: list[dict[str, Any]] | None = None
    loaded_from: str | None = None
    # what pins the image (kit.model.environment.pin_of): "base image by digest sha256:...",
    # "local base image, not by digest"
    pinning: str | None = None
    # how the containers got their GPUs (kit.runtime.containers.gpus) and their network
    gpu_request: str | None = None
    cdi_kind: str | None = None
    network: str | None = None

    def axes(self) -> tuple[str, str]:
        """(placement, engine): the fields of a schema-2 file; an older file's from its
        runtime name (host, docker, multinode, slurm), its Slurm `launcher` and its `nodes`."""
        if self.placement and self.engine:
            return self.placement, self.engine
        runtime = self.runtime
        if runtime == "slurm":
            return "slurm", OLD_LAUNCHERS.get(str(self.launcher or "host"), str(self.launcher))
        if runtime == "k8s":
            return "k8s", Engine.KUBERNETES
        if runtime == "multinode" or (runtime == "docker" and self.nodes):
            return "multinode", Engine.DOCKER
        return "local", Engine.NONE if runtime == "host" else runtime

    def in_container(self) -> bool:
        return self.axes()[1] != Engine.NONE

    def pin(self) -> tuple[bool, str | None]:
        """(pinned, by what): for an image the kit built or loaded, `pin_of` its base and source
        (also for a file written before the rule, which called any such image pinned); for
        another runtime, what it recorded."""
        if Engine.builds_image(self.axes()[1]) and (self.image_id or self.base_image):
            base = (self.build_args or {}).get("BASE_IMAGE") or self.base_image
            return pin_of(base, self.base_image_digest, self.loaded_from, self.image_id)
        return self.pinned, self.pinning

    def shown_name(self, why: bool = True) -> str | None:
        """The environment as a page names it: its name, and for an image built FROM a local
        base, what it was built FROM (the name alone would claim the Dockerfile's pinned base),
        with the words why it is not pinned unless the page says them beside it (`why`)."""
        pinned, _ = self.pin()
        base = (self.build_args or {}).get("BASE_IMAGE") or self.base_image
        if Engine.builds_image(self.axes()[1]) and not pinned and base:
            return f"{self.name or 'environment'} FROM {base}" + (f" ({LOCAL_BASE})" if why else "")
        return self.name


def axes_record(placement: str, engine: str) -> dict[str, Any]:
    """The fields every writer of environment.json puts first: the schema and the two axes."""
    return {"schema": ENVIRONMENT_SCHEMA, "placement": placement, "engine": engine}
