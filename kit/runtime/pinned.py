"""A pinned image on this machine: one fresh container per run, in any engine with a Docker API
(Docker, Podman): the docker and podman runtimes.

The placement is kit.runtime.local (heartbeat, timeout, log, interruption); the container is the
engine's class in kit.runtime.containers (options, GPUs in the daemon's style, removal); the image
comes from kit.runtime.images through the engine's client. The container is always removed,
whatever happens (success, crash, timeout, Ctrl-C, SIGTERM, SIGHUP). A driver killed outright
(SIGKILL) runs no handler: the container's command is kit.worker.guard around torchrun, which
stops the container when the heartbeat file in the mounted run directory goes stale (the ranks'
own kit.worker.watchdog does the same per rank), and the engine removes the container as it
exits (AutoRemove); one created and never started is removed by the driver's reaper
(kit.runtime.containers.reaper), and, should that fail too, by the next kit run on this host
(`cleanup_abandoned`, by its dead owner's label). A fault of the
daemon or the container while a run goes (`docker rm -f` from outside, the daemon gone) makes
that run a failed run.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from kit.io.errors import InputError, KitError
from kit.model.environment import axes_record
from kit.runtime.base import RuntimeRequest
from kit.runtime.containers import gpus
from kit.runtime.containers.client import cleanup_abandoned
from kit.runtime.containers.docker import DockerContainer
from kit.runtime.containers.podman import PodmanContainer
from kit.runtime.images import archive as archives
from kit.runtime.images import fingerprint as fp
from kit.runtime.images import image as images
from kit.runtime.images import software
from kit.runtime.local import LocalRuntime
from kit.shared.engines import Engine


class PinnedRuntime(LocalRuntime):
    """Runs `torchrun -m kit.worker /kit/run/spec.json` in a container of `image`, in the
    engine of `container_class` (a subclass names it: DockerRuntime, PodmanRuntime)."""

    container_class: type[DockerContainer] = DockerContainer
    name = "docker"
    engine = Engine.DOCKER
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
        self.docker = self.container_class(
            image,
            client=client,
            shm_size=shm_size,
            echo=echo,
            gpu_style=gpu_style,
            memlock=memlock,
        )
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
    def prepare(cls, request: RuntimeRequest) -> PinnedRuntime:
        """Build (or reuse, or load) the pinned image and probe it: environment.json."""
        return prepare_runtime(request, runtime=cls)

    @classmethod
    def check(cls, request: RuntimeRequest) -> None:
        """The refusals that need no work (the engine's daemon answers; for GPU runs, it can
        hand GPUs to containers): a caller runs them before it prints anything
        (kit.run.registry.check_ready), so a refusal is the only line."""
        box = cls.container_class
        try:
            client = box.connect()
        except KitError as exc:
            raise InputError(str(exc)) from exc
        try:
            if request.device == "cuda":
                box.gpu_request_style(client)
        except KitError as exc:
            raise InputError(str(exc)) from exc
        finally:
            client.close()  # prepare connects again: this one only asked

    @classmethod
    def unavailable(cls, device: str) -> str | None:
        """Why this machine cannot run GPU containers of this engine (--runtime auto), or None."""
        box = cls.container_class
        try:
            client = box.connect()
        except KitError:
            return f"no {box.label} daemon answers"
        if device == "cuda":
            try:
                box.gpu_request_style(client)
            except KitError:
                return (
                    f"{box.label} cannot give GPUs to containers (no NVIDIA Container "
                    "Toolkit or CDI spec)"
                )
        return None

    def container_options(
        self, run_dir: Path, nproc: int, env: dict[str, str], gpu_ids: list[int] | None, device: str
    ) -> dict[str, Any]:
        """Everything `containers.create` gets for one run (separate so tests can read it)."""
        argv = self.command(run_dir, nproc)
        return self.docker.options(
            argv, self.launch_env(run_dir, env, device), run_dir, gpu_ids, device
        )


def pinned_runtime(container_class: type[DockerContainer]) -> type[PinnedRuntime]:
    """The runtime that runs the kit's pinned image in the engine of `container_class` (a
    Docker-API engine): its name and engine are the container class's. A new such engine needs
    no class here: its line in kit.run.registry's RUNTIMES calls this."""
    runtime_name = container_class.__name__.removesuffix("Container") + "Runtime"
    namespace = {
        "container_class": container_class,
        "name": container_class.name,
        "engine": container_class.engine,
        "__module__": __name__,
        "__qualname__": runtime_name,
    }
    return type(runtime_name, (PinnedRuntime,), namespace)


DockerRuntime = pinned_runtime(DockerContainer)
PodmanRuntime = pinned_runtime(PodmanContainer)


def prepare_runtime(
    request: RuntimeRequest, client: Any = None, runtime: type[PinnedRuntime] = DockerRuntime
) -> PinnedRuntime:
    """Build (or reuse, or load) the request's environment image, probe it, and return a runtime
    that runs it.

    The runtime's `environment` attribute is the bundle's environment.json (the fingerprint),
    with how the containers get their GPUs (`gpu_request`) and their network.
    """
    box = runtime.container_class
    client = client or box.connect()
    style = box.gpu_request_style(client) if request.device == "cuda" else None
    archive = request.image_archive
    image, state = archives.obtain(request.environment, request.base_image, archive, client)
    out = images.console()
    out.print(f"kit: environment {image.env}: {state} image {image.tag} ({box.label})")
    container = fp.probe(image.tag, client, box.probe_gpus(style), engine=box)
    if removed := cleanup_abandoned(client):
        out.print(f"kit: removed {removed} container(s) of kit runs that were killed")
    made = runtime(image.tag, client=client, gpu_style=style)
    made.environment = {
        **axes_record("local", runtime.engine),
        **fp.fingerprint(image, container, runtime=runtime.name, archive=archive),
    }
    made.environment.update(made.docker.record())
    if style is not None:
        out.print(f"kit: GPUs reach the containers through {style.name}")
    if not made.environment["pinned"]:
        out.print(f"kit: {made.environment['pinning']}: {image.base_image}", markup=False)
    try:  # what the image holds (software.json): once per image id, then cached
        made.software, cached = software.inventory(image.tag, image.image_id, client, box)
        out.print(f"kit: {software.line(made.software, cached)}", markup=False)
    except KitError as e:  # the runs do not need it: a comparison then has less to say
        out.print(f"kit: no image inventory ({e})", markup=False)
    return made
