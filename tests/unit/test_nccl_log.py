"""NCCL transport detection from NCCL_DEBUG=INFO logs (excerpts in NCCL's real formats)."""

from __future__ import annotations

from kit.shared.nccl_log import parse_nccl_log, transport_key, verdict

P2P_LOG = """\
h200-node:48211:48211 [0] NCCL INFO Bootstrap: Using eth0:10.0.3.7<0>
h200-node:48211:48211 [0] NCCL INFO cudaDriverVersion 13000
h200-node:48211:48211 [0] NCCL INFO NCCL version 2.28.9+cuda13.0
h200-node:48211:48290 [0] NCCL INFO NCCL_NVLS_ENABLE set by environment to 0.
h200-node:48211:48290 [0] NCCL INFO comm 0x55d0c1a2b3c0 rank 0 nRanks 2 nNodes 1 localRanks 2
h200-node:48211:48290 [0] NCCL INFO Channel 00/24 : 0 1
h200-node:48211:48290 [0] NCCL INFO Channel 01/24 : 0 1
h200-node:48211:48290 [0] NCCL INFO Trees [0] 1/-1/-1->0->-1 [1] 1/-1/-1->0->-1
h200-node:48211:48290 [0] NCCL INFO P2P Chunksize set to 524288
h200-node:48212:48291 [1] NCCL INFO Channel 00/0 : 1[1] -> 0[0] via P2P/CUMEM/read
h200-node:48211:48290 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read
h200-node:48212:48291 [1] NCCL INFO Channel 01/0 : 1[1] -> 0[0] via P2P/CUMEM/read
h200-node:48211:48290 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[1] via P2P/CUMEM/read
h200-node:48211:48290 [0] NCCL INFO Connected all rings, use ring PXN 0 GDR 1
h200-node:48211:48290 [0] NCCL INFO 24 coll channels, 0 nvls channels, 32 p2p channels
"""

SHM_LOG = """\
h200-node:51007:51007 [0] NCCL INFO NCCL version 2.28.9+cuda13.0
h200-node:51007:51061 [0] NCCL INFO NCCL_P2P_DISABLE set by environment to 1.
h200-node:51008:51062 [1] NCCL INFO NCCL_P2P_DISABLE set by environment to 1.
h200-node:51007:51061 [0] NCCL INFO Channel 00/02 : 0 1
h200-node:51007:51061 [0] NCCL INFO Channel 01/02 : 0 1
h200-node:51007:51061 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via SHM/direct/direct
h200-node:51008:51062 [1] NCCL INFO Channel 00 : 1[1] -> 0[0] via SHM/direct/direct
h200-node:51007:51061 [0] NCCL INFO Channel 01 : 0[0] -> 1[1] via SHM/direct/direct
h200-node:51008:51062 [1] NCCL INFO Channel 01 : 1[1] -> 0[0] via SHM/direct/direct
h200-node:51008:51062 [1] NCCL INFO Connected all rings, use ring PXN 0 GDR 1
"""

NET_LOG = """\
[1] node2:22555:22555 [0] NCCL INFO NCCL version 2.18.3+cuda12.1
[0] node0:13571:13571 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/0
[0] node0:13571:13571 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[0] [send] via NET/Socket/0
[1] node2:22555:22555 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [receive] via NET/Socket/0
[1] node2:22555:22555 [0] NCCL INFO Connected all rings
"""

OLD_MIXED_LOG = """\
user:852750:852802 [0] NCCL INFO Channel 00 : 0[27000] -> 7[ca000] via P2P/IPC/read
user:852751:852807 [1] NCCL INFO Channel 01/0 : 1[2a000] -> 8[27000] [send] via NET/IB/0/GDRDMA
[4] NCCL INFO Ring 00 : 12[41000] -> 11[2d000] via P2P/IPC
sh9:3884994:3885084 [0] NCCL INFO Channel 01/1 : 0[0] -> 3[3] via P2P/direct pointer
"""


def test_nvlink_p2p_run() -> None:
    r = parse_nccl_log(P2P_LOG)
    assert r["version"] == "2.28.9+cuda13.0"
    assert r["transports"] == {"P2P/CUMEM": 4}
    assert r["peers"] == {"0->1": {"P2P/CUMEM": 2}, "1->0": {"P2P/CUMEM": 2}}
    assert r["details"] == ["read"]
    assert r["summary"] == "P2P"
    assert r["rings_connected"] is True
    assert r["env"] == {"NCCL_NVLS_ENABLE": "0"}
    assert verdict(r, p2p_disabled=False) is None
    assert verdict(r, p2p_disabled=True) == "P2P was disabled but NCCL made 4 P2P connection(s)"


def test_p2p_disabled_run_uses_shm() -> None:
    r = parse_nccl_log(SHM_LOG)
    assert r["transports"] == {"SHM": 4}
    assert r["summary"] == "SHM"
    assert r["env"] == {"NCCL_P2P_DISABLE": "1"}
    assert verdict(r, p2p_disabled=True) is None
    assert verdict(r, p2p_disabled=False) == "P2P was allowed but NCCL used only SHM"


def test_socket_run() -> None:
    r = parse_nccl_log(NET_LOG)
    assert r["version"] == "2.18.3+cuda12.1"
    assert r["transports"] == {"NET/Socket": 3}
    assert r["summary"] == "NET"


def test_older_formats_and_mixed_transports() -> None:
    r = parse_nccl_log(OLD_MIXED_LOG)
    assert r["transports"] == {"NET/IB": 1, "P2P/IPC": 2, "P2P/direct pointer": 1}
    assert r["summary"] == "mixed"
    assert r["details"] == ["GDRDMA", "read"]
    assert r["peers"]["12->11"] == {"P2P/IPC": 1}


def test_no_nccl_lines() -> None:
    r = parse_nccl_log("step 1 loss 2.3\nstep 2 loss 2.1\n")
    assert r["summary"] is None and r["transports"] == {} and r["version"] is None
    assert (
        verdict(r, p2p_disabled=True)
        == "NCCL printed no connection lines (was NCCL_DEBUG=INFO set?)"
    )


def test_transport_key() -> None:
    assert transport_key("P2P/CUMEM/read") == ("P2P/CUMEM", ["read"])
    assert transport_key("SHM/direct/direct") == ("SHM", ["direct", "direct"])
    assert transport_key("NET/IB/0/GDRDMA") == ("NET/IB", ["0", "GDRDMA"])


def test_channels_are_read_from_the_log():
    """NCCL's own count of the channels it set up (the 2x H200 example's log line)."""
    log = (
        "vm:1:2 [0] NCCL INFO NCCL version 2.28.9+cuda13.0\n"
        "vm:1:2 [0] NCCL INFO 4 coll channels, 4 collnet channels, 0 nvls channels, "
        "4 p2p channels, 2 p2p channels per peer\n"
    )
    parsed = parse_nccl_log(log)
    assert parsed["channels"] == {"coll": 4, "collnet": 4, "nvls": 0, "p2p": 4}
    assert parse_nccl_log("no nccl here")["channels"] is None


def test_the_nccl_tests_table_says_what_nccl_set_up():
    from kit.report import analysis
    from tests.unit.test_report_analysis import EXAMPLES, load

    _, benches = load("h200x2-allreduce", EXAMPLES)
    setup = analysis.nccl_setup(benches[0])
    assert setup["p2p"].startswith("NCCL 2.28.9") and "transport P2P/CUMEM" in setup["p2p"]
    assert "channels not recorded" in setup["p2p"]  # recorded before channels were parsed
    assert "transport SHM" in setup["no-p2p"]
    bench = benches[0]
    for run in bench.variants[0].ok:
        run["nccl"]["channels"] = {"coll": 4, "collnet": 4, "nvls": 0, "p2p": 4}
    assert "4 coll channels, 0 NVLS channels, 4 p2p channels" in analysis.nccl_setup(bench)["p2p"]
