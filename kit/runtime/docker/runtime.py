"""The docker runtime: this machine, one fresh container per run, from the pinned environment image.

The placement is kit.runtime.local (heartbeat, timeout, log, interruption); the container is
kit.runtime.containers.docker (options, GPUs in the daemon's style, removal). The container is
always removed, whatever happens (success, crash, timeout, Ctrl-C, SIGTERM, SIGHUP). A driver
killed outright (SIGKILL) runs no handler: the container's command is kit.worker.guard around
torchrun, which stops the container when the heartbeat file in the mounted run directory goes
stale (the ranks' own kit.worker.watchdog does the same per rank), and the stopped container, labelled
with its dead owner, is removed by the next kit run on this host (`cleanup_abandoned`). A fault of
the daemon or the container while a run goes (`docker rm -f` from outside, the daemon gone) makes
that run a failed run.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from kit.errors import KitError
from kit.runtime.base import RuntimeRequest
from kit.runtime.containers import gpus
from kit.runtime.containers.docker import DockerContainer
from kit.runtime.docker import fingerprint as fp
from kit.runtime.docker import image as images
from kit.runtime.docker.client import cleanup_abandoned, docker_client
from kit.runtime.local import LocalRuntime


class DockerRuntime(LocalRuntime):
    """Runs `torchrun -m kit.worker /kit/run/spec.json` in a container of `image`."""

    name = "docker"
    pinned = True

    def __init__(
        self,
        image: str,
        client: Any = None,
        shm_size: str = "16g",
        echo: Callable[[str], None] | None = None,
        gpu_style: gpus.GpuStyle | None = None,
        memlock: bool = True,
    ) -> None:
        self.docker = DockerContainer(
            image, client=client, shm_size=shm_size, echo=echo, gpu_style=gpu_style,
            memlock=memlock,
        )  # fmt: skip
        super().__init__(self.docker)

    @property
    def image(self) -> str:
        return self.docker.image

    @property
    def client(self) -> Any:
        return self.docker.client

    @property
    def owner(self) -> str:
        return self.docker.owner

    @classmethod
    def prepare(cls, request: RuntimeRequest) -> DockerRuntime:
        """Build (or reuse, or load) the pinned image and probe it: environment.json."""
        return prepare_runtime(
            request.environment, request.device, base_image=request.base_image,
            image_archive=request.image_archive,
        )  # fmt: skip

    @staticmethod
    def unavailable(device: str) -> str | None:
        """Why this machine cannot run GPU containers (for --runtime auto), or None."""
        try:
            client = docker_client()
        except KitError:
            return "no Docker daemon answers"
        if device == "cuda" and gpus.style(client) is None:
            return "Docker cannot give GPUs to containers (no NVIDIA Container Toolkit or CDI spec)"
        return None

    def container_options(
        self, run_dir: Path, nproc: int, env: dict[str, str], gpu_ids: list[int] | None, device: str
    ) -> dict[str, Any]:
        """Everything `containers.create` gets for one run (separate so tests can read it)."""
        argv = self.command(run_dir, nproc)
        return self.docker.options(
            argv, self.launch_env(run_dir, env, device), run_dir, gpu_ids, device
        )


def prepare_runtime(
    environment: str,
    device: str,
    base_image: str | None = None,
    client: Any = None,
    image_archive: Path | None = None,
) -> DockerRuntime:
    """Build (or reuse) the environment's image, probe it, and return a runtime that runs it.

    The runtime's `environment` attribute is the bundle's environment.json (the fingerprint),
    with how the containers get their GPUs (`gpu_request`) and their network.
    """
    client = client or docker_client()
    style = gpus.require(client) if device == "cuda" else None
    image, state = images.obtain(environment, base_image, image_archive, client)
    images.console().print(f"kit: environment {image.env}: {state} image {image.tag}")
    requests = style.requests(None) if style is not None else []
    container = fp.probe(image.tag, client=client, device_requests=requests)
    if removed := cleanup_abandoned(client):
        images.console().print(f"kit: removed {removed} container(s) of kit runs that were killed")
    runtime = DockerRuntime(image.tag, client=client, gpu_style=style)
    runtime.environment = fp.fingerprint(image, container, runtime="docker")
    runtime.environment.update(runtime.docker.record())
    if style is not None:
        images.console().print(f"kit: GPUs reach the containers through {style.name}")
    if image_archive is not None:
        runtime.environment["loaded_from"] = str(image_archive)
    return runtime
