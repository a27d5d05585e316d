"""The multi-node runtime: one worker container per node, joined by torchrun's c10d rendezvous.

Each node is a Docker daemon the driver reaches through its own Docker SDK client (a URL such as
unix:///var/run/docker.sock, ssh://node2 or tcp://node3:2376 with TLS from DOCKER_CERT_PATH).
Every node runs the same pinned image (built on the first daemon, copied to the others when they
lack it, checked by image id) with

    torchrun --nnodes N --nproc-per-node G --rdzv-backend c10d --rdzv-endpoint FIRST_NODE:PORT
             --rdzv-id RUN --rdzv-conf is_host=0|1 -m kit.worker /kit/run/spec.json

on the host network (a user-defined bridge network when all nodes share one daemon, as in the
tests). There is no --node-rank: the c10d rendezvous numbers the nodes in the order they join
(torchrun warns that it ignores --node-rank there); the first node hosts the rendezvous store
(is_host=1). The daemons may sit on other machines, so nothing is bind-mounted: the spec is copied
into each container before it starts and the result is copied out after it stops.

The driver watches all containers; the first node that fails (non-zero exit, or its container
vanished) stops the others, and the run's result says which node, with what status, and the tail
of its log. Containers (and networks this runtime made) carry kit's labels and are removed in a
`finally`, also on Ctrl-C and SIGTERM. Every node's output goes to logs/<run_id>.node<i>.log, and
all of them, prefixed with the node, to logs/<run_id>.log.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import socket
import tarfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from kit.errors import InputError, KitError
from kit.runtime.base import RunOutcome, tail
from kit.runtime.docker import (
    LABEL_OWNER,
    LABEL_RUN,
    MOUNT,
    STOP_GRACE_S,
    TOOLKIT_HINT,
    _launch_error,
    _remove,
    _run_id,
    gpu_requests_and_ulimits,
    gpu_support,
)

LABEL_NODE = "kit.node"
LABEL_NETWORK = "kit.network"
LABEL_PROBE = "kit.probe"
POLL_S = 0.5


@dataclass
class NodeConfig:
    """The recipe's `nodes:` section (kit.recipe.Nodes), after --nodes overrides."""

    hosts: list[str]
    gpus_per_node: int | None = None
    rdzv_port: int = 29400
    rdzv_host: str | None = None
    network: str = "host"
    nccl_socket_ifname: str | None = None
    env: dict[str, str] = field(default_factory=dict)


def node_config(recipe_nodes: Any, cli_hosts: tuple[str, ...] = ()) -> NodeConfig | None:
    """The multi-node settings of a run: the recipe's section, with --nodes replacing its hosts.

    None when neither asks for several nodes (the single-machine runtimes apply).
    """
    if recipe_nodes is None and not cli_hosts:
        return None
    from kit.recipe import Nodes

    data = recipe_nodes.model_dump() if recipe_nodes is not None else {}
    if cli_hosts:
        data["hosts"] = list(cli_hosts)
    try:
        nodes = Nodes.model_validate(data)
    except Exception as exc:  # pydantic's ValidationError: one line naming the field
        err = exc.errors()[0] if hasattr(exc, "errors") else {"loc": (), "msg": str(exc)}
        where = ".".join(str(p) for p in err["loc"]) or "nodes"
        msg = str(err["msg"]).removeprefix("Value error, ")
        raise InputError(f"--nodes: {where}: {msg}") from None
    return NodeConfig(**nodes.model_dump())


def host_of(url: str) -> str:
    """The machine a daemon URL names (the driver's own name for a local unix socket)."""
    parsed = urlparse(url)
    if parsed.scheme in ("unix", "npipe") or not parsed.hostname:
        return socket.gethostname()
    return parsed.hostname


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
    if requested not in ("auto", "cuda", "cpu"):
        raise InputError(f"--device {requested!r}: allowed: auto, cuda, cpu")
    if requested != "auto":
        return requested
    nodes = connect_all(config)
    return "cuda" if all(gpu_support(n.client) for n in nodes) else "cpu"


# --- networks ---------------------------------------------------------------------------------


def _ensure_network(client: Any, name: str, owner: str) -> Any | None:
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


def _remove_network(network: Any) -> None:
    import docker

    with contextlib.suppress(docker.errors.NotFound):
        network.remove()


def _first_line(exc: Exception) -> str:
    return (str(getattr(exc, "explanation", None) or exc).strip().splitlines() or ["?"])[0][:200]


# --- files in and out of containers -----------------------------------------------------------


def _tar_of(files: dict[str, bytes]) -> bytes:
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
            if not member.isfile() or len(name.parts) != 2 or name.name == "spec.json":
                continue
            if name.name.endswith(".tmp") or (run_dir / name.name).exists():
                continue
            src = tar.extractfile(member)
            if src is not None:
                (run_dir / name.name).write_bytes(src.read())
                copied.append(name.name)
    return copied


# --- the runtime ------------------------------------------------------------------------------


class _NodeLog:
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


class MultiNodeRuntime:
    """Runs one run across several Docker daemons, one container per node."""

    name = "docker"
    pinned = True

    def __init__(
        self,
        image: str,
        nodes: list[Node],
        config: NodeConfig,
        shm_size: str = "16g",
    ) -> None:
        self.image = image
        self.nodes = nodes
        self.config = config
        self.shm_size = shm_size
        self.owner = f"{os.getpid()}@{os.uname().nodename}"
        self.environment: dict[str, Any] | None = None  # environment.json, set by prepare()
        self.inventory: list[dict[str, Any]] | None = None  # hardware.json's `nodes`

    @property
    def host_network(self) -> bool:
        return self.config.network == "host"

    def container_name(self, launch: str, index: int) -> str:
        return f"kit-{launch}-node{index}"[-63:].lstrip("-._")

    def rdzv_endpoint(self, launch: str) -> str:
        if self.config.rdzv_host:
            host = self.config.rdzv_host
        elif self.host_network:
            host = host_of(self.nodes[0].url)
        else:  # a bridge network: Docker's DNS resolves the first node's container name
            host = self.container_name(launch, 0)
        return f"{host}:{self.config.rdzv_port}"

    def command(self, index: int, nproc_per_node: int, launch: str) -> list[str]:
        # is_host: the first node hosts the rendezvous store, whatever its name resolves to
        return ["torchrun", f"--nnodes={len(self.nodes)}", f"--nproc-per-node={nproc_per_node}", "--rdzv-backend=c10d",
                f"--rdzv-endpoint={self.rdzv_endpoint(launch)}", f"--rdzv-id={launch}",
                f"--rdzv-conf=is_host={1 if index == 0 else 0}", "--max-restarts=0",
                "-m", "kit.worker", f"{MOUNT}/spec.json"]  # fmt: skip

    def node_env(self, env: dict[str, str], device: str) -> dict[str, str]:
        full = {"PYTHONUNBUFFERED": "1", "HOME": "/tmp", **self.config.env, **env}
        if self.config.nccl_socket_ifname:
            full.setdefault("NCCL_SOCKET_IFNAME", self.config.nccl_socket_ifname)
            full.setdefault("GLOO_SOCKET_IFNAME", self.config.nccl_socket_ifname)
        if device == "cpu":
            full.setdefault("OMP_NUM_THREADS", "1")
        return full

    def container_options(
        self,
        node: Node,
        run_id: str,
        launch: str,
        nproc_per_node: int,
        env: dict[str, str],
        gpu_ids: list[int] | None,
        device: str,
    ) -> dict[str, Any]:
        """What `containers.create` gets on one node (separate so tests can read it)."""
        requests, ulimits = gpu_requests_and_ulimits(gpu_ids, device)
        name = self.container_name(launch, node.index)
        opts: dict[str, Any] = {
            "image": self.image,
            "command": self.command(node.index, nproc_per_node, launch),
            "environment": self.node_env(env, device),
            "labels": {LABEL_RUN: run_id, LABEL_OWNER: self.owner, LABEL_NODE: str(node.index)},
            "name": name,
            "working_dir": MOUNT,
            "device_requests": requests,
            "shm_size": self.shm_size,
            "ulimits": ulimits,
            "init": True,
            "detach": True,
        }
        if node.devices:  # InfiniBand verbs devices, found by the node inventory
            opts["devices"] = [f"{d}:{d}" for d in node.devices]
            opts["cap_add"] = ["IPC_LOCK"]
        if self.host_network:
            opts["network_mode"] = "host"
        else:
            opts["network"] = self.config.network
            opts["hostname"] = name
        return opts

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

        run_id = _run_id(run_dir)
        launch = f"{run_id}-{uuid.uuid4().hex[:8]}"
        per_node = self.config.gpus_per_node or nproc
        shown = ["docker", "run", self.image, *self.command(0, per_node, launch)]
        t0 = time.perf_counter()
        if device == "cuda":
            for node in self.nodes:
                if gpu_support(node.client) is None:
                    error = f"node {node.index} ({node.url}): {TOOLKIT_HINT}"
                    return RunOutcome(None, False, False, 0.0, shown, error, nodes=[])
        spec = (run_dir / "spec.json").read_bytes()
        containers: list[Any] = [None] * len(self.nodes)
        addresses: list[str | None] = [None] * len(self.nodes)
        networks: list[Any] = []
        lock = threading.Lock()
        with open(log_path, "ab") as combined:
            combined.write(
                f"$ {len(self.nodes)} nodes x {per_node} processes: {' '.join(shown)}\n".encode()
            )
            logs = [
                _NodeLog(node_log_path(log_path, n.index), combined, lock, f"[node{n.index}] ")
                for n in self.nodes
            ]
            try:
                if not self.host_network:
                    for client in {id(n.client): n.client for n in self.nodes}.values():
                        made = _ensure_network(client, self.config.network, self.owner)
                        if made is not None:
                            networks.append(made)
                for node, log in zip(self.nodes, logs, strict=True):
                    opts = self.container_options(
                        node, run_id, launch, per_node, env, gpu_ids, device
                    )
                    log.file.write(f"$ {' '.join(opts['command'])}\n".encode())
                    try:
                        containers[node.index] = node.client.containers.create(**opts)
                        containers[node.index].put_archive(MOUNT, _tar_of({"spec.json": spec}))
                    except docker.errors.APIError as exc:
                        error = f"node {node.index} ({node.url}): {_launch_error(exc)}"
                        return RunOutcome(None, False, False, time.perf_counter() - t0, shown,
                                          error, nodes=[])  # fmt: skip
                for node in self.nodes:
                    try:
                        containers[node.index].start()
                        addresses[node.index] = _address(containers[node.index], self.config)
                    except docker.errors.APIError as exc:
                        error = f"node {node.index} ({node.url}): {_launch_error(exc)}"
                        return RunOutcome(None, False, False, time.perf_counter() - t0, shown,
                                          error, nodes=[])  # fmt: skip
                streamers = [
                    threading.Thread(target=_stream, args=(c, log), daemon=True)
                    for c, log in zip(containers, logs, strict=True)
                ]
                for s in streamers:
                    s.start()
                states, failed, timed_out = self._watch(containers, timeout_s)
                if failed is not None or timed_out:
                    self._stop(containers, states)
                for s in streamers:
                    s.join(timeout=10)
                for c in containers:
                    if copy_out(c, run_dir):
                        break
                for log in logs:
                    log.close()
                records = self._records(states, failed, timed_out, log_path, per_node)
                extra = {k: v for k, v in self.node_env({}, device).items()
                         if k in self.config.env or k.endswith("_SOCKET_IFNAME")}  # fmt: skip
                for record, address in zip(records, addresses, strict=True):
                    record["address"] = address
                    record["env"] = extra
                return self._outcome(records, failed, timed_out, time.perf_counter() - t0, shown)
            finally:
                # also on KeyboardInterrupt / SIGTERM (raised in this thread by the driver)
                for c in containers:
                    if c is not None:
                        _remove(c)
                for network in networks:
                    _remove_network(network)
                for log in logs:
                    if not log.file.closed:
                        log.file.close()

    def _watch(
        self, containers: list[Any], timeout_s: float
    ) -> tuple[list[dict[str, Any]], int | None, bool]:
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
                    states[i] = {"status": "vanished", "exit_code": None,
                                 "finished_at": f"~{time.time():.3f}"}  # fmt: skip
                    continue
                if c.status in ("exited", "dead"):
                    st = c.attrs["State"]
                    states[i] = {"status": "exited", "exit_code": st.get("ExitCode"),
                                 "finished_at": st.get("FinishedAt") or ""}  # fmt: skip
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

    def _stop(self, containers: list[Any], states: list[dict[str, Any]]) -> None:
        """Stop every node still running (in parallel: each may take the grace period)."""

        def stop(i: int) -> None:
            import docker

            try:
                containers[i].stop(timeout=STOP_GRACE_S)
                containers[i].reload()
                st = containers[i].attrs["State"]
                states[i] = {"status": "stopped", "exit_code": st.get("ExitCode"),
                             "finished_at": st.get("FinishedAt") or ""}  # fmt: skip
            except docker.errors.NotFound:
                states[i] = {"status": "vanished", "exit_code": None, "finished_at": ""}

        running = [i for i, s in enumerate(states) if s["status"] == "running"]
        if running:
            with ThreadPoolExecutor(max_workers=min(16, len(running))) as pool:
                list(pool.map(stop, running))

    def _records(
        self,
        states: list[dict[str, Any]],
        failed: int | None,
        timed_out: bool,
        log_path: Path,
        nproc_per_node: int,
    ) -> list[dict[str, Any]]:
        """What the run result says about each node."""
        records = []
        for node, state in zip(self.nodes, states, strict=True):
            status = {"exited": "ok" if state.get("exit_code") == 0 else "failed"}.get(
                state["status"], state["status"]
            )
            if timed_out and state["status"] == "stopped":
                status = "timeout"
            elif failed is not None and node.index != failed and state["status"] == "stopped":
                status = "stopped"  # by the driver, because another node failed
            path = node_log_path(log_path, node.index)
            record = {
                "node": node.index,
                "host": node.url,
                "status": status,
                "exit_code": state.get("exit_code"),
                "nproc": nproc_per_node,
                "log": f"logs/{path.name}",
            }
            if status != "ok":
                record["log_tail"] = tail(path)
            records.append(record)
        return records

    def _outcome(
        self,
        records: list[dict[str, Any]],
        failed: int | None,
        timed_out: bool,
        wall_s: float,
        shown: list[str],
    ) -> RunOutcome:
        if failed is not None:
            r = records[failed]
            how = (
                "its container vanished"
                if r["status"] == "vanished"
                else f"exited with status {r['exit_code']}"
            )
            others = [x["node"] for x in records if x["status"] == "stopped"]
            error = f"node {failed} ({r['host']}) {how}"
            if others:
                error += f"; stopped node(s) {', '.join(map(str, others))}"
            return RunOutcome(r["exit_code"], False, False, wall_s, shown, error, nodes=records)
        if timed_out:
            return RunOutcome(None, True, False, wall_s, shown, None, nodes=records)
        return RunOutcome(0, False, False, wall_s, shown, None, nodes=records)


def _address(container: Any, config: NodeConfig) -> str | None:
    """The node's address: its container's on a bridge network, its host's on the host network."""
    if config.network == "host":
        return None
    container.reload()
    nets = container.attrs.get("NetworkSettings", {}).get("Networks") or {}
    return (nets.get(config.network) or {}).get("IPAddress") or None


def node_log_path(log_path: Path, index: int) -> Path:
    """logs/<run_id>.node<i>.log next to the run's combined logs/<run_id>.log."""
    return log_path.with_name(f"{log_path.name.removesuffix('.log')}.node{index}.log")


def _stream(container: Any, log: _NodeLog) -> None:
    try:
        for chunk in container.logs(stream=True, follow=True, stdout=True, stderr=True):
            log.write(chunk)
    except Exception:  # the container went away under us: the log has what there was
        pass


# --- the run result ---------------------------------------------------------------------------


def network_transport(result: dict[str, Any]) -> list[str]:
    """How the nodes talked: NCCL's NET transports from its log (NET/IB, NET/Socket), or gloo."""
    nccl = result.get("nccl") or {}
    net = [k for k in (nccl.get("transports") or {}) if k.upper().startswith(("NET", "COLLNET"))]
    if net:
        return net
    if result.get("backend") == "gloo" or result.get("device") == "cpu":
        return ["gloo/TCP"]
    return []


def annotate_result(result: dict[str, Any], outcome: RunOutcome) -> None:
    """Add the nodes to a run result: each node's status, which one failed, how they talked."""
    result["nodes"] = outcome.nodes
    for record in outcome.nodes or []:  # what every node added: nodes.env, socket interface
        result["env"] = {**record.get("env", {}), **(result.get("env") or {})}
    if outcome.error and result.get("status") != "ok":
        previous = result.get("error") or ""
        if outcome.error not in previous:
            result["error"] = f"{outcome.error}; {previous}" if previous else outcome.error
        failed = next((r for r in outcome.nodes or [] if r["status"] in ("failed", "vanished")), None)  # fmt: skip
        if failed and failed.get("log_tail"):
            result["log_tail"] = f"[node {failed['node']}]\n{failed['log_tail']}"
    if "started_at" not in result and outcome.nodes:  # the driver's record: no worker wrote one
        result["world_size"] = sum(r["nproc"] for r in outcome.nodes)
    result["network"] = {"transport": network_transport(result)}


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


def probe_nodes(nodes: list[Node], image: str, config: NodeConfig) -> list[dict[str, Any]]:
    """Each node's inventory (kit.worker.nodeinfo), read in a container on that node's network."""
    owner = f"{os.getpid()}@{os.uname().nodename}"
    made: list[Any] = []
    containers: list[Any] = []
    found = []
    try:
        if config.network != "host":
            for client in {id(n.client): n.client for n in nodes}.values():
                network = _ensure_network(client, config.network, owner)
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
            info = json.loads(lines[-1])
            if info.get("infiniband"):
                node.devices = ["/dev/infiniband"]
            found.append({"node": node.index, "host": node.url, **info})
    finally:
        for container in containers:
            _remove(container)
        for network in made:
            _remove_network(network)
    return found


def prepare(
    config: NodeConfig,
    environment: str,
    device: str,
    base_image: str | None = None,
    image_archive: Path | None = None,
    gpus: int | None = None,
) -> MultiNodeRuntime:
    """Connect to every node, put the pinned image on each, take each node's inventory."""
    from kit import environment as envmod

    nodes = connect_all(config)
    first = nodes[0].client
    if device == "cuda":
        for node in nodes:
            if gpu_support(node.client) is None:
                raise KitError(f"node {node.index} ({node.url}): {TOOLKIT_HINT}")
    if image_archive is not None:
        image = envmod.from_archive(image_archive, environment, client=first)
        state = f"loaded from {image_archive}:"
    else:
        image = envmod.build(environment, base_image_override=base_image, client=first)
        state = "reused" if image.cached else "built"
    out = envmod.console()
    out.print(f"kit: environment {image.env}: {state} image {image.tag} (node 0)")
    placed = ensure_image(nodes, image.tag, echo=out.print)
    container = envmod.probe(image.tag, client=first, gpus=device == "cuda")
    runtime = MultiNodeRuntime(image.tag, nodes, config)
    runtime.environment = envmod.fingerprint(image, container, runtime="docker")
    runtime.environment["nodes"] = placed
    if image_archive is not None:
        runtime.environment["loaded_from"] = str(image_archive)
    runtime.inventory = probe_nodes(nodes, image.tag, config)
    out.print(
        f"kit: {len(nodes)} nodes x {config.gpus_per_node or gpus} processes,"
        f" rendezvous c10d on {runtime.rdzv_endpoint('<run>')} ({config.network} network)"
    )
    return runtime
