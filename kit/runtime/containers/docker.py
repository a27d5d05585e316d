"""A Docker container per launch, through the Docker SDK: options, GPUs, start, watch, remove.

Used by the single-machine placement (kit.runtime.local, as the docker runtime) and, one
container per node, by the multi-node placement. The container gets the run directory at
/kit/run, the GPUs in the daemon's request style (kit.runtime.containers.gpus), the variant's
environment, a private /dev/shm large enough for NCCL, memlock for pinned buffers, and an init
process. A single-machine run needs no network but loopback: the container has none
(`network_mode="none"`, nothing it runs can reach another host) and a host name that resolves to
127.0.0.1 (torchrun's c10d rendezvous and gloo look the host name up; without it they hang).
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
import time
from pathlib import Path
from typing import IO, Any

from kit.io.errors import KitError
from kit.runtime.base import LaunchRequest
from kit.runtime.containers import gpus, reaper
from kit.runtime.containers.base import LaunchError, first_line
from kit.runtime.containers.client import (
    LABEL_OWNER,
    LABEL_RUN,
    cleanup,
    docker_client,
    new_owner,
    remove_container,
    run_id_of,
)
from kit.runtime.heartbeat import ENV_PATH as HEARTBEAT_ENV
from kit.runtime.launch import MOUNT
from kit.shared import stop
from kit.shared.engines import Engine

STOP_GRACE_S = 10
GUARD = ("python", "-m", "kit.worker.guard", "--")  # kit.worker.guard: stops on a dead driver
HOSTNAME = "kit-worker"
STACK_BYTES = 64 * 1024 * 1024


def faults() -> tuple[type[BaseException], ...]:
    """What the Docker SDK raises when a container or the daemon fails under a run."""
    import docker
    import requests

    return (docker.errors.DockerException, requests.exceptions.RequestException)


def fault_reason(e: BaseException) -> str:
    """One line: what went wrong with the container or the daemon while the run went."""
    import docker

    first = first_line(e)
    if isinstance(e, docker.errors.NotFound):
        return f"the run's container vanished while it ran (removed from outside?): {first}"
    if isinstance(e, docker.errors.APIError):
        return f"the Docker daemon failed the run: {first}"
    return f"the Docker daemon stopped answering during the run ({type(e).__name__}: {first})"


RLIMIT_NAMES = {
    7: "open-files (nofile)",
    8: "memlock (pinned host memory)",
    3: "stack",
    6: "processes (nproc)",
}


def launch_error(e: BaseException) -> str:
    """One line for a container that could not be created or started."""
    text = first_line(e)
    if "error setting rlimit" in text:
        # runc names the limit by its number (Linux's RLIMIT_*): say which one in words
        m = re.search(r"rlimit type (\d+)", text)
        which = RLIMIT_NAMES.get(int(m.group(1)), f"type {m.group(1)}") if m else "a resource"
        return (
            f"the engine cannot give the container its {which} limit (a rootless or nested "
            f"daemon, or a limit above the engine's own?) ({text})"
        )
    return gpus.daemon_error(text) or f"could not start the container: {text}"


def ulimits(device: str, memlock: bool = True) -> list[Any]:
    """A deep stack for the ranks; on GPUs unlimited memlock for CUDA's, NCCL's and InfiniBand's
    pinned host buffers (CPU runs skip it: rootless or nested daemons may not raise it)."""
    import docker

    out = [docker.types.Ulimit(name="stack", soft=STACK_BYTES, hard=STACK_BYTES)]
    if device == "cuda" and memlock:
        out.append(docker.types.Ulimit(name="memlock", soft=-1, hard=-1))
    return out


class ExitWatch:
    """A container's exit status, asked for before it starts.

    The kit's containers are removed by the engine as they exit (AutoRemove: a driver killed
    outright leaves none behind), and their state goes with them. So the driver opens the
    engine's wait (condition "next-exit") before the start; the engine answers its headers once
    the wait is registered, and the body (the status) when the container exits.
    """

    def __init__(self, client: Any, container: Any) -> None:
        api = client.api
        url = api._url("/containers/{0}/wait", container.id)
        self._response = api._post(
            url, params={"condition": "next-exit"}, stream=True, timeout=None
        )
        api._raise_for_status(self._response)
        self._status: dict[str, Any] | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._read, name="kit-exit", daemon=True)
        stop.start_thread(self._thread)

    def _read(self) -> None:
        try:
            self._status = self._response.json()
        except Exception as e:  # the daemon went away, or answered what is not JSON
            self._error = e

    def code(self, timeout_s: float) -> int | None:
        """The exit code, waiting up to `timeout_s`; None while it still runs."""
        self._thread.join(timeout=timeout_s)
        if self._thread.is_alive():
            return None
        if self._error is not None or not isinstance(self._status, dict):
            import requests

            raise requests.exceptions.ConnectionError(
                f"the engine's wait for the container ended without a status ({self._error})"
            )
        return int(self._status.get("StatusCode", -1))

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._response.close()


def kill_reasons(client: Any, container: Any, since: float) -> list[str]:
    """The engine's "oom" and "kill" events of one container since `since` (what the state
    told before AutoRemove took it): its kernel OOM kills and the signals sent from outside."""
    with contextlib.suppress(*faults(), ValueError):
        found = client.events(
            since=int(since) - 1,
            until=int(time.time()) + 1,
            decode=True,
            filters={"container": container.id, "event": ["oom", "kill"]},
        )
        return [
            "oom"
            if (e.get("status") or e.get("Action")) == "oom"
            else f"kill {((e.get('Actor') or {}).get('Attributes') or {}).get('signal', '?')}"
            for e in found
        ]
    return []


class Running:
    """One started container of a launch: its output copied into the log by a thread, its exit
    status from the wait opened before it started."""

    def __init__(
        self,
        client: Any,
        engine: Any,
        container: Any,
        output: Any,
        exit: ExitWatch,
        log: IO[bytes],
        echo: Any = None,
    ) -> None:
        self.client = client
        self.engine = engine
        self.container = container
        self.exit = exit
        self.echo = echo
        self.started = time.time()
        self.stopped = False  # the driver stopped it (its kill is not someone else's)
        self.streamer = threading.Thread(target=self._stream, args=(output, log), daemon=True)
        stop.start_thread(self.streamer)

    def _stream(self, output: Any, log: IO[bytes]) -> None:
        try:
            for chunk in output:
                log.write(chunk)
                log.flush()
                if self.echo:
                    for line in chunk.decode(errors="replace").splitlines():
                        self.echo(line)
        except Exception:  # the container went away under us: the log has what there was
            pass

    def wait(self, timeout_s: float) -> tuple[int | None, bool]:
        """Until the container exits or the deadline passes; (exit code, timed out)."""
        deadline = time.monotonic() + timeout_s
        try:
            while True:
                stop.check()  # a stop signal whose exception was swallowed (kit.shared.stop)
                code = self.exit.code(min(0.5, max(0.0, deadline - time.monotonic())))
                if code is not None:
                    self.streamer.join(timeout=10)
                    return code, False
                if time.monotonic() >= deadline:
                    return None, True
        except faults() as e:
            raise LaunchError(fault_reason(e)) from e

    def stop(self) -> int | None:
        import docker

        self.stopped = True
        try:
            with contextlib.suppress(docker.errors.NotFound):  # it exited and went meanwhile
                self.container.stop(timeout=STOP_GRACE_S)
            code = self.exit.code(STOP_GRACE_S + 30)
        except faults() as e:
            raise LaunchError(fault_reason(e)) from e
        self.streamer.join(timeout=10)
        return code

    def remove(self) -> None:
        """Gone already as it exited (AutoRemove); removed here when it never exited (the
        daemon failed under the run)."""
        removed(self.container, self.engine, self.exit)

    def reason(self) -> str | None:
        """Why a container that did not exit 0 ended, where its own exit code cannot say: the
        kernel's OOM killer (137 says only "killed"), or a signal from outside the kit."""
        events = kill_reasons(self.client, self.container, self.started)
        if "oom" in events:
            limit = ((self.container.attrs or {}).get("HostConfig") or {}).get("Memory") or 0
            within = f" (its limit: {limit / 2**30:.1f} GiB)" if limit else ""
            return f"the container was killed for lack of memory (OOMKilled){within}"
        if events and not self.stopped:
            signal = events[-1].removeprefix("kill ")
            return (
                f"the container was killed from outside the kit (signal {signal}: "
                "docker kill, stop or rm -f?)"
            )
        return None


def gone(container: Any, timeout_s: float = 30) -> None:
    """Remove a container and return once the engine has (the engine's own removal after an
    exit finishes a moment after the exit is reported); quietly when it is gone already or the
    daemon does not answer."""
    with contextlib.suppress(*faults()):
        remove_container(container)
        container.wait(condition="removed", timeout=timeout_s)


def start_removed_on_exit(
    client: Any, engine: Any, opts: dict[str, Any], demux: bool = False
) -> tuple[Any, Any, ExitWatch]:
    """Create a container of `engine` (its `create` and `engine` name) that the engine removes
    as it exits, attach to its output and open the wait for its exit status (both before it
    starts: nothing is missed however soon it ends), then start it. The driver's reaper learns
    its name before it exists (a driver killed before the start leaves no created container).
    Returns (container, output stream, exit watch); a container that could not start is
    removed."""
    name = opts.get("name") or reaper.new_name()
    reaper.watch(engine.engine, name)
    try:
        container = engine.create(client, {**opts, "name": name, "auto_remove": True})
    except BaseException:
        reaper.forget(engine.engine, name)
        raise
    try:
        output = container.attach(stdout=True, stderr=True, stream=True, logs=True, demux=demux)
        exit = ExitWatch(client, container)
        container.start()
    except BaseException:
        removed(container, engine)
        raise
    return container, output, exit


def removed(container: Any, engine: Any, exit: ExitWatch | None = None) -> None:
    """The end of a container of start_removed_on_exit: removed (the engine's already, unless it
    never exited), its wait closed, and the reaper told."""
    if exit is not None:
        exit.close()
    gone(container)
    reaper.forget(engine.engine, container.name)


class DockerContainer:
    """Runs each launch in a fresh container of `image` on one daemon.

    The engine's hooks, which a Docker-API engine of its own (kit.runtime.containers.podman)
    overrides: `connect` (its client), `gpu_request_style`, `create` (one container from the
    options below), `probe_gpus` (what the image's probe asks for GPUs)."""

    name = "docker"
    engine = Engine.DOCKER
    label = "Docker"  # the engine's name in a sentence
    pinned = True
    isolated = True
    python = None  # the image's torchrun

    def __init__(
        self,
        image: str,
        client: Any = None,
        shm_size: str = "16g",
        echo: Any = None,
        owner: str | None = None,
        gpu_style: gpus.GpuStyle | None = None,
        memory: str | None = None,
        memlock: bool = True,
    ) -> None:
        self.image = image
        self._client = client  # asked for at the first use: building options needs no daemon
        self.shm_size = shm_size
        self.echo = echo
        self.owner = owner or new_owner()
        self.memory = memory  # a memory limit ("64g"); None: the host's
        self.memlock = memlock  # unlimited memlock on GPU runs (a nested test daemon cannot)
        self._gpus = gpu_style  # asked of the daemon at the first GPU launch when not given

    @classmethod
    def connect(cls) -> Any:
        """The engine's SDK client, or a one-line KitError naming what to do."""
        return docker_client()

    @classmethod
    def gpu_request_style(cls, client: Any) -> gpus.GpuStyle:
        """How the daemon hands out GPUs; a one-line KitError when it cannot."""
        return gpus.require(client)

    @classmethod
    def create(cls, client: Any, opts: dict[str, Any]) -> Any:
        """One container from `options`' keywords (not started)."""
        return client.containers.create(**opts)

    @classmethod
    def probe_gpus(cls, style: gpus.GpuStyle | None) -> dict[str, Any]:
        """The options of the image's probe container that give it all GPUs."""
        return {"device_requests": style.requests(None) if style is not None else []}

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = self.connect()
        return self._client

    def gpu_style(self) -> gpus.GpuStyle:
        """The daemon's GPU request style, asked once; a one-line KitError when it has none."""
        if self._gpus is None:
            self._gpus = self.gpu_request_style(self.client)
        return self._gpus

    def run_dir(self, run_dir: Path) -> str:
        return MOUNT

    def shown(self, argv: list[str]) -> list[str]:
        return [self.engine, "run", self.image, *argv]

    def device_requests(self, gpu_ids: list[int] | None, device: str) -> list[Any]:
        """The GPUs of one container, in the daemon's style; none for CPU runs."""
        if device != "cuda":
            return []
        style = self.gpu_style()
        style.check(gpu_ids)
        return style.requests(gpu_ids)

    def options(
        self,
        argv: list[str],
        env: dict[str, str],
        run_dir: Path | None,
        gpu_ids: list[int] | None,
        device: str,
        labels: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        """Everything `containers.create` gets (separate so that tests can read it).

        `run_dir` is bind-mounted at /kit/run when given (one machine); multi-node containers
        get their spec copied in instead and set their own network.
        """
        if HEARTBEAT_ENV in env:  # the container stops itself when the driver's beat stops
            argv = [*GUARD, *argv]
        opts: dict[str, Any] = {
            "image": self.image,
            "command": argv,
            "environment": env,
            "labels": {LABEL_OWNER: self.owner, **(labels or {})},
            "name": None,
            "working_dir": MOUNT,
            "device_requests": self.device_requests(gpu_ids, device),
            # NCCL's SHM transport (intra-node path when P2P is off, NCCL_P2P_DISABLE=1) and
            # its proxy buffers live in /dev/shm; Docker's default 64 MB makes NCCL fail or hang.
            # A large private shm keeps the container's IPC namespace isolated (ipc_mode="host"
            # would share the host's); all ranks share it since they run in this one container.
            "shm_size": self.shm_size,
            "ulimits": ulimits(device, self.memlock),
            # a private, writable /tmp (HOME too): an image may have none (`docker import` of a
            # machine's software), and torchrun then makes its scratch folders in the working
            # directory, the run directory, which the bundle's manifest must not find changed
            "tmpfs": {"/tmp": "rw,exec,mode=1777"},
            # an init process forwards SIGTERM to torchrun and reaps the ranks
            "init": True,
            "detach": True,
        }
        if self.memory:
            opts["mem_limit"] = self.memory
        if run_dir is not None:
            opts["labels"][LABEL_RUN] = run_id_of(run_dir)
            opts["volumes"] = {str(run_dir.resolve()): {"bind": MOUNT, "mode": "rw"}}
            # the result and log files belong to the user who runs kit, not to root
            opts["user"] = f"{os.getuid()}:{os.getgid()}"
            opts["network_mode"] = "none"
            opts["hostname"] = HOSTNAME
            opts["extra_hosts"] = {HOSTNAME: "127.0.0.1"}
        return opts

    def start(self, argv: list[str], req: LaunchRequest, log: IO[bytes]) -> Running:
        import docker

        try:
            opts = self.options(argv, req.env, req.run_dir, req.gpu_ids, req.device)
        except KitError as e:  # no GPU request style, or a GPU the CDI spec lacks
            raise LaunchError(str(e)) from e
        try:
            container, output, exit = start_removed_on_exit(self.client, self, opts)
        except docker.errors.APIError as e:
            raise LaunchError(launch_error(e)) from e
        except faults() as e:
            raise LaunchError(fault_reason(e)) from e
        return Running(self.client, self, container, output, exit, log, self.echo)

    def record(self) -> dict[str, Any]:
        """What environment.json says of how the containers got their GPUs and network."""
        rec: dict[str, Any] = {"network": "none"}
        if self._gpus is not None:
            rec.update(self._gpus.record())
        return rec

    def close(self) -> None:
        """Remove any container of this driver still there (each run removes its own)."""
        with contextlib.suppress(*faults()):
            cleanup(self.client, self.owner)
