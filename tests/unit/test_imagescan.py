"""Issue 49: what an image holds, read inside it (kit.shared.imagescan), and its inventory made
once per image id (kit.runtime.images.software). In-process and fast."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from kit.model import Software
from kit.runtime.images import software as inventories
from kit.shared import imagescan

SHA = {c: c * 64 for c in "0123456789"}


# --- the scan inside the image ----------------------------------------------------------------

STATUS = """Package: libc6
Status: install ok installed
Architecture: amd64
Version: 2.36-9+deb12u9
Description: GNU C Library
 a continuation line: Package: not-a-package

Package: removed-one
Status: deinstall ok config-files
Version: 1.0

Package: kit-planted
Status: install ok installed
Architecture: all
Version: 1.0
"""


def test_dpkg_status_lists_installed_packages_only():
    assert imagescan.parse_dpkg_status(STATUS) == [
        {"name": "kit-planted", "version": "1.0", "arch": "all"},
        {"name": "libc6", "version": "2.36-9+deb12u9", "arch": "amd64"},
    ]


def test_record_digest_is_the_content_not_the_installer():
    record = "torch/__init__.py,sha256=AAA,10\ntorch/lib/libtorch_cpu.so,sha256=BBB,20\n"
    meta = "torch-2.13.0.dist-info/direct_url.json,sha256=CCC,5\n../../../bin/torchrun,sha256=D,1\n"
    pyc = "torch/__pycache__/x.cpython-311.pyc,,\n"
    digest = imagescan.record_digest(record)
    # installed from another path (direct_url.json), a script naming another interpreter: same
    assert imagescan.record_digest(record + meta + pyc) == digest
    # one file of the distribution's own changed: another digest
    assert imagescan.record_digest(record.replace("BBB", "BBC")) != digest
    assert imagescan.record_digest(None) is None and imagescan.record_digest(meta) is None


def test_top_names_from_top_level_or_record():
    assert imagescan.top_names(None, "yaml\n_yaml\n") == ["_yaml", "yaml"]
    record = "six.py,sha256=A,1\npeft/__init__.py,sha256=B,2\n_cffi.cpython-311.so,sha256=C,3\n"
    record += "peft-0.21.0.dist-info/RECORD,,\nnumpy.libs/libx.so,sha256=D,4\n"
    assert imagescan.top_names(record, None) == ["_cffi", "peft", "six"]


def test_cuda_libraries_and_variables_by_name():
    for name in (
        "libcuda.so.1",
        "libcudnn_ops.so.9",
        "libnccl.so.2",
        "libnvidia-ml.so.1",
        "libcublasLt.so.13.0.2.14",
        "libcudart.so.13",
    ):
        assert imagescan.CUDA_LIBRARY.match(name), name
    for name in ("libcurl.so.4", "libcups.so.2", "libc.so.6", "libcuda.so.1.txt"):
        assert not imagescan.CUDA_LIBRARY.match(name), name
    env = {
        "NV_CUDNN_VERSION": "9.1",
        "CUDA_VERSION": "13.0",
        "NCCL_NVLS_ENABLE": "0",
        "HOSTNAME": "abc",
        "HOME": "/root",
        "LD_LIBRARY_PATH": "/x",
        "PYTORCH_VERSION": "2",
    }
    assert list(imagescan.variables(env)) == [
        "CUDA_VERSION",
        "LD_LIBRARY_PATH",
        "NCCL_NVLS_ENABLE",
        "NV_CUDNN_VERSION",
        "PYTORCH_VERSION",
    ]


def test_debian_packages_carry_their_md5sums_hash_and_real_library_paths(tmp_path):
    lib = tmp_path / "lib" / "libplanted.so.1.0"
    lib.parent.mkdir()
    lib.write_bytes(b"\x7fELF")
    (tmp_path / "lib" / "libplanted.so.1").symlink_to(lib.name)
    info = tmp_path / "dpkg" / "info"
    info.mkdir(parents=True)
    (tmp_path / "dpkg" / "status").write_text(STATUS)
    (info / "kit-planted.list").write_text(f"/.\n{tmp_path}/lib/libplanted.so.1\n/usr/share/x\n")
    (info / "kit-planted.md5sums").write_text("abc  lib/libplanted.so.1.0\n")
    truncated: list[str] = []
    pkgs = {p["name"]: p for p in imagescan.debian(truncated, root=str(tmp_path / "dpkg"))}
    assert pkgs["kit-planted"]["libs"] == [str(lib)]  # the link resolved to the file mapped
    assert (
        pkgs["kit-planted"]["sha256"] == hashlib.sha256(b"abc  lib/libplanted.so.1.0\n").hexdigest()
    )
    assert pkgs["libc6"]["sha256"] is None and pkgs["libc6"]["libs"] == [] and truncated == []


# --- the inventory, cached by image id --------------------------------------------------------


def test_inventory_is_made_once_per_image_id(tmp_path, monkeypatch):
    monkeypatch.setenv("KIT_CACHE", str(tmp_path))
    calls: list[list[str]] = []

    def probe(tag, client, engine=None, command=None, wait_s=0):
        calls.append(command)
        return {
            "scan_version": 1,
            "python": "3.11.2",
            "distributions": [],
            "debian": [],
            "libraries": [],
            "variables": {"CUDA_VERSION": "13.0"},
            "truncated": [],
        }

    monkeypatch.setattr(inventories, "probe", probe)
    image_id = "sha256:" + SHA["7"]
    data, from_cache = inventories.inventory("kit-cpu:abc", image_id, client=None)
    assert not from_cache and calls[0][:2] == ["python", "-c"] and "def scan()" in calls[0][2]
    assert data["image_id"] == image_id and data["schema"] == 1
    again, from_cache = inventories.inventory("kit-cpu:other", image_id, client=None)
    assert from_cache and len(calls) == 1 and again["image_tag"] == "kit-cpu:other"
    assert "(cached)" in inventories.line(again, True)
    inventories.cache_path(image_id).write_text("{not json")  # a broken cache is made again
    assert not inventories.inventory("kit-cpu:abc", image_id, client=None)[1] and len(calls) == 2
    with pytest.raises(Exception, match="not a content hash"):
        inventories.cache_path("../../etc")


def test_the_scan_is_standard_library_only_and_runs_as_a_script():
    """`python -c SOURCE` in an image that has nothing of the kit: no kit import in it."""
    assert "import kit" not in inventories.SOURCE and "from kit" not in inventories.SOURCE
    assert Path(imagescan.__file__).read_text() == inventories.SOURCE


def test_an_image_without_a_dpkg_database_says_so_not_zero_packages():
    """The device machines' images were built FROM a base imported from the host's /usr, /opt
    and /etc: Ubuntu's os-release and no /var/lib/dpkg. The report read "0 Debian packages" in
    an Ubuntu image (the review); the scan now records whether the database was there."""
    here = imagescan.scan()
    assert here["scan_version"] == 2
    assert here["dpkg_status"] is Path(imagescan.DPKG_STATUS).is_file()
    none = Software.model_validate({"dpkg_status": False, "os": "Ubuntu 24.04.3 LTS"})
    assert "no Debian package database (no /var/lib/dpkg/status)" in none.summary()
    assert "0 Debian packages" not in none.summary()
    some = Software.model_validate({"dpkg_status": True, "debian": [{"name": "a", "version": "1"}]})
    assert "1 Debian packages" in some.summary()
    older = Software.model_validate({"scan_version": 1})  # a record from before: it cannot say
    assert "no Debian packages on record (/var/lib/dpkg/status absent or empty)" in older.summary()
