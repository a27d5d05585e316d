"""environment.json: the software the runs ran in (kit.runtime.docker.fingerprint, or the host's).

`container` holds the versions read inside the environment (kit.worker.common.versions, plus
the driver and packages when the image was probed).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from kit.model.base import Open


class ContainerVersions(Open):
    python: str | None = None
    torch: str | None = None
    cuda: str | None = None
    cudnn: str | int | None = None  # early bundles recorded cuDNN's integer version
    nccl: str | None = None
    driver: str | None = None
    gpu: str | None = None
    packages: dict[str, str] | None = None
    # the workload libraries, where the environment holds them (kit.envdiff compares them)
    transformers: str | None = None
    peft: str | None = None
    accelerate: str | None = None
    torchvision: str | None = None


class Environment(Open):
    """environment.json. Open: each runtime adds its own fields (image, launcher, nodes)."""

    name: str | None = None
    pinned: bool
    runtime: str
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
    # how the containers got their GPUs (kit.runtime.containers.gpus) and their network
    gpu_request: str | None = None
    cdi_kind: str | None = None
    network: str | None = None
