"""Inventory: replayed NVML snapshots of several real topologies, and the real host path."""

from __future__ import annotations

import json
from pathlib import Path
from unittest import mock

import pytest

from kit import inventory
from kit.inventory import host as host_info
from kit.inventory import nvml, topology
from kit.inventory.cli import topology_text
from kit.model import Hardware
from kit.shared.jsonio import dumps
from tests.unit.fake_nvml import FakeNvml

FIXTURES = Path(__file__).parent.parent / "fixtures" / "nvml"
GPU_FIXTURES = [
    "h200x2_nvswitch",
    "h100x8_dgx",
    "rtx3090x8_pcie_2socket",
    "rtx3090ti_x2_nvlink_bridge",
]


def load(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.json").read_text())


def inv_of(name: str) -> dict:
    """The inventory as hardware.json holds it (what build_inventory writes)."""
    return inventory.build_inventory(load(name))


def hw_of(name: str) -> Hardware:
    """The same inventory as its readers take it: the model a recorded hardware.json loads as."""
    return Hardware.model_validate(inv_of(name))


def test_h200_pair_on_nvswitch_reads_nv18() -> None:
    assert topology_text(hw_of("h200x2_nvswitch")) == (
        "      GPU0  GPU1  NUMA\n"
        "GPU0  X     NV18  0\n"
        "GPU1  NV18  X     0\n"
        "\n"
        "Legend:\n"
        "  X    the GPU itself\n"
        "  NV#  a bonded set of # NVLink links (direct or through NVSwitch)"
    )


def test_dgx_h100_is_nv18_everywhere_with_two_numa_nodes() -> None:
    row = "X     NV18  NV18  NV18  NV18  NV18  NV18  NV18"
    text = topology_text(hw_of("h100x8_dgx"))
    lines = text.splitlines()
    assert lines[0] == "      GPU0  GPU1  GPU2  GPU3  GPU4  GPU5  GPU6  GPU7  NUMA"
    assert lines[1] == f"GPU0  {row}  0"
    assert lines[5] == "GPU4  NV18  NV18  NV18  NV18  X     NV18  NV18  NV18  1"
    assert lines[8] == "GPU7  NV18  NV18  NV18  NV18  NV18  NV18  NV18  X     1"


def test_pcie_box_over_two_sockets_reads_pix_node_sys() -> None:
    assert topology_text(hw_of("rtx3090x8_pcie_2socket")) == (
        "      GPU0  GPU1  GPU2  GPU3  GPU4  GPU5  GPU6  GPU7  NUMA\n"
        "GPU0  X     PIX   NODE  NODE  SYS   SYS   SYS   SYS   0\n"
        "GPU1  PIX   X     NODE  NODE  SYS   SYS   SYS   SYS   0\n"
        "GPU2  NODE  NODE  X     PIX   SYS   SYS   SYS   SYS   0\n"
        "GPU3  NODE  NODE  PIX   X     SYS   SYS   SYS   SYS   0\n"
        "GPU4  SYS   SYS   SYS   SYS   X     PIX   NODE  NODE  1\n"
        "GPU5  SYS   SYS   SYS   SYS   PIX   X     NODE  NODE  1\n"
        "GPU6  SYS   SYS   SYS   SYS   NODE  NODE  X     PIX   1\n"
        "GPU7  SYS   SYS   SYS   SYS   NODE  NODE  PIX   X     1\n"
        "\n"
        "Legend:\n"
        "  X     the GPU itself\n"
        "  PIX   PCIe through at most one PCIe switch\n"
        "  NODE  PCIe and the links between host bridges inside one NUMA node\n"
        "  SYS   PCIe and the CPU-to-CPU link between NUMA nodes (QPI/UPI/Infinity\n"
        "        Fabric)"
    )


def test_direct_nvlink_bridge_counts_links_per_peer() -> None:
    inv = inv_of("rtx3090ti_x2_nvlink_bridge")
    assert inv["topology"]["matrix"] == [["X", "NV4"], ["NV4", "X"]]
    links = inv["gpus"][0]["nvlinks"]
    assert [n["remote"] for n in links] == ["GPU1"] * 4
    assert {n["version"] for n in links} == {"3.0"}
    assert links[0]["speed_gbs"] == 14.062


def test_no_gpu_recording_reports_the_host() -> None:
    inv = inv_of("no_gpu")
    assert inv["gpus"] == []
    assert inv["nvml_error"].startswith("NVML did not start")
    assert inv["host"]["logical_cpus"] >= 1
    assert topology_text(Hardware.model_validate(inv)) == "No GPUs: no topology to show."
    assert (
        inv["summary"]
        == f"CPU only, no NVIDIA GPU: {inv['host']['cpu_model']}, {inv['host']['logical_cpus']} CPUs"
    )


@pytest.mark.parametrize(
    ("name", "summary"),
    [
        ("h200x2_nvswitch", "2x NVIDIA H200, NV18, driver 580.95.05"),
        ("h100x8_dgx", "8x NVIDIA H100 80GB HBM3, NV18, driver 550.90.07"),
        ("rtx3090x8_pcie_2socket", "8x NVIDIA GeForce RTX 3090, PIX/NODE/SYS, driver 535.183.01"),
        ("rtx3090ti_x2_nvlink_bridge", "2x NVIDIA GeForce RTX 3090 Ti, NV4, driver 550.120"),
    ],
)
def test_summary_line(name: str, summary: str) -> None:
    assert inv_of(name)["summary"] == summary


@pytest.mark.parametrize("name", [*GPU_FIXTURES, "no_gpu"])
def test_inventory_is_json_with_schema(name: str) -> None:
    inv = inv_of(name)
    assert inv["schema"] == 1
    assert json.loads(json.dumps(inv)) == inv


def test_gpu_fields_come_through() -> None:
    g = inv_of("h100x8_dgx")["gpus"][5]
    assert g["name"] == "NVIDIA H100 80GB HBM3"
    assert g["uuid"].startswith("GPU-") and len(g["uuid"]) == 40
    assert g["pci_bus_id"] == "0000:c3:00.0"
    assert g["memory_total_gib"] == 79.6
    assert g["compute_capability"] == "9.0"
    assert g["power_limit_w"] == 700.0
    assert g["pcie"]["gen_max"] == 5 and g["pcie"]["width_max"] == 16
    assert g["numa_node"] == 1
    assert g["cpu_affinity"] == "56-111,168-223"
    assert g["nvlink_active"] == 18
    assert {n["remote"] for n in g["nvlinks"]} == {"NVSwitch"}
    assert g["throttle_reasons"] == ["GpuIdle"]
    driver = inv_of("h100x8_dgx")["driver"]
    assert driver == {
        "version": "550.90.07",
        "cuda_driver_version": "12.4",
        "nvml_version": "12.550.90.07",
    }


def test_peer_access_from_cuda_and_nvml() -> None:
    inv = inv_of("rtx3090x8_pcie_2socket")
    assert inv["peer_access"]["matrix"][0][1] is False
    assert inv["nvml_p2p_status"]["read"][0][1] == "GNS"
    inv = inv_of("h200x2_nvswitch")
    assert inv["peer_access"]["matrix"] == [[None, True], [True, None]]
    assert inv["nvml_p2p_status"]["nvlink"] == [["X", "OK"], ["OK", "X"]]


def test_peer_access_is_reordered_to_nvml_order() -> None:
    snap = load("rtx3090x8_pcie_2socket")
    cuda = snap["cuda"]
    # CUDA enumerated GPU1 first (FASTEST_FIRST order): its answers must land on GPU1.
    cuda["devices"][0], cuda["devices"][1] = cuda["devices"][1], cuda["devices"][0]
    cuda["matrix"] = [[None if i == j else (i, j) == (0, 5) for j in range(8)] for i in range(8)]
    inv = inventory.build_inventory(snap)
    assert inv["peer_access"]["matrix"][1][5] is True
    assert inv["peer_access"]["matrix"][0][5] is False


def test_missing_cuda_leaves_peer_access_null_with_reason() -> None:
    snap = load("h200x2_nvswitch")
    snap["cuda"] = {"available": False, "reason": "CUDA probe failed: No module named 'torch'"}
    inv = inventory.build_inventory(snap)
    assert inv["peer_access"] is None
    assert "torch" in inv["peer_access_note"]


def test_placement_sets_on_two_socket_pcie_box() -> None:
    sets = inventory.suggest_gpu_sets(hw_of("rtx3090x8_pcie_2socket"), 2)
    assert [(s["gpu_ids"], s["link"], s["numa_nodes"]) for s in sets] == [
        ([0, 1], "PIX", ["0"]),
        ([0, 2], "NODE", ["0"]),
        ([0, 4], "SYS", ["0", "1"]),
    ]
    assert sets[2]["variant"] == {"name": "gpus-0-4-sys", "gpu_ids": [0, 4]}
    fours = inventory.suggest_gpu_sets(hw_of("rtx3090x8_pcie_2socket"), 4)
    assert [(s["gpu_ids"], s["link"]) for s in fours] == [
        ([0, 1, 2, 3], "NODE"),
        ([0, 1, 2, 4], "SYS"),
    ]


def test_placement_on_nvswitch_offers_one_class() -> None:
    sets = inventory.suggest_gpu_sets(hw_of("h100x8_dgx"), 2)
    assert [(s["gpu_ids"], s["link"]) for s in sets] == [([0, 1], "NV18")]
    assert inventory.suggest_gpu_sets(hw_of("no_gpu"), 2) == []


def test_mixed_nvlink_and_pcie_prefers_nvlink_word() -> None:
    snap = load("rtx3090x8_pcie_2socket")
    # bridge GPU0 and GPU4 (across sockets) with 4 direct NVLink links
    a, b = snap["nvml"]["gpus"][0], snap["nvml"]["gpus"][4]
    for g, peer in ((a, b), (b, a)):
        g["nvlinks"] = [
            {
                "link": n,
                "state": 1,
                "version": 4,
                "remote_device_type": 0,
                "remote_pci_bus_id": peer["pci_bus_id"],
            }
            for n in range(4)
        ]
    a["nvlinks"][3]["state"] = 0  # one link down on one end: the pair still shows 4 from GPU4
    inv = inventory.build_inventory(snap)
    assert inv["topology"]["matrix"][0][4] == "NV4"
    assert inv["topology"]["matrix"][0][5] == "SYS"
    assert inv["gpus"][0]["nvlink_active"] == 3
    assert topology.interconnect_words(Hardware.model_validate(inv)) == [
        "NV4",
        "PIX",
        "NODE",
        "SYS",
    ]


@pytest.mark.parametrize("name", GPU_FIXTURES)
def test_collection_adapter_replays_recorded_answers(name: str) -> None:
    """The real NVML collection code, run against an NVML that answers from the snapshot,
    gives back the same snapshot: the adapter asks the right things and keeps the answers."""
    snap = load(name)
    fake = FakeNvml(snap["nvml"])
    with (
        mock.patch("os.cpu_count", return_value=snap["host"]["logical_cpus"]),
        mock.patch.object(nvml, "count_numa_nodes", return_value=len(snap["host"]["numa_nodes"])),
    ):
        got = nvml.collect_nvml_snapshot(fake)
    assert got["error"] is None
    assert fake.shutdowns == 1

    def comparable(s: dict) -> dict:
        s = json.loads(json.dumps(s))
        s.pop("errors", None)
        for g in s["gpus"]:
            g.pop("errors")
            g.pop("sysfs")  # read from this machine's /sys, where these GPUs are absent
        return s

    assert comparable(got) == comparable(snap["nvml"])
    assert topology.topology_matrix(got) == topology.topology_matrix(snap["nvml"])


def test_nvml_failure_mid_way_is_reported_not_raised() -> None:
    class Broken(FakeNvml):
        def nvmlDeviceGetCount(self) -> int:
            raise RuntimeError("GPU is lost")

    snap = load("h200x2_nvswitch")
    got = nvml.collect_nvml_snapshot(Broken(snap["nvml"]))
    # the count query failed: recorded, and no GPU is invented
    assert got["gpus"] == []
    assert "GPU is lost" in got["errors"]["count"]


@pytest.mark.parametrize("name", [*GPU_FIXTURES, "no_gpu"])
def test_a_measured_inventory_is_written_as_the_inventory_built_it(name: str) -> None:
    """The engine writes hardware.json from the typed model (kit.inventory.measure()): its dump
    gives back what build_inventory made, key for key and in its order, from a recorded snapshot
    and from the same answers asked again through the collection code."""
    snap = load(name)
    asked = inventory.collect_snapshot(cuda_peer=False, nvml=FakeNvml(snap["nvml"]))
    for s in (snap, {**asked, "host": snap["host"], "cuda": snap["cuda"]}):
        built = topology.build_inventory(s)
        typed = Hardware.model_validate(built)
        assert dumps(typed.dump(as_written=True)) == dumps(built)
        typed.nodes = []  # a field set afterwards is written last
        assert list(typed.dump(as_written=True))[-2:] == ["summary", "nodes"]


def test_every_committed_hardware_json_is_dumped_as_written() -> None:
    root = Path(__file__).resolve().parents[2]
    found = sorted(root.glob("reports/**/hardware.json")) + sorted(
        root.glob("tests/fixtures/**/hardware.json")
    )
    assert len(found) > 10
    for path in found:
        written = json.loads(path.read_text())
        typed = Hardware.model_validate(written)
        assert dumps(typed.dump(as_written=True)) == dumps(written), path


def test_collect_on_this_machine_is_a_valid_host_only_inventory() -> None:
    """The real path, no mocks: this CI machine has no GPU (skip where one is present)."""
    inv = topology.build_inventory(inventory.collect_snapshot())
    if inv["gpus"]:
        pytest.skip("this machine has GPUs: the host-only path is not what runs here")
    assert inv["schema"] == 1
    assert inv["nvml_error"]
    assert inv["driver"] is None
    assert inv["topology"]["matrix"] == []
    host = inv["host"]
    assert host["logical_cpus"] >= 1 and host["mem_total_bytes"] > 0
    assert host["cpu_model"] and host["kernel"] and host["os"]
    assert host_info.parse_cpulist(host["allowed_cpus"])
    assert json.loads(json.dumps(inv)) == inv
    # measured now, typed: the model a recorded hardware.json loads as, read by the same readers
    live = inventory.measure(cuda_peer=False)
    assert isinstance(live, Hardware) and live.gpus == [] and live.host.logical_cpus >= 1
    assert topology.summary_line(live) == live.summary == inv["summary"]


def test_cpulist_round_trip_and_masks() -> None:
    assert host_info.parse_cpulist("0-3,8,10-11") == [0, 1, 2, 3, 8, 10, 11]
    assert host_info.format_cpulist([0, 1, 2, 3, 8, 10, 11]) == "0-3,8,10-11"
    assert host_info.mask_words_to_list([0b101, 1]) == [0, 2, 64]


def test_parse_cpuinfo_counts_sockets_and_cores() -> None:
    text = ""
    for cpu, (phys, core) in enumerate([(0, 0), (0, 1), (1, 0), (1, 1), (0, 0), (0, 1)]):
        text += (
            f"processor\t: {cpu}\nmodel name\t: Intel(R) Xeon(R) Gold 6248 CPU @ 2.50GHz\n"
            f"physical id\t: {phys}\ncore id\t\t: {core}\n\n"
        )
    info = host_info.parse_cpuinfo(text)
    assert info == {
        "hypervisor": False,
        "model": "Intel(R) Xeon(R) Gold 6248 CPU @ 2.50GHz",
        "sockets": 2,
        "physical_cores": 4,
    }


def test_a_virtual_machine_is_named_from_its_marks(tmp_path: Path) -> None:
    """The hypervisor flag and the DMI vendor; the report says "not bare metal" from them, from a
    masked CPU model, a container the kit did not start and a CPU slice."""
    from kit.report.sections import slice_words

    flags = "processor\t: 0\nmodel name\t: AMD EPYC 9654\nflags\t\t: fpu sse2 hypervisor\n\n"
    assert host_info.parse_cpuinfo(flags)["hypervisor"] is True
    assert host_info.detect_virtualization(tmp_path) == {
        "detected": False, "evidence": [], "vendor": None, "product": None,
    }  # fmt: skip
    dmi = tmp_path / "sys/class/dmi/id"
    dmi.mkdir(parents=True)
    (dmi / "sys_vendor").write_text("QEMU\n")
    (dmi / "product_name").write_text("Standard PC (Q35 + ICH9, 2009)\n")
    found = host_info.detect_virtualization(tmp_path, hypervisor_flag=True)
    assert found["detected"] and found["evidence"] == [
        "hypervisor flag in /proc/cpuinfo", "DMI: QEMU Standard PC (Q35 + ICH9, 2009)",
    ]  # fmt: skip
    bare = {"host": {"cpu_model": "Intel(R) Xeon(R) Platinum 8480+", "logical_cpus": 4,
                     "allowed_cpus": "0-3", "container": {"detected": False}}}  # fmt: skip
    assert slice_words(Hardware.model_validate(bare)) == []
    vm = {"host": {"cpu_model": "Intel(R) Xeon(R) Processor", "logical_cpus": 32,
                   "allowed_cpus": "0-7", "virtualization": found,
                   "container": {"detected": True, "runtime": "docker",
                                 "evidence": ["/.dockerenv"]}}}  # fmt: skip
    vm = Hardware.model_validate(vm)
    short = [w for w, _ in slice_words(vm)]
    # page 1 says what "host" means beside "host runtime" (the report review, 13)
    in_docker = "inside a docker container that this report calls the host"
    assert short == ["a virtual machine", in_docker, "a CPU slice"]
    evidence = " ".join(e for _, e in slice_words(vm))
    assert (
        "naming no model" in evidence and "DMI: QEMU" in evidence and "CPUs 0-7 of 32" in evidence
    )
    # `kit inspect` says the same from the same reading (Host.virtual_machine)
    from kit.inventory.cli import host_text

    shown = " ".join(host_text(vm).split())
    assert "Hypervisor hypervisor flag in /proc/cpuinfo; DMI: QEMU" in shown
    assert "naming no model" in shown
    assert "Hypervisor none detected" in " ".join(host_text(Hardware.model_validate(bare)).split())


def test_parse_meminfo_and_os_release() -> None:
    assert host_info.parse_meminfo("MemTotal:       32768 kB\nHugePages_Total:       0\n") == {
        "MemTotal": 32768 * 1024,
        "HugePages_Total": 0,
    }
    assert host_info.parse_meminfo("Node 1 MemTotal:  1024 kB") == {"MemTotal": 1024 * 1024}
    assert host_info.parse_os_release('PRETTY_NAME="Ubuntu 24.04.2 LTS"\nID=ubuntu\n') == {
        "PRETTY_NAME": "Ubuntu 24.04.2 LTS",
        "ID": "ubuntu",
    }


def test_container_detection(tmp_path: Path) -> None:
    assert host_info.detect_container(tmp_path, {}) == {
        "detected": False,
        "runtime": None,
        "evidence": [],
    }
    (tmp_path / ".dockerenv").touch()
    assert host_info.detect_container(tmp_path, {})["runtime"] == "docker"
    (tmp_path / ".dockerenv").unlink()
    (tmp_path / "proc/1").mkdir(parents=True)
    (tmp_path / "proc/1/cgroup").write_text("0::/kubepods/besteffort/pod1234/abcd\n")
    found = host_info.detect_container(tmp_path, {"KUBERNETES_SERVICE_HOST": "10.0.0.1"})
    assert found["runtime"] == "kubernetes"
    assert "KUBERNETES_SERVICE_HOST" in found["evidence"]


def test_bus_id_normalisation() -> None:
    assert nvml._bus_id(b"00000000:1B:00.0") == "0000:1b:00.0"
    assert nvml._bus_id("00000001:C3:00.0") == "0001:c3:00.0"


@pytest.mark.slow
def test_cuda_peer_probe_runs_in_a_child_process() -> None:
    """Real: a child Python imports torch and asks CUDA (no GPU here: an empty matrix)."""
    pytest.importorskip("torch", reason="the probe needs torch in this interpreter")
    got = host_info.collect_cuda_peer_access()
    assert got["available"] is True, got
    n = len(got["devices"])
    assert len(got["matrix"]) == n and all(len(r) == n for r in got["matrix"])


def test_board_serials_come_through_to_page_one() -> None:
    """REPORT-REVIEW 2: a buyer ties a report to boards by serial. The real collection code asks
    NVML for it; a board that does not answer (every recorded fixture) leaves it out, and
    page 1 then prints no serial line rather than a line of blanks."""
    from kit.report.analysis.ordered import identity

    snap = load("h200x2_nvswitch")
    for i, g in enumerate(snap["nvml"]["gpus"]):
        if i == 0:
            g["serial"] = "1654922000123"
    fake = FakeNvml(snap["nvml"])
    with (
        mock.patch("os.cpu_count", return_value=snap["host"]["logical_cpus"]),
        mock.patch.object(nvml, "count_numa_nodes", return_value=len(snap["host"]["numa_nodes"])),
    ):
        got = nvml.collect_nvml_snapshot(fake)
    assert got["gpus"][0]["serial"] == "1654922000123"
    assert "serial" not in got["gpus"][1] and "Not Supported" in got["gpus"][1]["errors"]["serial"]
    hardware = Hardware.model_validate(inventory.build_inventory({**snap, "nvml": got}))
    assert [g.serial for g in hardware.gpus] == ["1654922000123", None]
    lines = dict(identity(hardware, None))
    assert lines["serial numbers"] == "1654922000123 (1 GPU without one)"
    assert "serial numbers" not in dict(identity(hw_of("h200x2_nvswitch"), None))
