"""The docker runtime: one fresh container per run, from the pinned environment image.

Each run (benchmark x variant x repeat) gets its own container created through the Docker SDK,
with the run directory mounted at /kit/run, the GPUs requested as device requests, the variant's
environment, and the limits NCCL needs. The container is always removed, whatever happens
(success, crash, timeout, Ctrl-C, SIGTERM, SIGHUP). A driver killed outright (SIGKILL) runs no
handler: its ranks stop on their own when the heartbeat file in the mounted run directory goes
stale (kit.worker.watchdog), and the stopped container, labelled with its dead owner, is removed
by the next kit run on this host (`cleanup_abandoned`). A fault of the daemon or the container
while a run goes (`docker rm -f` from outside, the daemon gone) makes that run a failed run.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kit.errors import KitError
from kit.runtime.base import RunOutcome, RuntimeRequest
from kit.runtime.docker import fingerprint as fp
from kit.runtime.docker import image as images
from kit.runtime.docker.client import (
    LABEL_OWNER,
    LABEL_RUN,
    TOOLKIT_HINT,
    cleanup,
    cleanup_abandoned,
    docker_client,
    gpu_requests_and_ulimits,
    gpu_support,
    launch_error,
    new_owner,
    remove_container,
    run_id_of,
)
from kit.runtime.heartbeat import Heartbeat, worker_env

MOUNT = "/kit/run"
STOP_GRACE_S = 10


class DockerRuntime:
    """Runs `torchrun -m kit.worker /kit/run/spec.json` in a container of `image`."""

    name = "docker"
    pinned = True

    def __init__(
        self,
        image: str,
        client: Any = None,
        shm_size: str = "16g",
        echo: Callable[[str], None] | None = None,
    ) -> None:
        self.image = image
        self.client = client or docker_client()
        self.shm_size = shm_size
        self.echo = echo
        self.owner = new_owner()
        self._gpu_checked = False
        self.inventory: list[dict[str, Any]] | None = None  # one machine: hardware.json as is
        self.environment: dict[str, Any] | None = None  # environment.json, set by prepare()

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
        if device == "cuda" and gpu_support(client) is None:
            return "Docker cannot give GPUs to containers (no NVIDIA Container Toolkit or CDI)"
        return None

    def close(self) -> None:
        """Remove any container of this driver still there (each run removes its own)."""
        cleanup(self.client, self.owner)

    def command(self, nproc: int) -> list[str]:
        return ["torchrun", "--standalone", f"--nproc-per-node={nproc}", "-m", "kit.worker",
                f"{MOUNT}/spec.json"]  # fmt: skip

    def check_gpus(self) -> None:
        """Before the first GPU run: a one-line error when the daemon cannot hand out GPUs."""
        if not self._gpu_checked:
            if gpu_support(self.client) is None:
                raise KitError(TOOLKIT_HINT)
            self._gpu_checked = True

    def container_options(
        self, run_dir: Path, nproc: int, env: dict[str, str], gpu_ids: list[int] | None, device: str
    ) -> dict[str, Any]:
        """Everything `containers.create` gets for one run (separate so tests can read it)."""

        full_env = {"PYTHONUNBUFFERED": "1", "HOME": "/tmp", **env,
                    **worker_env(f"{MOUNT}/{Heartbeat(run_dir).path.name}")}  # fmt: skip
        if device == "cpu":
            full_env.setdefault("OMP_NUM_THREADS", "1")
        device_requests, ulimits = gpu_requests_and_ulimits(gpu_ids, device)
        run_id = run_id_of(run_dir)
        return {
            "image": self.image,
            "command": self.command(nproc),
            "environment": full_env,
            "labels": {LABEL_RUN: run_id, LABEL_OWNER: self.owner},
            "name": None,
            "working_dir": MOUNT,
            "volumes": {str(run_dir.resolve()): {"bind": MOUNT, "mode": "rw"}},
            # the result and log files belong to the user who runs kit, not to root
            "user": f"{os.getuid()}:{os.getgid()}",
            "device_requests": device_requests,
            # NCCL's SHM transport (intra-node path when P2P is off, NCCL_P2P_DISABLE=1) and
            # its proxy buffers live in /dev/shm; Docker's default 64 MB makes NCCL fail or hang.
            # A large private shm keeps the container's IPC namespace isolated (ipc_mode="host"
            # would share the host's); all ranks share it since they run in this one container.
            "shm_size": self.shm_size,
            "ulimits": ulimits,
            # an init process forwards SIGTERM to torchrun and reaps the ranks
            "init": True,
            "detach": True,
        }

    def run(
        self,
        run_dir: Path,
        nproc: int,
        env: dict[str, str],
        log_path: Path,
        timeout_s: float,
        gpu_ids: list[int] | None,
        device: str,
    ) -> RunOutcome:
        import docker

        cmd = self.command(nproc)
        shown = ["docker", "run", self.image, *cmd]
        if device == "cuda":
            try:
                self.check_gpus()
            except KitError as e:
                return RunOutcome(None, False, False, 0.0, shown, str(e))
        opts = self.container_options(run_dir, nproc, env, gpu_ids, device)
        t0 = time.perf_counter()
        container = None
        with open(log_path, "ab") as log, Heartbeat(run_dir) as heartbeat:
            heartbeat.beat()
            log.write(f"$ {' '.join(shown)}\n".encode())
            log.flush()
            try:
                try:
                    container = self.client.containers.create(**opts)
                    container.start()
                except docker.errors.APIError as e:
                    return RunOutcome(None, False, False, time.perf_counter() - t0, shown,
                                      launch_error(e))  # fmt: skip
                streamer = threading.Thread(target=self._stream, args=(container, log), daemon=True)
                streamer.start()
                code, timed_out = self._wait(container, timeout_s)
                if timed_out:
                    container.stop(timeout=STOP_GRACE_S)
                    code = container.wait(timeout=STOP_GRACE_S + 30).get("StatusCode")
                streamer.join(timeout=10)
                return RunOutcome(code, timed_out, False, time.perf_counter() - t0, shown)
            except docker_faults() as e:  # the container or the daemon failed under the run
                return RunOutcome(None, False, False, time.perf_counter() - t0, shown,
                                  fault_reason(e))  # fmt: skip
            finally:
                # also on KeyboardInterrupt / SIGTERM (raised in this thread by the driver)
                if container is not None:
                    with contextlib.suppress(*docker_faults()):  # gone already, or no daemon
                        remove_container(container)

    def _wait(self, container: Any, timeout_s: float) -> tuple[int | None, bool]:
        """Poll the container until it exits or the deadline passes; (exit code, timed out)."""
        deadline = time.monotonic() + timeout_s
        while True:
            container.reload()
            if container.status in ("exited", "dead"):
                return container.attrs["State"]["ExitCode"], False
            if time.monotonic() >= deadline:
                return None, True
            time.sleep(min(0.5, max(0.0, deadline - time.monotonic())))

    def _stream(self, container: Any, log: Any) -> None:
        """Copy the container's output into the log file (and to the terminal when asked)."""
        try:
            for chunk in container.logs(stream=True, follow=True, stdout=True, stderr=True):
                log.write(chunk)
                log.flush()
                if self.echo:
                    for line in chunk.decode(errors="replace").splitlines():
                        self.echo(line)
        except Exception:  # the container went away under us: the log has what there was
            pass


def docker_faults() -> tuple[type[BaseException], ...]:
    """What the Docker SDK raises when a container or the daemon fails under a run."""
    import docker
    import requests

    return (docker.errors.DockerException, requests.exceptions.RequestException)


def fault_reason(e: BaseException) -> str:
    """One line: what went wrong with the container or the daemon while the run went."""
    import docker

    text = str(getattr(e, "explanation", None) or e).strip().splitlines()
    first = text[0][:200] if text else type(e).__name__
    if isinstance(e, docker.errors.NotFound):
        return f"the run's container vanished while it ran (removed from outside?): {first}"
    if isinstance(e, docker.errors.APIError):
        return f"the Docker daemon failed the run: {first}"
    return f"the Docker daemon stopped answering during the run ({type(e).__name__}: {first})"


def prepare_runtime(
    environment: str,
    device: str,
    base_image: str | None = None,
    client: Any = None,
    image_archive: Path | None = None,
) -> DockerRuntime:
    """Build (or reuse) the environment's image, probe it, and return a runtime that runs it.

    The runtime's `environment` attribute is the bundle's environment.json (the fingerprint).
    """
    client = client or docker_client()
    gpus = gpu_support(client) if device == "cuda" else None
    if device == "cuda" and gpus is None:
        raise KitError(TOOLKIT_HINT)
    if image_archive is not None:
        image = images.from_archive(image_archive, environment, client=client)
        state = f"loaded from {image_archive}:"
    else:
        image = images.build(environment, base_image_override=base_image, client=client)
        state = "reused" if image.cached else "built"
    images.console().print(f"kit: environment {image.env}: {state} image {image.tag}")
    container = fp.probe(image.tag, client=client, gpus=gpus is not None)
    if removed := cleanup_abandoned(client):
        images.console().print(f"kit: removed {removed} container(s) of kit runs that were killed")
    runtime = DockerRuntime(image.tag, client=client)
    runtime.environment = fp.fingerprint(image, container, runtime="docker")
    if image_archive is not None:
        runtime.environment["loaded_from"] = str(image_archive)
    return runtime
