"""scripts/device/silicon_check.py's parts that run anywhere: unpacking a .deb without dpkg,
the nvcc build commands, reading nvbandwidth's JSON, and the kit-against-reference table.

The JSON below is written by hand after nvbandwidth's json_output.cpp (keys "nvbandwidth",
"testcases", "name", "status", "bandwidth_matrix", values as strings, "N/A" where unmeasured):
a test of the parser, not evidence of any measurement. The pair matrices' JSON is laid out by
_add_results, a line-for-line copy of json_output.cpp's addTestcaseResults, driven as
testcases_ce.cpp / testcases_sm.cpp drive it; a real nvbandwidth v0.8 JSON (one H100) checks the
row reading."""

from __future__ import annotations

import importlib.util
import io
import json
import tarfile

import pytest

from tests.conftest import ROOT

_spec = importlib.util.spec_from_file_location(
    "silicon_check", ROOT / "scripts/device/silicon_check.py"
)
sc = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sc)


def _ar(members: dict[str, bytes]) -> bytes:
    out = b"!<arch>\n"
    for name, data in members.items():
        header = f"{name:<16}{0:<12}{0:<6}{0:<6}{'100644':<8}{len(data):<10}`\n".encode()
        assert len(header) == 60
        out += header + data + (b"\n" if len(data) % 2 else b"")
    return out


def _tar_xz(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:xz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def test_a_deb_unpacks_like_dpkg_deb_x(tmp_path):
    deb = tmp_path / "libx.deb"
    deb.write_bytes(
        _ar(
            {
                "debian-binary": b"2.0\n",
                "control.tar.xz": _tar_xz({"./control": b"Package: x\n"}),
                "data.tar.xz": _tar_xz(
                    {
                        "./usr/include/boost/program_options.hpp": b"// odd size\n!",
                        "./usr/lib/x86_64-linux-gnu/libboost_program_options.a": b"!<arch>\n",
                    }
                ),
            }
        )
    )
    sc.unpack_deb(deb, tmp_path / "root")
    assert (tmp_path / "root/usr/include/boost/program_options.hpp").read_bytes().endswith(b"!")
    assert not (tmp_path / "root/control").exists()


def test_a_deb_whose_data_leaves_the_folder_is_refused(tmp_path):
    deb = tmp_path / "evil.deb"
    deb.write_bytes(_ar({"data.tar.xz": _tar_xz({"../../escaped": b"x"})}))
    with pytest.raises(tarfile.TarError):
        sc.unpack_deb(deb, tmp_path / "root")
    assert not (tmp_path.parent / "escaped").exists()
    with pytest.raises(ValueError, match="not an ar archive"):
        sc.ar_members(b"PK\x03\x04")


def test_nvcc_compiles_every_source_then_links_boost_nvml_and_cuda(tmp_path):
    nvcc = tmp_path / "cuda/bin/nvcc"
    (tmp_path / "cuda/lib64/stubs").mkdir(parents=True)
    nvcc.parent.mkdir(parents=True)
    nvcc.write_text("")
    boost = tmp_path / "boost"
    (boost / "usr/lib/x86_64-linux-gnu").mkdir(parents=True)
    (boost / "usr/lib/x86_64-linux-gnu/libboost_program_options.a").write_text("")
    compiles, link = sc.nvcc_commands(nvcc, tmp_path / "src", boost, tmp_path, "90", "66746a3")
    assert len(compiles) == len(sc.NVB_SOURCES) == 11
    for cmd in compiles:
        assert "-arch=sm_90" in cmd and "-std=c++17" in cmd and "-c" in cmd
        assert f"-I{boost / 'usr/include'}" in cmd and '-DGIT_VERSION="66746a3"' in cmd
    assert link[-2:] == ["-o", str(tmp_path / "nvbandwidth")]
    assert str(boost / "usr/lib/x86_64-linux-gnu/libboost_program_options.a") in link
    assert f"-L{tmp_path / 'cuda/lib64/stubs'}" in link
    assert link.index("-lnvidia-ml") < link.index("-lcuda")
    with pytest.raises(FileNotFoundError, match=r"libboost_program_options\.a"):
        sc.nvcc_commands(nvcc, tmp_path / "src", tmp_path / "none", tmp_path, "90", "x")


def _nvb(cases):
    return {"nvbandwidth": {"version": "v0.8", "testcases": cases}}


def test_nvbandwidth_json_is_read_per_testcase():
    doc = _nvb(
        [
            {"name": "host_to_device_memcpy_ce", "status": "Passed",
             "bandwidth_matrix": [["55.31", "N/A"]], "sum": 55.31},
            {"name": "device_local_copy", "status": "Passed",
             "bandwidth_matrix": [["2100.5", "2099"]], "sum": 4199.5},
        ]
    )  # fmt: skip
    assert sc.parse_nvbandwidth(json.loads(json.dumps(doc))) == {
        "host_to_device_memcpy_ce": [55.31, None],
        "device_local_copy": [2100.5, 2099.0],
    }
    waived = _nvb([{"name": "device_local_copy", "status": "Waived"}])
    with pytest.raises(RuntimeError, match="device_local_copy: Waived"):
        sc.parse_nvbandwidth(waived)


def test_rows_compare_each_gpu_and_testcase_with_the_median_reference():
    copy_run = {
        "data": {
            "per_gpu": [
                {"device": 0, "h2d_gbps": 55.0, "d2h_gbps": 50.0, "local_gbps": 2000.0},
            ]
        }
    }
    nvb = [
        {"host_to_device_memcpy_ce": [55.5], "device_to_host_memcpy_ce": [53.0],
         "device_local_copy": [2010.0]},
        {"host_to_device_memcpy_ce": [55.3], "device_to_host_memcpy_ce": [53.2],
         "device_local_copy": [2030.0]},
    ]  # fmt: skip
    rows = sc.copy_rows(copy_run, nvb)
    by = {r["what"]: r for r in rows}
    h2d = by["host_to_device_memcpy_ce GPU 0"]
    assert h2d["reference"] == pytest.approx(55.4) and h2d["verdict"] == "PASS"
    d2h = by["device_to_host_memcpy_ce GPU 0"]
    assert d2h["ratio"] == pytest.approx(50.0 / 53.1) and d2h["verdict"] == "FAIL"  # 5.8% low
    assert by["device_local_copy GPU 0"]["reference_runs"] == [2010.0, 2030.0]
    none = sc.copy_rows(copy_run, [])
    assert {r["verdict"] for r in none} == {"not run"}
    text = sc.table(rows)
    assert "| host_to_device_memcpy_ce GPU 0 | 55.00 GB/s | 55.40 GB/s | 0.9928 | PASS |" in text
    assert "| device_to_host_memcpy_ce GPU 0 | 50.00 GB/s | 53.10 GB/s | 0.9416 | FAIL |" in text


def test_the_three_percent_edge():
    assert sc.row("x", "GB/s", 103.0, 100.0, [100.0])["verdict"] == "PASS"
    assert sc.row("x", "GB/s", 96.9, 100.0, [100.0])["verdict"] == "FAIL"
    assert sc.row("x", "GB/s", None, 100.0, [])["verdict"] == "not run"


# ---- the GPU-pair matrix (--pairs) --------------------------------------------------------------

H100_JSON = ROOT / "reports/measurements/2026-11-23-h100x1-silicon-vs-nvbandwidth/raw"


def test_a_real_nvbandwidth_json_reads_per_testcase():
    """nvbandwidth v0.8's own -j output from the 2026-11-23 H100 call: one row per testcase."""
    doc = json.loads((H100_JSON / "nvbandwidth-before.json").read_text())
    found = sc.parse_nvbandwidth(doc)
    assert list(found) == list(sc.NVB_TESTS)
    for case in doc["nvbandwidth"]["testcases"]:
        (only,) = case["bandwidth_matrix"]
        assert found[case["name"]] == [float(v) for v in only]
        assert found[case["name"]][0] == pytest.approx(case["sum"], rel=1e-5)  # 6 digits kept
    # the same layout read as a one-GPU "pair" matrix: one 1 x 1 block
    case = doc["nvbandwidth"]["testcases"][0]
    assert sc.pair_matrix(case, 1) == [[float(case["bandwidth_matrix"][0][0])]]


def _cxx(v: float) -> str:
    """A double as json_output.cpp writes it (a std::stringstream's default: 6 significant)."""
    return format(v, "g")


def _add_results(case: dict, matrix: list[list[float | None]], description: str) -> None:
    """json_output.cpp's JsonOutput::addTestcaseResults: append the rows (N/A where unset) to the
    testcase's one bandwidth_matrix, overwrite its sum and description, mark it Passed."""
    for r in matrix:
        case.setdefault("bandwidth_matrix", []).append(["N/A" if v is None else _cxx(v) for v in r])
    case["sum"] = sum(v or 0.0 for r in matrix for v in r)
    case["bandwidth_description"] = description
    case["status"] = "Passed"


def _nvbandwidth_pairs(n: int, peer, one_ce, dirs_ce, one_sm, dirs_sm) -> dict:
    """nvbandwidth -j for the four pair testcases, laid out as testcases_ce.cpp / _sm.cpp and
    json_output.cpp do: one way fills value(src, peer) for every ordered pair with peer access;
    both ways fills Write1 (peer -> src), Write2 (src -> peer) and Total (their sum) for every
    ordered pair, three N x N blocks in one bandwidth_matrix."""

    def matrix(f):
        return [[f(s, d) if s != d and peer(s, d) else None for d in range(n)] for s in range(n)]

    cases = []
    for name, one, dirs, eng in (
        ("device_to_device_memcpy_write_ce", one_ce, None, "CE"),
        ("device_to_device_bidirectional_memcpy_write_ce", None, dirs_ce, "CE"),
        ("device_to_device_memcpy_write_sm", one_sm, None, "SM"),
        ("device_to_device_bidirectional_memcpy_write_sm", None, dirs_sm, "SM"),
    ):
        case = {"name": name}
        if one is not None:
            _add_results(
                case, matrix(one), f"memcpy {eng} GPU(row) <- GPU(column) bandwidth (GB/s)"
            )
        else:
            for k, label in ((0, "Write1"), (1, "Write2")):
                _add_results(
                    case,
                    matrix(lambda s, d, k=k, f=dirs: f(s, d)[k]),
                    f"memcpy {eng} GPU(row) <-> GPU(column) {label} bandwidth (GB/s)",
                )
            _add_results(
                case,
                matrix(lambda s, d, f=dirs: sum(f(s, d))),
                f"memcpy {eng} GPU(row) <-> GPU(column) Total bandwidth (GB/s)",
            )
        cases.append(case)
    devices = [f"{i}: NVIDIA H200 (00000000:{i:02x}:00): (vm)" for i in range(n)]
    return {"nvbandwidth": {"GPU Device list": devices, "testcases": cases, "version": "v0.8"}}


def _kit_pairs(n: int, peer, one_ce, both_ce, one_sm, both_sm) -> dict:
    """The copy_bandwidth run's data["pairs"], filled by the worker's own matrix module."""
    from kit.workloads.copy_bandwidth import matrix

    def gated(f):
        return lambda a, b: f(a, b) if peer(a, b) else None

    return {
        "peer_access": [[a != b and peer(a, b) for b in range(n)] for a in range(n)],
        "ce_one_way": matrix.one_way(n, gated(one_ce)),
        "ce_both_ways": matrix.both_ways(n, gated(both_ce)),
        "sm_one_way": matrix.one_way(n, gated(one_sm)),
        "sm_both_ways": matrix.both_ways(n, gated(both_sm)),
        "latency_us": matrix.one_way(n, gated(lambda a, b: 2.0)),
        "samples": {},
        "wrong": 0,
    }


def test_pair_matrices_are_read_whole_and_bidirectional_ones_at_their_total():
    def peer(s, d):
        return {s, d} != {0, 2}  # GPUs 0 and 2 have no peer access: N/A off the diagonal

    doc = _nvbandwidth_pairs(
        3,
        peer,
        lambda s, d: 380.0 + 10 * s + d,
        lambda s, d: (360.0 + s, 350.0 + d),
        lambda s, d: 370.0 + s,
        lambda s, d: (330.0, 331.0 + s + d),
    )
    bidir = doc["nvbandwidth"]["testcases"][1]
    assert len(bidir["bandwidth_matrix"]) == 9 and "Total" in bidir["bandwidth_description"]
    found, missing = sc.parse_pairs(json.loads(json.dumps(doc)))
    assert missing == {} and list(found) == list(sc.NVB_PAIR_TESTS)
    one = found["device_to_device_memcpy_write_ce"]
    assert one == [[None, 381.0, None], [390.0, None, 392.0], [None, 401.0, None]]
    total = found["device_to_device_bidirectional_memcpy_write_ce"]
    assert total[0][1] == 360.0 + 351.0 and total[1][0] == 361.0 + 350.0  # Total, not Write1
    assert total[0][2] is None and total[2][2] is None
    assert found["device_to_device_bidirectional_memcpy_write_sm"][1][2] == 330.0 + 334.0

    bidir["bandwidth_description"] = "memcpy CE GPU(row) <-> GPU(column) Write2 bandwidth (GB/s)"
    with pytest.raises(ValueError, match="no Total description"):
        sc.parse_pairs(doc)
    bidir["bandwidth_matrix"] = bidir["bandwidth_matrix"][:-1]
    with pytest.raises(ValueError, match="not 3 x 3 blocks"):
        sc.parse_pairs(doc)


def test_pair_rows_compare_every_pair_like_with_like():
    def peer(s, d):
        return True

    def one_ce(s, d):
        return 400.0 - s

    def one_sm(s, d):
        return 390.0

    nvb = [
        _nvbandwidth_pairs(2, peer, one_ce, lambda s, d: (380.0, 382.0 + s), one_sm,
                           lambda s, d: (360.0, 360.0)),
        _nvbandwidth_pairs(2, peer, lambda s, d: one_ce(s, d) + 2, lambda s, d: (379.0, 381.0),
                           lambda s, d: 350.0, lambda s, d: (360.0, 360.0)),
    ]  # fmt: skip
    runs = [sc.parse_pairs(doc)[0] for doc in nvb]
    # the kit: one way a hair above nvbandwidth, both ways its Total, SM one way 10% low
    kit = _kit_pairs(
        2, peer, lambda a, b: 400.0 - a, lambda a, b: 762.0, lambda a, b: 333.0,
        lambda a, b: 720.0,
    )  # fmt: skip
    rows = sc.pair_rows(kit, 2, runs)
    assert [(r["pair"], r["test"]) for r in rows] == [
        ("0 -> 1", "ce_one_way"),
        ("1 -> 0", "ce_one_way"),
        ("0 <-> 1", "ce_both_ways"),
        ("0 -> 1", "sm_one_way"),
        ("1 -> 0", "sm_one_way"),
        ("0 <-> 1", "sm_both_ways"),
    ]
    by = {(r["pair"], r["test"]): r for r in rows}
    ce = by[("1 -> 0", "ce_one_way")]
    assert ce["reference_runs"] == [399.0, 401.0] and ce["reference"] == 400.0
    assert ce["kit"] == 399.0 and ce["verdict"] == "PASS"
    assert ce["nvbandwidth_test"] == "device_to_device_memcpy_write_ce"
    both = by[("0 <-> 1", "ce_both_ways")]
    # (0, 1) and (1, 0) of each run: 380+382, 380+383, 379+381, 379+381
    assert sorted(both["reference_runs"]) == [760.0, 760.0, 762.0, 763.0]
    assert both["reference"] == 761.0 and both["ratio"] == pytest.approx(762.0 / 761.0)
    sm = by[("0 -> 1", "sm_one_way")]
    assert sm["reference"] == 370.0 and sm["verdict"] == "FAIL"  # 333 / 370 = 0.90
    assert sc.drift(rows) == pytest.approx(40.0 / 370.0)  # SM one way: 390 before, 350 after
    text = sc.pair_table(rows)
    assert (
        "| 0 <-> 1 | ce_both_ways / device_to_device_bidirectional_memcpy_write_ce | 762.00 | "
        "761.00 | 1.0013 | PASS |" in text
    )
    assert (
        "| 0 -> 1 | sm_one_way / device_to_device_memcpy_write_sm | 333.00 | 370.00 | 0.9000 | FAIL |"
        in text
    )


def test_pairs_not_measured_on_either_side_read_not_run():
    def no_0_2(s, d):
        return {s, d} != {0, 2}

    doc = _nvbandwidth_pairs(
        3, no_0_2, lambda s, d: 50.0, lambda s, d: (40.0, 40.0), lambda s, d: 45.0,
        lambda s, d: (30.0, 30.0),
    )  # fmt: skip
    sm = doc["nvbandwidth"]["testcases"][2]
    doc["nvbandwidth"]["testcases"][2] = {"name": sm["name"], "status": "Waived"}
    found, missing = sc.parse_pairs(doc)
    assert missing == {"device_to_device_memcpy_write_sm": "Waived"}
    kit = _kit_pairs(
        3, no_0_2, lambda a, b: 50.0, lambda a, b: 80.0, lambda a, b: 45.0, lambda a, b: 60.0
    )
    rows = sc.pair_rows(kit, 3, [found])
    verdicts = {(r["pair"], r["test"]): r["verdict"] for r in rows}
    assert len(rows) == 2 * 6 + 2 * 3
    assert verdicts[("0 -> 2", "ce_one_way")] == "not run"  # no peer access: N/A both sides
    assert verdicts[("0 <-> 2", "ce_both_ways")] == "not run"
    assert verdicts[("0 -> 1", "ce_one_way")] == verdicts[("1 <-> 2", "ce_both_ways")] == "PASS"
    assert {v for (_, t), v in verdicts.items() if t == "sm_one_way"} == {"not run"}  # waived
    # no kit pair matrix at all (a CPU, or the kit's pair run failed): every row not run
    assert {r["verdict"] for r in sc.pair_rows(None, 2, [found])} == {"not run"}
    assert sc.drift(sc.pair_rows(None, 2, [])) is None


def test_the_pairs_recipe_holds_only_the_copy_benchmark_on_the_machine_s_gpus(tmp_path):
    import yaml

    path = sc.recipe_for(ROOT / "recipes/silicon.yaml", 2, tmp_path, "copy_bandwidth", 120)
    data = yaml.safe_load(path.read_text())
    assert data["timeout_s"] == 120
    assert data["gpus"] == 2 and [b["kind"] for b in data["benchmarks"]] == ["copy_bandwidth"]
    full = yaml.safe_load((ROOT / "recipes/silicon.yaml").read_text())
    assert data["benchmarks"][0] == next(
        b for b in full["benchmarks"] if b["kind"] == "copy_bandwidth"
    )
    with pytest.raises(ValueError, match="no nothing benchmark"):
        sc.recipe_for(ROOT / "recipes/silicon.yaml", 2, tmp_path, "nothing")
    # a derived recipe does not carry the verified_on of the one it came from (report review 8)
    gpt2 = yaml.safe_load(sc.recipe_for(ROOT / "recipes/gpt2_ddp.yaml", 4, tmp_path).read_text())
    assert "verified_on" in yaml.safe_load((ROOT / "recipes/gpt2_ddp.yaml").read_text())
    assert "verified_on" not in gpt2 and gpt2["gpus"] == 4
    p = data["benchmarks"][0]["params"]
    assert sc.nvbandwidth_args(p["pair_size_mib"], p["pair_loop_count"], p["pair_samples"],
                               list(sc.NVB_PAIR_TESTS))[:6] == [
        "-b", str(p["pair_size_mib"]), "--loopCount", str(p["pair_loop_count"]),
        "-i", str(p["pair_samples"]),
    ]  # fmt: skip
