"""The Docker SDK client, and the container helpers (labels, owners, removal) every placement uses.

How a daemon hands out GPUs is kit.runtime.containers.gpus."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import Any

from kit.io.errors import KitError
from kit.shared import files

LABEL_RUN = "kit.run"
# the driver invocation that made a container, PID@HOST/TOKEN: each driver removes only its own
LABEL_OWNER = "kit.owner"


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


SOCKET = "unix:///run/podman/podman.sock"
HINT = (
    "start Podman's API service as root (`podman system service --time=0 {url} &`, or "
    "`systemctl start podman.socket`), or use --runtime docker"
)


def podman_client() -> Any:
    """A Docker SDK client of Podman's API socket, or a one-line KitError naming what to do."""
    import docker

    url = os.environ.get("KIT_PODMAN_HOST") or SOCKET
    try:
        client = docker.DockerClient(base_url=url, timeout=600)
        client.ping()
        version = client.version()
    except Exception as e:
        raise KitError(
            f"no Podman API answers at {url} ({type(e).__name__}: "
            f"{str(e).splitlines()[0][:120]}); {HINT.format(url=url)}"
        ) from e
    if not answers_as_podman(version):
        raise KitError(f"{url} is not Podman's API (a Docker daemon?); {HINT.format(url=url)}")
    return client


def answers_as_podman(version: dict[str, Any]) -> bool:
    """Whether a Docker-API daemon's /version is Podman's (its components name it)."""
    return "podman" in str(version.get("Components", "")).lower()


def run_id_of(run_dir: Path) -> str:
    try:
        return str(json.loads((run_dir / files.SPEC).read_text())["run_id"])
    except (OSError, ValueError, KeyError):
        return run_dir.name


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
    return client.containers.list(
        all=True, filters={"label": f"{LABEL_OWNER}={owner}"}, ignore_removed=True
    )  # one the engine removes as it exits may go between the listing and its reading


def cleanup(client: Any, owner: str) -> int:
    """Remove the containers of one owner (each driver removes its own at the end)."""
    found = leftovers(client, owner)
    for c in found:
        remove_container(c)
    return len(found)


def cleanup_abandoned(client: Any) -> int:
    """Remove the containers of kit drivers of this host that died without cleaning up: the
    engine removes each as it exits and the driver's reaper one created and never started; what
    both missed (the reaper killed too) goes here. Containers of live drivers, other hosts and other owners are left
    alone."""
    listed = client.containers.list(all=True, filters={"label": LABEL_OWNER}, ignore_removed=True)
    found = [c for c in listed if owner_is_dead((c.labels or {}).get(LABEL_OWNER, ""))]
    for c in found:
        remove_container(c)
    return len(found)
