"""Reaching the nodes: one Docker client per daemon, networks, files in and out of containers,
per-node logs, the image on every node, and each node's inventory.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import tarfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kit.io.errors import InputError, KitError
from kit.model import NodeInventory, validate
from kit.run.multinode.config import NodeConfig
from kit.runtime.base import check_device
from kit.runtime.containers.client import LABEL_OWNER, remove_container
from kit.runtime.containers.docker import STOP_GRACE_S
from kit.runtime.containers.gpus import style as gpu_style
from kit.runtime.launch import MOUNT
from kit.shared import files

LABEL_NODE = "kit.node"
LABEL_NETWORK = "kit.network"
LABEL_PROBE = "kit.probe"
POLL_S = 0.5


def connect(url: str, index: int) -> Any:
    """A Docker SDK client for one node's daemon, or a one-line error naming the node."""
    import docker

    kwargs: dict[str, Any] = {}
    if url.startswith(("tcp://", "https://")):
        # TLS as the docker CLI takes it: DOCKER_TLS_VERIFY and DOCKER_CERT_PATH
        tls = docker.utils.kwargs_from_env().get("tls")
        if tls:
            kwargs["tls"] = tls
    if url.startswith("ssh://"):
        kwargs["use_ssh_client"] = True  # the ssh binary: ~/.ssh/config, agents, jump hosts
    try:
        client = docker.DockerClient(base_url=url, timeout=600, **kwargs)
        client.ping()
    except Exception as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:160]
        raise KitError(f"node {index} ({url}): no Docker daemon answers ({first})") from exc
    return client


@dataclass
class Node:
    index: int
    url: str
    client: Any
    devices: list[str] = field(default_factory=list)  # e.g. /dev/infiniband when it has IB


def connect_all(config: NodeConfig) -> list[Node]:
    """One client per distinct daemon URL (nodes that share a daemon share its client)."""
    clients: dict[str, Any] = {}
    nodes = []
    for i, url in enumerate(config.hosts):
        if url not in clients:
            clients[url] = connect(url, i)
        nodes.append(Node(i, url, clients[url]))
    return nodes


def nodes_device(requested: str, config: NodeConfig) -> str:
    """The device of a multi-node run: the nodes decide, not the machine the driver runs on."""
    check_device(requested)
    if requested != "auto":
        return requested
    nodes = connect_all(config)
    return "cuda" if all(gpu_style(n.client) for n in nodes) else "cpu"


# --- networks ---------------------------------------------------------------------------------


def ensure_network(client: Any, name: str, owner: str) -> Any | None:
    """The named bridge network on this daemon; made (with kit's labels) when absent.

    Returns the network when this call made it (so the caller removes it), else None.
    """
    import docker

    if client.networks.list(names=[name]):
        return None
    try:
        return client.networks.create(
            name, driver="bridge", labels={LABEL_OWNER: owner, LABEL_NETWORK: name}
        )
    except docker.errors.APIError as exc:
        if "already exists" in str(exc):  # made by another launch in the meantime
            return None
        raise KitError(f"could not create the network {name!r}: {_first_line(exc)}") from exc


def remove_network(network: Any) -> None:
    import docker

    with contextlib.suppress(docker.errors.NotFound):
        network.remove()


def _first_line(exc: Exception) -> str:
    return (str(getattr(exc, "explanation", None) or exc).strip().splitlines() or ["?"])[0][:200]


# --- files in and out of containers -----------------------------------------------------------


def tar_of(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o644, int(time.time())
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def copy_out(container: Any, run_dir: Path) -> list[str]:
    """Copy the files the worker wrote in /kit/run (not the spec) into the run directory."""
    import docker

    try:
        stream, _ = container.get_archive(MOUNT)
        data = b"".join(stream)
    except docker.errors.NotFound:
        return []
    copied = []
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        for member in tar.getmembers():
            name = Path(member.name)
            # `run/result.json`: only plain files directly in the run directory, never a path out
            if not member.isfile() or len(name.parts) != 2 or name.name == files.SPEC:
                continue
            if name.name.endswith(".tmp") or (run_dir / name.name).exists():
                continue
            src = tar.extractfile(member)
            if src is not None:
                (run_dir / name.name).write_bytes(src.read())
                copied.append(name.name)
    return copied


# --- the runtime ------------------------------------------------------------------------------


class NodeLog:
    """One node's output: its own log file, and prefixed lines in the run's combined log."""

    def __init__(self, path: Path, combined: Any, lock: threading.Lock, prefix: str) -> None:
        self.path = path
        self.file = open(path, "ab")  # noqa: SIM115 (closed by the runtime's finally)
        self.combined, self.lock, self.prefix = combined, lock, prefix.encode()
        self._partial = b""

    def write(self, chunk: bytes) -> None:
        self.file.write(chunk)
        self.file.flush()
        lines = (self._partial + chunk).split(b"\n")
        self._partial = lines.pop()
        with self.lock:
            for line in lines:
                self.combined.write(self.prefix + line + b"\n")
            self.combined.flush()

    def close(self) -> None:
        if self._partial:
            with self.lock:
                self.combined.write(self.prefix + self._partial + b"\n")
        self.file.close()


def node_log_path(log_path: Path, index: int) -> Path:
    """logs/<run_id>.node<i>.log next to the run's combined logs/<run_id>.log."""
    return log_path.with_name(f"{log_path.name.removesuffix('.log')}.node{index}.log")


def stream_logs(container: Any, log: NodeLog) -> None:
    try:
        for chunk in container.logs(stream=True, follow=True, stdout=True, stderr=True):
            log.write(chunk)
    except Exception:  # the container went away under us: the log has what there was
        pass


# --- preparing the nodes ----------------------------------------------------------------------


def copy_image(src: Any, dst: Any, tag: str) -> str:
    """Stream an image from one daemon to another (docker save | docker load); its new id."""
    image = src.images.get(tag)
    loaded = dst.images.load(image.save(named=True))
    ids = {img.id for img in loaded}
    if image.id not in ids:
        raise KitError(f"copying {tag}: the other daemon loaded {sorted(ids)}, not {image.id}")
    return image.id


def ensure_image(nodes: list[Node], tag: str, echo: Any = print) -> list[dict[str, Any]]:
    """The first node's image on every node's daemon (the same image id everywhere)."""
    import docker

    source = nodes[0].client
    image_id = source.images.get(tag).id
    seen: dict[int, str] = {id(source): image_id}
    out = []
    for node in nodes:
        if id(node.client) not in seen:
            try:
                there = node.client.images.get(tag).id
            except docker.errors.ImageNotFound:
                there = None
            if there != image_id:
                echo(f"kit: copying image {tag} to node {node.index} ({node.url})")
                there = copy_image(source, node.client, tag)
            seen[id(node.client)] = there
        out.append({"node": node.index, "host": node.url, "image_id": seen[id(node.client)]})
    return out


def node_inventory(node: Node, line: str) -> NodeInventory:
    """A node's nodeinfo line as hardware.json's record of it, or one line saying what is wrong."""
    where = f"node {node.index} ({node.url})"
    try:
        info = json.loads(line)
    except json.JSONDecodeError:
        info = None
    if not isinstance(info, dict):
        raise KitError(f"{where}: inventory failed (not a JSON object: {line[:80]!r})")
    try:
        return validate(NodeInventory, {"node": node.index, "host": node.url, **info}, where)
    except InputError as exc:  # a field of the wrong type, named as a bundle's would be
        raise KitError(f"inventory failed: {exc}") from None


def probe_nodes(nodes: list[Node], image: str, config: NodeConfig) -> list[NodeInventory]:
    """Each node's inventory (kit.worker.nodeinfo), read in a container on that node's network."""
    owner = f"{os.getpid()}@{os.uname().nodename}"
    made: list[Any] = []
    containers: list[Any] = []
    found = []
    try:
        if config.network != "host":
            for client in {id(n.client): n.client for n in nodes}.values():
                network = ensure_network(client, config.network, owner)
                if network is not None:
                    made.append(network)
        # all at once, as in a run: on a bridge network each node then gets its own address
        for node in nodes:
            opts: dict[str, Any] = {"labels": {LABEL_PROBE: image, LABEL_OWNER: owner}}
            if config.network == "host":
                opts["network_mode"] = "host"
            else:
                opts["network"] = config.network
                opts["hostname"] = f"kit-node{node.index}"
            # sleep a little after printing, so the others are up while each one looks
            command = ["sh", "-c", "python -m kit.worker.nodeinfo && sleep 1"]
            containers.append(node.client.containers.create(image, command, **opts))
        for container in containers:
            container.start()
        for node, container in zip(nodes, containers, strict=True):
            code = container.wait(timeout=120).get("StatusCode")
            out = container.logs(stdout=True, stderr=False).decode(errors="replace")
            err = container.logs(stdout=False, stderr=True).decode(errors="replace")
            lines = [ln for ln in out.splitlines() if ln.strip()]
            if code != 0 or not lines:
                last = (err.strip().splitlines() or ["(no output)"])[-1]
                raise KitError(f"node {node.index} ({node.url}): inventory failed ({last})")
            info = node_inventory(node, lines[-1])
            if info.infiniband:
                node.devices = ["/dev/infiniband"]
            found.append(info)
    finally:
        for container in containers:
            remove_container(container)
        for network in made:
            remove_network(network)
    return found


# --- watching a run ---------------------------------------------------------------------------


def watch(containers: list[Any], timeout_s: float) -> tuple[list[dict[str, Any]], int | None, bool]:
    """Poll every container until all ended, one failed, or the deadline passed.

    Returns each node's state ({"status", "exit_code", "finished_at"}), the node that failed
    first (by its container's finish time) or None, and whether the deadline passed.
    """
    import docker

    deadline = time.monotonic() + timeout_s
    states: list[dict[str, Any]] = [{"status": "running"} for _ in containers]
    while True:
        for i, c in enumerate(containers):
            if states[i]["status"] in ("exited", "vanished"):
                continue
            try:
                c.reload()
            except docker.errors.NotFound:
                states[i] = {
                    "status": "vanished",
                    "exit_code": None,
                    "finished_at": f"~{time.time():.3f}",
                }
                continue
            if c.status in ("exited", "dead"):
                st = c.attrs["State"]
                states[i] = {
                    "status": "exited",
                    "exit_code": st.get("ExitCode"),
                    "finished_at": st.get("FinishedAt") or "",
                }
        bad = [
            (s["finished_at"], i)
            for i, s in enumerate(states)
            if s["status"] == "vanished" or (s["status"] == "exited" and s["exit_code"] != 0)
        ]
        if bad:
            return states, min(bad)[1], False
        if all(s["status"] == "exited" for s in states):
            return states, None, False
        if time.monotonic() >= deadline:
            return states, None, True
        time.sleep(min(POLL_S, max(0.0, deadline - time.monotonic())))


def stop_all(containers: list[Any], states: list[dict[str, Any]]) -> None:
    """Stop every node still running (in parallel: each may take the grace period)."""

    def stop(i: int) -> None:
        import docker

        try:
            containers[i].stop(timeout=STOP_GRACE_S)
            containers[i].reload()
            st = containers[i].attrs["State"]
            states[i] = {
                "status": "stopped",
                "exit_code": st.get("ExitCode"),
                "finished_at": st.get("FinishedAt") or "",
            }
        except docker.errors.NotFound:
            states[i] = {"status": "vanished", "exit_code": None, "finished_at": ""}

    running = [i for i, s in enumerate(states) if s["status"] == "running"]
    if running:
        with ThreadPoolExecutor(max_workers=min(16, len(running))) as pool:
            list(pool.map(stop, running))
