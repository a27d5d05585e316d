"""Multi-node runs against the real Docker daemon: two containers on a user-defined bridge network
act as two nodes (each with its own address), joined by torchrun's c10d rendezvous, running the
all-reduce worker with gloo. A node killed mid-run must stop the other, be named in the run's
result, and leave no container, network or volume with kit's labels behind.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kit.run.multinode.config import NodeConfig
from kit.run.multinode.runtime import MultiNodeRuntime
from kit.run.multinode.transport import LABEL_NODE, Node
from kit.runtime.base import LaunchRequest
from kit.runtime.images import image as images
from tests.conftest import docker_or_skip, sigint_as_default

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.cpu_image]

ROOT = Path(__file__).resolve().parents[2]

BASE = os.environ.get("KIT_TEST_BASE_IMAGE", "kit-test-base:bookworm")
SOCKET = "unix:///var/run/docker.sock"
# one per test process: pytest-xdist runs this module's tests on several workers at once, and each
# asserts the network is gone after its run (the runtime removes the one it made)
NETWORK = f"kit-test-multinode-{os.getpid()}"
PY = sys.executable
# what this test session's drivers create carries this owner; the tests touch nothing else
OWNER = f"kit-test-{os.getpid()}-{os.urandom(4).hex()}"


@pytest.fixture(autouse=True)
def _own_label(monkeypatch):
    """Runtimes made in this process label their containers with this session's owner too."""
    monkeypatch.setenv("KIT_OWNER", OWNER)


@pytest.fixture(scope="module")
def client():
    return docker_or_skip(300)


@pytest.fixture(scope="module")
def image(client):
    """The cpu environment's image (built from the local base image, or reused)."""
    import docker

    try:
        client.images.get(BASE)
    except docker.errors.ImageNotFound:
        pytest.skip(f"needs the base image {BASE}: as root, bash scripts/ci-docker.sh")
    return images.build("cpu", base_image_override=BASE, client=client, echo=lambda _: None)


def _kit_things(client) -> dict[str, list[str]]:
    """Containers, networks and volumes of this test session's owner (nobody else's)."""
    mine = {"label": f"kit.owner={OWNER}"}
    return {
        "containers": [c.name for c in client.containers.list(all=True, filters=mine)],
        "networks": [n.name for n in client.networks.list(filters=mine)],
        "volumes": [v.name for v in client.volumes.list(filters=mine)],
        "test network": [n.name for n in client.networks.list(names=[NETWORK])],
    }


def _nothing_left(client) -> None:
    assert _kit_things(client) == {"containers": [], "networks": [], "volumes": [],
                                   "test network": []}  # fmt: skip


def _recipe(
    tmp_path: Path, iters: int, gpus: int = 2, max_bytes: int = 4096, trials: int = 1
) -> Path:
    path = tmp_path / "recipe.yaml"
    path.write_text(
        f"""kit: 1
name: multinode-smoke
description: all-reduce across two container nodes, gloo, c10d rendezvous
environment: cpu
gpus: {gpus}
repeats: 1
timeout_s: 240
variants: [p2p]
nodes:
  hosts: ["{SOCKET}", "{SOCKET}"]
  network: {NETWORK}
  nccl_socket_ifname: eth0
  env: {{GLOO_DEVICE_TRANSPORT: TCP}}  # a tuning variable (gloo's default): the node section reaches the ranks
benchmarks:
  - kind: allreduce
    params: {{min_bytes: 8, max_bytes: {max_bytes}, factor: 8, iters: {iters}, warmup_iters: 1, trials: {trials}}}
"""
    )
    return path


def _reproduce(recipe: Path, out: Path) -> list[str]:
    return [PY, "-m", "kit.cli", "reproduce", str(recipe), "--device", "cpu", "--smoke",
            "--env", "cpu", "--base-image", BASE, "--out", str(out)]  # fmt: skip


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "KIT_OWNER": OWNER}


def test_allreduce_across_two_container_nodes(client, image, tmp_path):
    out = tmp_path / "bundle"
    proc = subprocess.run(_reproduce(_recipe(tmp_path, iters=3), out), capture_output=True,
                          text=True, env=_env(), timeout=240)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads((out / "results.json").read_text())
    assert results["status"] == "complete" and results["runtime"] == "multinode"
    (run,) = results["runs"]
    assert run["status"] == "ok", run.get("error")
    assert run["world_size"] == 4 and run["backend"] == "gloo"  # 2 nodes x 2 processes
    assert run["metrics"]["wrong_total"]["value"] == 0
    assert run["metrics"]["busbw_peak"]["value"] > 0
    assert run["env"]["GLOO_DEVICE_TRANSPORT"] == "TCP"
    assert [n["status"] for n in run["nodes"]] == ["ok", "ok"]
    addresses = [n["address"] for n in run["nodes"]]
    assert all(addresses) and len(set(addresses)) == 2, addresses  # each node its own address
    assert run["network"] == {"transport": ["gloo/TCP"]}
    # every node's own log, and the combined one
    for i in (0, 1):
        log = (out / "logs" / f"allreduce.p2p.r0.node{i}.log").read_text()
        assert "--rdzv-backend=c10d" in log and f"is_host={int(i == 0)}" in log
    combined = (out / "logs" / "allreduce.p2p.r0.log").read_text()
    assert "[node0]" in combined and "busbw" in combined
    # per-node inventory: each node's interface on the bridge network, with its speed
    hardware = json.loads((out / "hardware.json").read_text())
    assert [n["node"] for n in hardware["nodes"]] == [0, 1]
    for n in hardware["nodes"]:
        eth0 = next(i for i in n["interfaces"] if i["name"] == "eth0")
        assert eth0["address"] and eth0["state"] == "up" and eth0["mtu"] > 0
    env = json.loads((out / "environment.json").read_text())
    assert [n["image_id"] for n in env["nodes"]] == [image.image_id] * 2
    report = (out / "report.html").read_text()
    assert "<h3>Nodes</h3>" in report and "gloo/TCP" in report
    verify = subprocess.run([PY, "-m", "kit.cli", "verify", str(out)], capture_output=True,
                            text=True, env=_env())  # fmt: skip
    assert verify.returncode == 0, verify.stdout + verify.stderr
    _nothing_left(client)


def _workers_running(container) -> bool:
    """True when torchrun has started its worker processes in the container."""
    try:
        procs = container.top()["Processes"] or []
    except Exception:
        return False
    return sum("kit.worker" in " ".join(p) for p in procs) >= 3  # torchrun + 2 workers


def test_killing_one_node_mid_run_stops_the_other(client, image, tmp_path):
    out = tmp_path / "bundle"
    recipe = _recipe(tmp_path, iters=10**6, trials=10**4, max_bytes=8)  # all-reduces until stopped
    proc = subprocess.Popen(_reproduce(recipe, out), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=_env())  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        nodes: dict[str, object] = {}
        while not (len(nodes) == 2 and all(_workers_running(c) for c in nodes.values())):
            assert proc.poll() is None, proc.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "the two nodes' workers never ran"
            found = client.containers.list(filters={"label": [LABEL_NODE, f"kit.owner={OWNER}"]})
            nodes = {c.labels[LABEL_NODE]: c for c in found}
            time.sleep(0.3)
        time.sleep(3)  # rendezvous done, process group up, all-reducing
        killed_at = time.monotonic()
        nodes["1"].kill()
        _, err = proc.communicate(timeout=120)
        stopped_after = time.monotonic() - killed_at
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, err[-3000:]
    assert "Traceback" not in err
    assert stopped_after < 60
    results = json.loads((out / "results.json").read_text())
    assert results["status"] == "failed"  # its one run failed
    (run,) = results["runs"]
    assert run["status"] == "failed"
    assert run["error"].startswith("node 1 (unix:///var/run/docker.sock) exited with status 137")
    assert run["exit_code"] == 137
    node0, node1 = run["nodes"]
    assert node1["status"] == "failed" and node1["exit_code"] == 137
    # node 0 ends either because the driver stopped it or because its gloo peer went away
    assert node0["status"] in ("stopped", "failed") and node0["exit_code"] not in (0, None)
    assert "log_tail" in node1 and run["log_tail"].startswith("[node 1]")
    assert (out / "logs" / "allreduce.p2p.r0.node1.log").is_file()
    assert (out / "MANIFEST.sha256").is_file()
    _nothing_left(client)


def _spec(run_dir: Path) -> None:
    run_dir.mkdir(parents=True)
    spec = {"schema": 1, "run_id": "mn.kill.r0", "benchmark": "allreduce", "kind": "allreduce",
            "variant": "p2p", "repeat": 0, "device": "cpu", "nproc": 1, "smoke": True,
            "params": {"min_bytes": 8, "max_bytes": 8, "iters": 10**6, "warmup_iters": 0,
                       "trials": 10**4}, "env": {}, "result_path": "result.json"}  # fmt: skip
    (run_dir / "spec.json").write_text(json.dumps(spec))


def test_node_lost_before_the_rendezvous_is_stopped_by_the_driver(client, image, tmp_path):
    """Node 1 dies before it joins: node 0 would wait for it (torchrun's join timeout is 10
    minutes); the driver must stop it at once and say which node failed."""
    import threading

    config = NodeConfig(hosts=[SOCKET, SOCKET], network=NETWORK)
    runtime = MultiNodeRuntime(image.tag, [Node(0, SOCKET, client), Node(1, SOCKET, client)],
                               config)  # fmt: skip
    run_dir = tmp_path / "run"
    _spec(run_dir)
    log = tmp_path / "mn.kill.r0.log"

    def kill_node1() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            for c in client.containers.list(
                filters={"label": [f"{LABEL_NODE}=1", f"kit.owner={OWNER}"]}, sparse=True
            ):
                c.kill()
                return
            time.sleep(0.05)

    killer = threading.Thread(target=kill_node1)
    killer.start()
    t0 = time.monotonic()
    outcome = runtime.run(LaunchRequest(run_dir, 1, {}, log, 200, None, "cpu"))
    killer.join()
    assert time.monotonic() - t0 < 60
    assert outcome.error is not None and outcome.error.startswith("node 1 ")
    assert outcome.error.endswith("stopped node(s) 0")
    node0, node1 = outcome.nodes
    assert node1.status == "failed" and node1.exit_code == 137  # kit.model NodeRecord
    assert node0.status == "stopped"
    assert not (run_dir / "result.json").exists()
    assert (tmp_path / "mn.kill.r0.node0.log").is_file()
    _nothing_left(client)


def test_a_node_refusing_its_gpus_fails_the_run_in_one_line_and_leaves_nothing(
    client, image, tmp_path, monkeypatch
):
    """Node 0's container is made; node 1's CDI spec lacks GPU 1, so node 1 refuses before any
    container of it exists: the run fails naming node 1, and node 0's container and the
    network are removed (ci-docker.sh's CDI test kind stands in for nvidia.com/gpu)."""
    from kit.runtime.containers import gpus

    config = NodeConfig(hosts=[SOCKET, SOCKET], network=NETWORK)
    runtime = MultiNodeRuntime(image.tag, [Node(0, SOCKET, client), Node(1, SOCKET, client)],
                               config)  # fmt: skip
    kind = "kit.test/gpu"
    runtime.gpu_styles = {
        0: gpus.Cdi(kind, devices=frozenset({"0", "1", "all"})),
        1: gpus.Cdi(kind, devices=frozenset({"0"})),
    }
    from docker.models.containers import ContainerCollection

    made: list[str] = []
    create = ContainerCollection.create

    def recorded(self, *args, **opts):
        made.append(opts["labels"][LABEL_NODE])
        return create(self, *args, **opts)

    monkeypatch.setattr(ContainerCollection, "create", recorded)
    run_dir = tmp_path / "run"
    _spec(run_dir)
    outcome = runtime.run(LaunchRequest(run_dir, 1, {}, tmp_path / "mn.r0.log", 60, [0, 1], "cuda"))
    assert made == ["0"]  # node 0's container existed when node 1 refused
    assert outcome.error is not None and outcome.error.startswith(f"node 1 ({SOCKET}): ")
    assert "\n" not in outcome.error and outcome.exit_code is None
    _nothing_left(client)


def test_ctrl_c_removes_every_node(client, image, tmp_path):
    import signal

    out = tmp_path / "bundle"
    proc = subprocess.Popen(_reproduce(_recipe(tmp_path, iters=10**6, trials=10**4, max_bytes=8), out),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=_env(), preexec_fn=sigint_as_default)  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while (
            len(
                client.containers.list(
                    filters={"label": [LABEL_NODE, f"kit.owner={OWNER}"]}, sparse=True
                )
            )
            < 2
        ):
            assert proc.poll() is None, proc.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "the nodes never started"
            time.sleep(0.2)
        time.sleep(2)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err[-3000:]
    assert "Traceback" not in err
    results = json.loads((out / "results.json").read_text())
    assert results["status"] == "interrupted"
    assert [r["status"] for r in results["runs"]] == ["failed"]
    assert (out / "MANIFEST.sha256").is_file()
    _nothing_left(client)
