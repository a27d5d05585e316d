"""scripts/device/silicon_check.py's parts that run anywhere: unpacking a .deb without dpkg,
the nvcc build commands, reading nvbandwidth's JSON, and the kit-against-reference table.

The JSON below is written by hand after nvbandwidth's json_output.cpp (keys "nvbandwidth",
"testcases", "name", "status", "bandwidth_matrix", values as strings, "N/A" where unmeasured):
a test of the parser, not evidence of any measurement."""

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
