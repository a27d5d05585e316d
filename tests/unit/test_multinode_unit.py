"""Multi-node pieces that need no daemon: the recipe section, the launch options each node's
container gets, the run result's node records, the node inventory and its report table.

The same runtime against a real daemon: tests/integration/test_multinode_docker.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kit.io.errors import InputError, KitError
from kit.model import Hardware, NodeInventory, NodeRecord
from kit.recipe import load_recipe
from kit.report import analysis
from kit.report.render import nodes_view
from kit.run.multinode.config import NodeConfig, host_of, node_config
from kit.run.multinode.runtime import MultiNodeRuntime
from kit.run.multinode.transport import LABEL_NODE, Node, node_inventory, node_log_path
from kit.run.results import annotate_result
from kit.runtime.base import RunOutcome
from kit.runtime.containers import gpus
from kit.shared.nccl_log import contradiction
from kit.worker import nodeinfo
from tests.conftest import results_model

RECIPE = """\
kit: 1
name: two-nodes
gpus: 8
benchmarks:
  - kind: allreduce
nodes:
  hosts: ["unix:///var/run/docker.sock", "ssh://kit@node2"]
  gpus_per_node: 8
  rdzv_port: 29500
  nccl_socket_ifname: ens1f0
  env: {NCCL_IB_HCA: mlx5}
"""


def _load(tmp_path: Path, text: str):
    path = tmp_path / "r.yaml"
    path.write_text(text)
    return load_recipe(path)


def _error(tmp_path: Path, text: str) -> str:
    with pytest.raises(InputError) as info:
        _load(tmp_path, text)
    assert info.value.exit_code == 2
    return str(info.value)


def test_recipe_nodes_section(tmp_path):
    nodes = _load(tmp_path, RECIPE).nodes
    assert nodes.hosts == ["unix:///var/run/docker.sock", "ssh://kit@node2"]
    assert (nodes.gpus_per_node, nodes.rdzv_port, nodes.network) == (8, 29500, "host")
    assert nodes.env == {"NCCL_IB_HCA": "mlx5"}
    assert _load(tmp_path, RECIPE.split("nodes:")[0]).nodes is None


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        (
            '"ssh://kit@node2"',
            '"node2"',
            "r.yaml:7: nodes.hosts: 'node2' is not a Docker daemon URL; allowed: unix://PATH,"
            " ssh://[USER@]HOST, tcp://HOST:PORT",
        ),
        (
            "rdzv_port: 29500",
            "rdzv_port: 70000",
            "r.yaml:9: nodes.rdzv_port: input should be less than or equal to 65535",
        ),
        (
            "  gpus_per_node: 8",
            "  gpus_per_node: 8\n  colour: red",
            "r.yaml:9: nodes.colour: unknown key",
        ),
        (
            "  gpus_per_node: 8",
            "  gpus_per_node: 8\n  network: kit-net",
            "r.yaml:9: nodes.network: 'kit-net': a bridge network joins the containers of one"
            " daemon only; nodes on several daemons need `network: host`",
        ),
        (
            'hosts: ["unix:///var/run/docker.sock", "ssh://kit@node2"]',
            "hosts: []",
            "r.yaml:7: nodes.hosts: list should have at least 1 item after validation, not 0",
        ),
    ],
)
def test_recipe_nodes_errors_name_file_line_and_field(tmp_path, old, new, expected):
    assert old in RECIPE
    assert _error(tmp_path, RECIPE.replace(old, new)) == f"{tmp_path}/{expected}"


def test_cli_nodes_replace_the_recipe_hosts(tmp_path):
    recipe = _load(tmp_path, RECIPE)
    config = node_config(recipe.nodes, ("tcp://a:2376", "tcp://b:2376"))
    assert config.hosts == ["tcp://a:2376", "tcp://b:2376"]
    assert config.rdzv_port == 29500 and config.nccl_socket_ifname == "ens1f0"
    assert node_config(None, ()) is None
    assert node_config(None, ("ssh://x",)).hosts == ["ssh://x"]
    with pytest.raises(InputError, match=r"^--nodes: hosts: 'node2' is not a Docker daemon URL"):
        node_config(None, ("node2",))


def test_host_of_daemon_urls():
    import socket

    assert host_of("ssh://kit@node2:2222") == "node2"
    assert host_of("tcp://10.0.0.3:2376") == "10.0.0.3"
    assert host_of("unix:///var/run/docker.sock") == socket.gethostname()


def _runtime(network: str = "host", **kw) -> MultiNodeRuntime:
    config = NodeConfig(hosts=["ssh://kit@node1", "ssh://kit@node2"], network=network,
                        nccl_socket_ifname="ens1f0", env={"NCCL_IB_HCA": "mlx5"}, **kw)  # fmt: skip
    nodes = [Node(0, config.hosts[0], None), Node(1, config.hosts[1], None, ["/dev/infiniband"])]
    runtime = MultiNodeRuntime("kit-cuda13:abc", nodes, config)
    # as prepare_runtime found them: node 0's daemon has the NVIDIA runtime, node 1's CDI
    runtime.gpu_styles = {0: gpus.NvidiaRuntime(), 1: gpus.Cdi(devices=frozenset({"all"}))}
    return runtime


def test_host_network_launch_options():
    rt = _runtime()
    opts = [
        rt.container_options(n, "ar.p2p.r0", "L", 8, {"NCCL_P2P_DISABLE": "1"}, None, "cuda")
        for n in rt.nodes
    ]
    assert opts[0]["command"] == [
        "torchrun", "--nnodes=2", "--nproc-per-node=8", "--rdzv-backend=c10d",
        "--rdzv-endpoint=node1:29400", "--rdzv-id=L", "--rdzv-conf=is_host=1",
        "--max-restarts=0", "-m", "kit.worker", "/kit/run/spec.json",
    ]  # fmt: skip
    assert "--rdzv-conf=is_host=0" in opts[1]["command"]
    for i, o in enumerate(opts):
        assert o["network_mode"] == "host" and "hostname" not in o and "network" not in o
        assert o["labels"][LABEL_NODE] == str(i) and o["labels"]["kit.run"] == "ar.p2p.r0"
        assert o["environment"]["NCCL_SOCKET_IFNAME"] == "ens1f0"
        assert o["environment"]["GLOO_SOCKET_IFNAME"] == "ens1f0"
        assert o["environment"]["NCCL_IB_HCA"] == "mlx5"
        assert o["environment"]["NCCL_P2P_DISABLE"] == "1"
        assert "volumes" not in o  # the daemon may be on another machine: files are copied
    assert opts[0]["device_requests"][0]["Count"] == -1  # each node in its daemon's style
    assert opts[1]["device_requests"][0]["DeviceIDs"] == ["nvidia.com/gpu=all"]
    assert opts[1]["device_requests"][0]["Driver"] == "cdi"
    assert "devices" not in opts[0]
    assert opts[1]["devices"] == ["/dev/infiniband:/dev/infiniband"]
    assert opts[1]["cap_add"] == ["IPC_LOCK"]


def test_rendezvous_host_override_and_bridge_network():
    assert _runtime(rdzv_host="10.1.0.1", rdzv_port=29555).rdzv_endpoint("L") == "10.1.0.1:29555"
    rt = _runtime(network="kit-net")
    o = rt.container_options(rt.nodes[1], "r", "L", 2, {}, [0, 1], "cpu")
    assert o["network"] == "kit-net" and o["hostname"] == "kit-L-node1"
    assert "--rdzv-endpoint=kit-L-node0:29400" in o["command"]
    assert o["device_requests"] == [] and o["environment"]["OMP_NUM_THREADS"] == "1"


def test_node_log_path():
    assert node_log_path(Path("b/logs/ar.p2p.r0.log"), 3) == Path("b/logs/ar.p2p.r0.node3.log")


def _node_records(status1: str = "failed") -> list[dict]:
    return [
        {"node": 0, "host": "ssh://a", "status": "stopped", "exit_code": 143, "nproc": 2,
         "env": {"NCCL_SOCKET_IFNAME": "eth0"}},
        {"node": 1, "host": "ssh://b", "status": status1, "exit_code": 1, "nproc": 2,
         "log_tail": "RuntimeError: boom", "env": {"NCCL_SOCKET_IFNAME": "eth0"}},
    ]  # fmt: skip


def _nodes(status1: str = "failed") -> list[NodeRecord]:
    return [NodeRecord.model_validate(r) for r in _node_records(status1)]


def test_node_records_and_the_outcome_name_the_failed_node(tmp_path):
    """What the runtime makes of its containers' states: each node's record (typed), the
    failed node named with its daemon, the others stopped by the driver."""
    rt = _runtime()
    log = tmp_path / "logs" / "ar.p2p.r0.log"
    log.parent.mkdir()
    node_log_path(log, 1).write_text("RuntimeError: boom\n")
    states = [{"status": "stopped", "exit_code": 143}, {"status": "exited", "exit_code": 1}]
    records = rt._records(states, 1, False, log, 8)
    assert [(r.node, r.host, r.status, r.exit_code, r.nproc) for r in records] == [
        (0, "ssh://kit@node1", "stopped", 143, 8), (1, "ssh://kit@node2", "failed", 1, 8),
    ]  # fmt: skip
    assert records[1].log == "logs/ar.p2p.r0.node1.log"
    assert records[1].log_tail == "RuntimeError: boom" and records[0].log_tail == ""
    outcome = rt._outcome(records, 1, False, 2.0, ["torchrun"])
    assert outcome.exit_code == 1 and outcome.nodes == records
    assert outcome.error == "node 1 (ssh://kit@node2) exited with status 1; stopped node(s) 0"
    ok = rt._records([{"status": "exited", "exit_code": 0}] * 2, None, False, log, 8)
    assert [r.status for r in ok] == ["ok", "ok"] and ok[0].log_tail is None
    assert "log_tail" not in ok[0].dump(as_written=True)  # an ok node's record has no tail
    assert rt._outcome(ok, None, False, 2.0, []).exit_code == 0


def test_failed_node_is_named_in_the_result():
    (result,) = results_model([{"status": "failed", "world_size": 2, "device": "cpu",
                                "error": "worker exited with status 1 and wrote no result",
                                "env": {"NCCL_P2P_DISABLE": "1"}}]).runs  # fmt: skip
    outcome = RunOutcome(1, False, False, 3.0, [], "node 1 (ssh://b) exited with status 1; "
                         "stopped node(s) 0", nodes=_nodes())  # fmt: skip
    annotate_result(result, outcome)
    assert result.error == (
        "node 1 (ssh://b) exited with status 1; stopped node(s) 0; "
        "worker exited with status 1 and wrote no result"
    )
    assert result.log_tail == "[node 1]\nRuntimeError: boom"
    assert result.world_size == 4  # the driver's record: 2 nodes x 2 processes
    assert result.env == {"NCCL_SOCKET_IFNAME": "eth0", "NCCL_P2P_DISABLE": "1"}
    assert result.network is not None and result.network.transport == ["gloo/TCP"]
    assert (
        result.nodes is not None
        and [n.dump(as_written=True) for n in result.nodes] == _node_records()
    )
    assert (result.nodes[1].status, result.nodes[1].nproc) == ("failed", 2)
    # what results.json holds reads back as the same result
    assert results_model([result.dump(as_written=True)]).runs[0] == result


def test_network_transport_from_nccl_and_no_false_p2p_verdict():
    (result,) = results_model([{
        "status": "ok", "started_at": "x", "world_size": 2, "device": "cuda", "env": {},
        "nccl": {"transports": {"NET/IB": 8}},
    }]).runs  # fmt: skip
    annotate_result(result, RunOutcome(0, False, False, 1.0, [], nodes=_nodes("ok")))
    assert result.network is not None and result.network.transport == ["NET/IB"]
    assert result.world_size == 2  # the worker's own record stays
    # across nodes NET is the only way: no contradiction, at the run and in the report
    assert contradiction({"NET/IB": 8}, p2p_disabled=False, single_node=False) is None
    assert analysis.nccl_contradiction(result) is None
    # the same transports on one node did avoid P2P
    assert contradiction({"NET/IB": 8}, p2p_disabled=False, single_node=True).startswith(
        "P2P was allowed"
    )
    (mixed,) = results_model([{"status": "ok", "started_at": "x", "device": "cuda", "run_id": "m",
                               "env": {}, "nccl": {"transports": {"NET/Socket": 4, "SHM": 4}}}]).runs  # fmt: skip
    annotate_result(mixed, RunOutcome(0, False, False, 1.0, [], nodes=_nodes("ok")))
    assert mixed.network is not None and mixed.network.transport == ["NET/Socket"]
    # SHM inside a node: still a contradiction
    assert analysis.nccl_contradiction(mixed).startswith("m: P2P was allowed")


def _fake_sysfs(root: Path) -> tuple[Path, Path]:
    net, ib = root / "net", root / "ib"
    for name, speed, kind in (("kit9f0", "25000", "1"), ("ib0", "400000", "32"), ("lo", "", "772"),
                              ("veth1", "-1", "1")):  # fmt: skip
        d = net / name
        d.mkdir(parents=True)
        (d / "speed").write_text(speed + "\n")
        (d / "type").write_text(kind + "\n")
        (d / "mtu").write_text("9000\n")
        (d / "operstate").write_text("up\n")
        (d / "address").write_text("aa:bb\n")
        if name != "veth1":
            (d / "device").mkdir()
    port = ib / "mlx5_0" / "ports" / "1"
    port.mkdir(parents=True)
    (port / "rate").write_text("400 Gb/sec (4X NDR)\n")
    (port / "state").write_text("4: ACTIVE\n")
    (port / "link_layer").write_text("InfiniBand\n")
    return net, ib


def test_node_inventory_reads_sysfs(tmp_path):
    net, ib = _fake_sysfs(tmp_path)
    found = {i["name"]: i for i in nodeinfo.interfaces(net)}
    assert sorted(found) == ["ib0", "kit9f0", "veth1"]
    assert found["kit9f0"]["speed_mbps"] == 25000 and found["kit9f0"]["kind"] == "ethernet"
    assert found["ib0"]["kind"] == "infiniband" and found["ib0"]["mtu"] == 9000
    assert found["veth1"]["speed_mbps"] is None and found["veth1"]["kind"] == "virtual"
    assert nodeinfo.infiniband(ib) == [
        {"device": "mlx5_0", "port": 1, "rate": "400 Gb/sec (4X NDR)", "state": "4: ACTIVE",
         "link_layer": "InfiniBand"}
    ]  # fmt: skip
    assert nodeinfo.interfaces(tmp_path / "absent") == []
    info = nodeinfo.collect()  # this machine, for real
    assert info["cpus"] >= 1 and info["mem_total_bytes"] > 0 and info["hostname"]


def test_a_node_inventory_is_typed_as_hardware_json_records_it():
    """A node's nodeinfo line becomes hardware.json's typed record of it (this machine's, for
    real), written in the order the probe gave it; a malformed one is one line naming it."""
    line = json.dumps(nodeinfo.collect())
    record = node_inventory(Node(1, "ssh://b", None), line)
    assert isinstance(record, NodeInventory) and record.node == 1 and record.host == "ssh://b"
    assert record.cpus >= 1 and all(i.name for i in record.interfaces)
    assert list(record.dump(as_written=True)) == ["node", "host", *json.loads(line)]
    with pytest.raises(KitError, match=r"^inventory failed: node 1 \(ssh://b\): cpus: expected"):
        node_inventory(Node(1, "ssh://b", None), json.dumps({"hostname": "b", "cpus": "many"}))
    with pytest.raises(KitError, match=r"node 1 \(ssh://b\): inventory failed \(not a JSON obj"):
        node_inventory(Node(1, "ssh://b", None), "[1, 2]")


def test_report_nodes_table(tmp_path):
    net, ib = _fake_sysfs(tmp_path)
    hw = {"nodes": [{"node": 0, "host": "ssh://a", "hostname": "a", "cpus": 64,
                     "mem_total_bytes": 2**40, "interfaces": nodeinfo.interfaces(net),
                     "infiniband": nodeinfo.infiniband(ib),
                     "gpus": [{"name": "NVIDIA H200"}, {"name": "NVIDIA H200"}]}]}  # fmt: skip
    results = results_model([{"variant": "p2p", "network": {"transport": ["NET/IB"]}},
                             {"variant": "p2p", "network": {"transport": ["NET/IB"]}}])  # fmt: skip
    view = nodes_view(Hardware.model_validate(hw), results)
    (row,) = view["rows"]
    assert row["gpus"] == "2 x NVIDIA H200" and row["memory"] == "1 TiB"
    assert "kit9f0 25 Gb/s MTU 9000 (up)" in row["network"]
    assert "mlx5_0 port 1: 400 Gb/sec (4X NDR) (4: ACTIVE, InfiniBand)" in row["network"]
    assert view["transports"] == {"p2p": ["NET/IB"]}
    assert nodes_view(Hardware(), results) is None
