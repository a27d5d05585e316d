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
`finally`, also on Ctrl-C, SIGTERM and SIGHUP; a fault of a daemon or a container during the run
(removed from outside, a daemon gone) is a failed run with the reason. With no shared filesystem
the heartbeat of single-node runs cannot reach these containers: a driver killed outright
(SIGKILL) leaves them running until their torchrun ends or fails; the next kit run from the same
driver host removes every container whose owner label names a dead driver of that host, on each
node it reaches (`cleanup_abandoned`), and `docker rm -f $(docker ps -aq --filter
label=kit.owner=OWNER)` removes them by hand. Every node's output goes to logs/<run_id>.node<i>.log, and
all of them, prefixed with the node, to logs/<run_id>.log.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from kit.io.errors import KitError
from kit.model.environment import axes_record
from kit.model.hardware import NodeInventory
from kit.model.run import NodeRecord
from kit.run.multinode.config import NodeConfig, host_of
from kit.run.multinode.transport import (
    LABEL_NODE,
    Node,
    NodeLog,
    connect_all,
    copy_out,
    ensure_image,
    ensure_network,
    node_log_path,
    probe_nodes,
    remove_network,
    stop_all,
    stream_logs,
    tar_of,
    watch,
)
from kit.runtime import launch
from kit.runtime.base import LaunchRequest, RunOutcome, RuntimeRequest, tail
from kit.runtime.containers import gpus
from kit.runtime.containers.client import (
    LABEL_RUN,
    cleanup,
    cleanup_abandoned,
    new_owner,
    remove_container,
    run_id_of,
)
from kit.runtime.containers.docker import DockerContainer, fault_reason, faults, launch_error
from kit.runtime.images import archive as archives
from kit.runtime.images import fingerprint as fp
from kit.runtime.images import image as images
from kit.runtime.launch import MOUNT
from kit.shared import files, stop
from kit.shared.engines import Engine

# --- the runtime ------------------------------------------------------------------------------


class MultiNodeRuntime:
    """Runs one run across several Docker daemons, one container per node."""

    name = "multinode"
    placement = "multinode"
    engine = Engine.DOCKER
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
        self.owner = new_owner()
        self.environment: dict[str, Any] | None = None  # environment.json, set by prepare()
        self.inventory: list[NodeInventory] | None = None  # hardware.json's `nodes`
        # how each node's daemon hands out GPUs (kit.runtime.containers.gpus), by node index
        self.gpu_styles: dict[int, gpus.GpuStyle] = {}

    @classmethod
    def prepare(cls, request: RuntimeRequest) -> MultiNodeRuntime:
        """Reach every node, put the pinned image on each, take each node's inventory."""
        return prepare_runtime(request)

    def known_environment(self) -> dict[str, Any] | None:
        """The pinned image's fingerprint, probed on the first node when prepared."""
        return self.environment

    def close(self) -> None:
        """Remove any container of this driver still on a node (each run removes its own)."""
        for client in {id(n.client): n.client for n in self.nodes}.values():
            cleanup(client, self.owner)

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

    def command(self, index: int, nproc_per_node: int, run: str) -> list[str]:
        rdzv = launch.Rendezvous(
            nnodes=len(self.nodes),
            endpoint=self.rdzv_endpoint(run),
            run_id=run,
            is_host=index == 0,
        )
        return launch.torchrun(nproc_per_node, f"{MOUNT}/{files.SPEC}", rendezvous=rdzv)

    def node_env(self, env: dict[str, str], device: str) -> dict[str, str]:
        """The node section's variables and socket interface, then the variant's (no heartbeat:
        the daemons may be on other machines and share no filesystem with the driver)."""
        extra = dict(self.config.env)
        if self.config.nccl_socket_ifname:
            extra.setdefault("NCCL_SOCKET_IFNAME", self.config.nccl_socket_ifname)
            extra.setdefault("GLOO_SOCKET_IFNAME", self.config.nccl_socket_ifname)
        return launch.environment(env, device, container=True, extra=extra)

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
        name = self.container_name(launch, node.index)
        container = DockerContainer(
            self.image,
            client=node.client,
            shm_size=self.shm_size,
            owner=self.owner,
            gpu_style=self.gpu_styles.get(node.index),
        )
        opts = container.options(
            self.command(node.index, nproc_per_node, launch),
            self.node_env(env, device),
            None,
            gpu_ids,
            device,
            labels={LABEL_RUN: run_id, LABEL_NODE: str(node.index)},
        )
        opts["name"] = name
        if node.devices:  # InfiniBand verbs devices, found by the node inventory
            opts["devices"] = [f"{d}:{d}" for d in node.devices]
            opts["cap_add"] = ["IPC_LOCK"]
        if self.host_network:
            opts["network_mode"] = "host"
        else:
            opts["network"] = self.config.network
            opts["hostname"] = name
        return opts

    def run(self, req: LaunchRequest) -> RunOutcome:
        """One run on every node: the containers made, started and watched; the first node that
        fails stops the others. Containers and networks this run made are removed in the end,
        on Ctrl-C and SIGTERM too."""
        run_id = run_id_of(req.run_dir)
        launch = f"{run_id}-{uuid.uuid4().hex[:8]}"
        per_node = self.config.gpus_per_node or req.nproc
        shown = ["docker", "run", self.image, *self.command(0, per_node, launch)]
        t0 = time.perf_counter()
        if req.device == "cuda" and (error := self._gpu_styles()):
            return RunOutcome(None, False, False, 0.0, shown, error, nodes=[])
        spec = (req.run_dir / files.SPEC).read_bytes()
        containers: list[Any] = [None] * len(self.nodes)
        addresses: list[str | None] = [None] * len(self.nodes)
        networks: list[Any] = []
        lock = threading.Lock()
        with open(req.log_path, "ab") as combined:
            combined.write(
                f"$ {len(self.nodes)} nodes x {per_node} processes: {' '.join(shown)}\n".encode()
            )
            logs = [
                NodeLog(node_log_path(req.log_path, n.index), combined, lock, f"[node{n.index}] ")
                for n in self.nodes
            ]
            try:
                if not self.host_network:
                    self._networks(networks)
                self._create(req, spec, containers, logs, run_id, launch, per_node)
                self._start(containers, addresses)
                states, failed, timed_out = self._watch(containers, logs, req)
                records = self._records(states, failed, timed_out, req.log_path, per_node)
                extra = {
                    k: v
                    for k, v in self.node_env({}, req.device).items()
                    if k in self.config.env or k.endswith("_SOCKET_IFNAME")
                }
                for record, address in zip(records, addresses, strict=True):
                    record.address, record.env = address, extra
                return self._outcome(records, failed, timed_out, time.perf_counter() - t0, shown)
            except _NodeRefused as exc:  # before the run started on every node
                spent = time.perf_counter() - t0
                return RunOutcome(None, False, False, spent, shown, str(exc), nodes=[])
            except faults() as exc:  # a container or a daemon failed under the run
                spent = time.perf_counter() - t0
                return RunOutcome(None, False, False, spent, shown, fault_reason(exc), nodes=[])
            finally:
                # also on KeyboardInterrupt / SIGTERM (raised in this thread by the driver)
                for c in containers:
                    if c is not None:
                        with contextlib.suppress(*faults()):
                            remove_container(c)
                for network in networks:
                    with contextlib.suppress(*faults()):
                        remove_network(network)
                for log in logs:
                    if not log.file.closed:
                        log.file.close()

    def _gpu_styles(self) -> str | None:
        """How each node's daemon is asked for GPUs, learnt once per node; the one line why
        not where a node has no way (no NVIDIA container toolkit)."""
        for node in self.nodes:
            style = self.gpu_styles.get(node.index) or gpus.style(node.client)
            if style is None:
                return f"node {node.index} ({node.url}): {gpus.TOOLKIT_HINT}"
            self.gpu_styles[node.index] = style
        return None

    def _networks(self, made: list[Any]) -> None:
        """The run's bridge network on each daemon the nodes share; those made here are added to
        `made` as they are made, so that the caller removes them whatever fails next."""
        for client in {id(n.client): n.client for n in self.nodes}.values():
            network = ensure_network(client, self.config.network, self.owner)
            if network is not None:
                made.append(network)

    def _create(
        self,
        req: LaunchRequest,
        spec: bytes,
        containers: list[Any],
        logs: list[NodeLog],
        run_id: str,
        launch: str,
        per_node: int,
    ) -> None:
        """Each node's container, made with the spec copied in (nothing is bind-mounted: the
        daemons may sit on other machines); a node that refuses raises _NodeRefused."""
        import docker

        for node, log in zip(self.nodes, logs, strict=True):
            try:
                opts = self.container_options(
                    node, run_id, launch, per_node, req.env, req.gpu_ids, req.device
                )
            except KitError as exc:  # a GPU the node's CDI spec does not declare
                raise _NodeRefused(f"node {node.index} ({node.url}): {exc}") from None
            log.file.write(f"$ {' '.join(opts['command'])}\n".encode())
            try:
                containers[node.index] = node.client.containers.create(**opts)
                containers[node.index].put_archive(MOUNT, tar_of({files.SPEC: spec}))
            except docker.errors.APIError as exc:
                raise _NodeRefused(f"node {node.index} ({node.url}): {launch_error(exc)}") from None

    def _start(self, containers: list[Any], addresses: list[str | None]) -> None:
        """Every node's container started, and the address the rendezvous reaches it at."""
        import docker

        for node in self.nodes:
            try:
                containers[node.index].start()
                addresses[node.index] = _address(containers[node.index], self.config)
            except docker.errors.APIError as exc:
                raise _NodeRefused(f"node {node.index} ({node.url}): {launch_error(exc)}") from None

    def _watch(
        self, containers: list[Any], logs: list[NodeLog], req: LaunchRequest
    ) -> tuple[list[dict[str, Any]], int | None, bool]:
        """Every node's log streamed while the containers run; the first that fails, or the
        timeout, stops the rest; the result copied out of the first container that has it."""
        streamers = [
            threading.Thread(target=stream_logs, args=(c, log), daemon=True)
            for c, log in zip(containers, logs, strict=True)
        ]
        for s in streamers:
            stop.start_thread(s)
        states, failed, timed_out = watch(containers, req.timeout_s)
        if failed is not None or timed_out:
            stop_all(containers, states)
        for s in streamers:
            s.join(timeout=10)
        for c in containers:
            if copy_out(c, req.run_dir):
                break
        for log in logs:
            log.close()
        return states, failed, timed_out

    def _records(
        self,
        states: list[dict[str, Any]],
        failed: int | None,
        timed_out: bool,
        log_path: Path,
        nproc_per_node: int,
    ) -> list[NodeRecord]:
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
            record = NodeRecord(
                node=node.index,
                host=node.url,
                status=status,
                exit_code=state.get("exit_code"),
                nproc=nproc_per_node,
                log=f"logs/{path.name}",
            )
            if status != "ok":
                record.log_tail = tail(path)
            records.append(record)
        return records

    def _outcome(
        self,
        records: list[NodeRecord],
        failed: int | None,
        timed_out: bool,
        wall_s: float,
        shown: list[str],
    ) -> RunOutcome:
        if failed is not None:
            r = records[failed]
            how = (
                "its container vanished"
                if r.status == "vanished"
                else f"exited with status {r.exit_code}"
            )
            others = [x.node for x in records if x.status == "stopped"]
            error = f"node {failed} ({r.host}) {how}"
            if others:
                error += f"; stopped node(s) {', '.join(map(str, others))}"
            return RunOutcome(r.exit_code, False, False, wall_s, shown, error, nodes=records)
        if timed_out:
            return RunOutcome(None, True, False, wall_s, shown, None, nodes=records)
        return RunOutcome(0, False, False, wall_s, shown, None, nodes=records)


class _NodeRefused(Exception):
    """A node refused the run before it started on every node: the one line saying which."""


def _address(container: Any, config: NodeConfig) -> str | None:
    """The node's address: its container's on a bridge network, its host's on the host network."""
    if config.network == "host":
        return None
    container.reload()
    nets = container.attrs.get("NetworkSettings", {}).get("Networks") or {}
    return (nets.get(config.network) or {}).get("IPAddress") or None


def prepare_runtime(request: RuntimeRequest) -> MultiNodeRuntime:
    """Connect to every node, put the pinned image on each, take each node's inventory: the
    request's nodes (a NodeConfig), its environment's image, its device."""
    config: NodeConfig = request.nodes
    nodes = connect_all(config)
    for client in {id(n.client): n.client for n in nodes}.values():
        cleanup_abandoned(client)  # containers of drivers of this host that were killed
    first = nodes[0].client
    styles: dict[int, gpus.GpuStyle] = {}
    if request.device == "cuda":
        for node in nodes:
            style = gpus.style(node.client)
            if style is None:
                raise KitError(f"node {node.index} ({node.url}): {gpus.TOOLKIT_HINT}")
            styles[node.index] = style
    image, state = archives.obtain(
        request.environment, request.base_image, request.image_archive, first
    )
    out = images.console()
    out.print(f"kit: environment {image.env}: {state} image {image.tag} (node 0)")
    placed = ensure_image(nodes, image.tag, echo=out.print)
    container = fp.probe(image.tag, first, DockerContainer.probe_gpus(styles.get(0)))
    runtime = MultiNodeRuntime(image.tag, nodes, config)
    runtime.gpu_styles = styles
    runtime.environment = {
        **axes_record("multinode", DockerContainer.engine),
        **fp.fingerprint(
            image, container, runtime=MultiNodeRuntime.name, archive=request.image_archive
        ),
    }
    if styles:
        runtime.environment["gpu_request"] = ", ".join(sorted({s.name for s in styles.values()}))
    runtime.environment["nodes"] = placed
    runtime.inventory = probe_nodes(nodes, image.tag, config)
    out.print(
        f"kit: {len(nodes)} nodes x {config.gpus_per_node or request.gpus} processes,"
        f" rendezvous c10d on {runtime.rdzv_endpoint('<run>')} ({config.network} network)"
    )
    return runtime
