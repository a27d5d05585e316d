"""NCCL transport detection from NCCL_DEBUG=INFO logs (excerpts in NCCL's real formats)."""

from __future__ import annotations

from kit.shared.nccl_log import choice_words, parse_nccl_log, parse_tuning, transport_key, verdict

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
        run.nccl.channels = {"coll": 4, "collnet": 4, "nvls": 0, "p2p": 4}
    assert "4 coll channels, 0 NVLS channels, 4 p2p channels" in analysis.nccl_setup(bench)["p2p"]


# NCCL_DEBUG_SUBSYS=TUNING lines, each NCCL's format string (src/enqueue.cc and
# src/scheduler/symmetric_sched.cc of NCCL 2.27.7 / 2.28.9, src/ce_coll.cc of 2.30) filled in as
# ncclDebugLog prefixes it ("host:pid:tid [cudaDev] NCCL INFO "):
#   "%s: %ld Bytes -> Algo %s proto %s channel{Lo..Hi}={%d..%d}"
#   "%s [Symmetric]: %ld Bytes -> Kernel %s nchannels %d nthreads %d nWorks %d"
#   "%s [Copy Engine]: %ld Bytes -> cudaMemcpy%s"
TUNING_LOG = """\
h200-node:48211:48211 [0] NCCL INFO AllReduce: 1048576 Bytes -> Algo RING proto LL128 channel{Lo..Hi}={0..15}
h200-node:48211:48211 [0] NCCL INFO AllGather: 536870912 Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..23}
h200-node:48211:48211 [0] NCCL INFO ReduceScatter: 8 Bytes -> Algo PAT proto LL channel{Lo..Hi}={0..0}
h200-node:48211:48211 [0] NCCL INFO AllReduce: 64 Bytes -> Algo NVLS_TREE proto SIMPLE channel{Lo..Hi}={2..5}
h200-node:48211:48211 [0] NCCL INFO AllReduce [Symmetric]: 4096 Bytes -> Kernel AllReduce_AGxLL_R nchannels 4 nthreads 512 nWorks 1
h200-node:48211:48211 [0] NCCL INFO AllGather [Copy Engine]: 4096 Bytes -> cudaMemcpyBatchAsync
h200-node:48211:48211 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read
h200-node:48211:48211 [0] NCCL INFO AllReduce: tuner chunk size 4194304 exceeds buffer max 2097152, clamping
"""


def test_tuning_lines_name_algorithm_protocol_and_channels() -> None:
    calls = parse_tuning(TUNING_LOG)
    assert [(c["func"], c["bytes"], c["algo"], c["proto"], c["channels"]) for c in calls] == [
        ("AllReduce", 1048576, "RING", "LL128", 16),
        ("AllGather", 536870912, "RING", "SIMPLE", 24),
        ("ReduceScatter", 8, "PAT", "LL", 1),
        ("AllReduce", 64, "NVLS_TREE", "SIMPLE", 4),
        ("AllReduce", 4096, "symmetric kernel AllReduce_AGxLL_R", "-", 4),
        ("AllGather", 4096, "copy engine (cudaMemcpyBatchAsync)", "-", None),
    ]
    assert [choice_words(c) for c in calls[:1] + calls[4:]] == [
        "RING/LL128, 16 ch",
        "symmetric kernel AllReduce_AGxLL_R, 4 ch",
        "copy engine (cudaMemcpyBatchAsync)",
    ]


def test_the_2_27_symmetric_line_without_nworks_and_no_tuning_lines() -> None:
    line = (
        "h:1:1 [0] NCCL INFO AllReduce [Symmetric]: 128 Bytes -> Kernel AllReduce_LL "
        "nchannels 2 nthreads 256"
    )
    assert parse_tuning(line)[0]["channels"] == 2
    assert parse_tuning(P2P_LOG) == []


def test_the_sizes_table_prints_what_nccl_picked(tmp_path):
    """The 2x H200 example with NCCL's per-size choice added to its p2p runs, as the worker
    records it: the table gains the column, a size with no line says "not logged", and the
    runs without the log (no-p2p here) say it was not recorded."""
    import json
    import shutil

    from kit.bundle import Bundle
    from kit.model import load_bundle
    from kit.report import analysis
    from kit.report.render import render_html
    from tests.unit.test_report_analysis import EXAMPLES

    copy = tmp_path / "b"
    shutil.copytree(EXAMPLES / "h200x2-allreduce", copy)
    results = json.loads((copy / "results.json").read_text())
    line = "h:1:1 [0] NCCL INFO AllReduce: {} Bytes -> Algo {} proto {} channel{{Lo..Hi}}={{0..{}}}"
    for run in results["runs"]:
        if run["variant"] != "p2p" or run["status"] != "ok":
            continue
        run["data"]["nccl_choice"] = "NCCL_DEBUG_SUBSYS=TUNING, one untimed call per size"
        for row in run["data"]["sizes"][1:]:
            algo, proto = ("RING", "LL") if row["bytes"] < 1 << 20 else ("RING", "SIMPLE")
            row["nccl_calls"] = parse_tuning(line.format(row["bytes"], algo, proto, 3))
    (copy / "results.json").write_text(json.dumps(results))
    bench = analysis.bundle_benchmarks(load_bundle(copy))[0]
    curves = analysis.sweep_curves(bench)
    sizes = curves["sizes"]
    assert curves["curves"]["p2p"][sizes[0]]["nccl"] == []
    assert curves["curves"]["p2p"][sizes[-1]]["nccl"] == ["RING/SIMPLE, 4 ch"]
    assert curves["curves"]["no-p2p"][sizes[-1]]["nccl"] == []
    assert analysis.nccl_choice(bench)["no-p2p"].startswith("not recorded by these runs")
    html = render_html(Bundle.load(copy))
    assert "<th>NCCL algo/proto</th>" in html
    assert "<td>RING/LL, 4 ch</td>" in html and "<td>RING/SIMPLE, 4 ch</td>" in html
    assert "<td>not logged</td>" in html  # the first size of p2p and every size of no-p2p
    assert "per size: NCCL_DEBUG_SUBSYS=TUNING, one untimed call per size." in html
