"""The Docker SDK client, GPU support of a daemon, and the container helpers every docker runtime uses."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import Any

from kit.errors import KitError

LABEL_RUN = "kit.run"
# the driver invocation that made a container, PID@HOST/TOKEN: each driver removes only its own
LABEL_OWNER = "kit.owner"


CDI_DIRS = ("/etc/cdi", "/var/run/cdi")
TOOLKIT_HINT = (
    "Docker on this host cannot give GPUs to containers: install the NVIDIA Container Toolkit "
    "(https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/install-guide.html),"
    " run `nvidia-ctk runtime configure --runtime=docker`, restart dockerd; or use --runtime host"
)


def gpu_support(client: Any) -> str | None:
    """How the daemon offers GPUs ("nvidia runtime", "cdi"), or None when it does not."""
    try:
        info = client.info()
    except Exception:
        return None
    if "nvidia" in (info.get("Runtimes") or {}):
        return "nvidia runtime"
    if any(str(d).startswith("cdi") for d in info.get("CDISpecDirs") or []) or any(
        Path(d).is_dir() and any(Path(d).glob("nvidia*")) for d in CDI_DIRS
    ):
        return "cdi"
    return None


def gpu_requests_and_ulimits(gpu_ids: list[int] | None, device: str) -> tuple[list, list]:
    """The device requests (the listed GPUs, or all) and ulimits of one worker container."""
    import docker

    requests = []
    if device == "cuda":
        if gpu_ids is not None:
            ids = [str(i) for i in gpu_ids]
            requests = [docker.types.DeviceRequest(device_ids=ids, capabilities=[["gpu"]])]
        else:
            requests = [docker.types.DeviceRequest(count=-1, capabilities=[["gpu"]])]
    stack = 64 * 1024 * 1024
    ulimits = [docker.types.Ulimit(name="stack", soft=stack, hard=stack)]
    if device == "cuda":
        # pinned (page-locked) host buffers of CUDA, NCCL and InfiniBand need memlock; CPU
        # runs do not, and some daemons (rootless, nested) may not raise it at all
        ulimits.append(docker.types.Ulimit(name="memlock", soft=-1, hard=-1))
    return requests, ulimits


def docker_client() -> Any:
    """A Docker SDK client, or a one-line KitError naming what to do."""
    import docker  # the driver's dependency; imported late so that `kit --help` stays fast

    if not hasattr(docker, "from_env"):  # only the repo's docker/ folder was found
        raise KitError("the Docker SDK for Python is not installed: pip install 'docker>=7'")
    try:
        client = docker.from_env(timeout=600)
        client.ping()
    except Exception as e:
        raise KitError(
            f"no Docker daemon answers ({type(e).__name__}: {str(e).splitlines()[0][:160]}); "
            "start dockerd or use --runtime host"
        ) from e
    return client


def run_id_of(run_dir: Path) -> str:
    try:
        return str(json.loads((run_dir / "spec.json").read_text())["run_id"])
    except (OSError, ValueError, KeyError):
        return run_dir.name


def launch_error(e: Exception) -> str:
    text = str(getattr(e, "explanation", None) or e).strip().splitlines()[0]
    if "could not select device driver" in text or "nvidia-container-cli" in text:
        return f"{TOOLKIT_HINT} (daemon said: {text})"
    return f"could not start the container: {text}"


def remove_container(container: Any) -> None:
    import docker

    try:
        container.remove(force=True)
    except docker.errors.NotFound:
        pass
    except docker.errors.APIError as e:
        if "already in progress" not in str(e):
            raise


def new_owner() -> str:
    """This driver invocation's owner label: its pid and host (to tell whether it still lives)
    and a random token (a reused pid is another owner). KIT_OWNER overrides it: a test session
    labels what its drivers make with an owner of its own, and removes only that."""
    return (
        os.environ.get("KIT_OWNER")
        or f"{os.getpid()}@{os.uname().nodename}/{uuid.uuid4().hex[:12]}"
    )


def owner_is_dead(owner: str) -> bool:
    """True only for an owner label of a driver on this host whose process is gone.

    Owners of other hosts, of live processes and labels of another form (a test session's) are
    never dead: what kit cannot prove abandoned, it leaves alone.
    """
    pid, sep, rest = owner.partition("@")
    host, _, token = rest.partition("/")
    if not (sep and token and pid.isdigit()) or host != os.uname().nodename:
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, someone else's
        return False
    return False


def leftovers(client: Any, owner: str) -> list[Any]:
    """The containers of one driver invocation (its owner label) that still exist."""
    return client.containers.list(all=True, filters={"label": f"{LABEL_OWNER}={owner}"})


def cleanup(client: Any, owner: str) -> int:
    """Remove the containers of one owner (each driver removes its own at the end)."""
    found = leftovers(client, owner)
    for c in found:
        remove_container(c)
    return len(found)


def cleanup_abandoned(client: Any) -> int:
    """Remove the containers of kit drivers of this host that died without cleaning up
    (SIGKILL): their ranks ended by the heartbeat watchdog, the stopped containers stay until
    here. Containers of live drivers, other hosts and other owners are left alone."""
    found = [
        c for c in client.containers.list(all=True, filters={"label": LABEL_OWNER})
        if owner_is_dead((c.labels or {}).get(LABEL_OWNER, ""))
    ]  # fmt: skip
    for c in found:
        remove_container(c)
    return len(found)
