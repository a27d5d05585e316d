"""Issue 49: what a run loaded, the one verdict on two environments, and the pin rule.

In-process and fast: the worker's record of what it loaded (kit.worker.loaded) and the
library-hash memo the driver places for it (kit.runtime.hashmemo), the content diff sorted loaded
/ not loaded (kit.env.content), its sentence (kit.env.check), and kit.model.environment.pin_of.
"""

from __future__ import annotations

import hashlib
import json
import os

from kit.env.check import check
from kit.env.content import Side, content_diff
from kit.model import Environment, Loaded, Software
from kit.model.environment import LOCAL_BASE, pin_of
from kit.runtime.hashmemo import HashMemo, scope_of
from kit.runtime.images.image import _worker_sources, worker_module_digest
from kit.shared import files
from kit.worker import loaded

SHA = {c: c * 64 for c in "abcdef0123456789"}
LIBC = "/usr/lib/x86_64-linux-gnu/libc.so.6"
TORCH_LIB = "/opt/venv/lib/python3.11/site-packages/torch/lib/libtorch_cpu.so"


# --- what a run loaded ------------------------------------------------------------------------

MAPS = f"""55d0-55d1 r--p 00000000 08:01 1 /usr/bin/python3.11
7f00-7f01 r--p 00000000 08:01 2 {LIBC}
7f01-7f02 r-xp 00001000 08:01 2 {LIBC}
7f02-7f03 rw-p 00000000 00:00 0
7f03-7f04 r--p 00000000 08:01 3 /usr/lib/locale/locale-archive
7f04-7f05 r--p 00000000 08:01 4 /tmp/gone.so (deleted)
7f05-7f06 rw-s 00000000 00:05 5 /dev/shm/nccl-x
7f06-7f07 r-xp 00000000 08:01 6 /tmp/torchinductor_root/ab/cab.so
7f07-7f08 r-xp 00000000 08:01 7 /root/.triton/cache/Xy/cuda_utils.so
7ffc-7ffd rw-p 00000000 00:00 0 [stack]
"""


def test_mapped_paths_are_libraries_and_the_interpreter_once(monkeypatch):
    """Not the kernels a run compiles for itself (torch.compile's, Triton's): run products."""
    monkeypatch.delenv("TMPDIR", raising=False)
    assert loaded.mapped_paths(MAPS, "/usr/bin/python3.11") == ["/usr/bin/python3.11", LIBC]


class Module:
    def __init__(self, path: str | None, package: bool = False) -> None:
        self.__file__ = path
        if package:
            self.__path__ = [os.path.dirname(path or "")]


def test_top_modules_are_absolute_and_packages_known(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    modules = {
        "here": Module("here.py"),
        "json": Module("/usr/lib/python3/json/__init__.py", package=True),
        "json.decoder": Module("/usr/lib/python3/json/decoder.py"),
        "sys": Module(None),
        # Triton's launcher, compiled into its cache on each machine (a rerun on another H200,
        # 2026-11-29, named it as an environment difference), and torch.compile's code
        "cuda_utils": Module("/root/.triton/cache/5f3a/cuda_utils.cpython-312-x86_64-linux-gnu.so"),
        "cabc123": Module("/tmp/torchinductor_root/ab/cabc123.py"),
    }
    assert loaded.top_modules(modules) == {
        "here": (str(tmp_path / "here.py"), False),
        "json": ("/usr/lib/python3/json/__init__.py", True),
    }


def test_a_module_digest_is_its_content_not_which_files_a_run_imported(tmp_path):
    site = tmp_path / "site-packages"
    (site / "pkg").mkdir(parents=True)
    (site / "pkg" / "__init__.py").write_text("")
    (site / "pkg" / "lazy.py").write_text("x = 1\n")  # imported by some runs only
    init = str(site / "pkg" / "__init__.py")

    def digest() -> str:
        return loaded.module_digest("pkg", init, True, loaded.Owners(), loaded.Memo())

    first = digest()
    assert digest() == first
    (site / "pkg" / "lazy.py").write_text("x = 2\n")  # a file no run imported changed
    assert digest() != first
    # a distribution provides it: its RECORD decides, as the image's inventory lists it
    info = site / "pkg-1.0.dist-info"
    info.mkdir()
    (info / "RECORD").write_text("pkg/__init__.py,sha256=A,0\npkg/lazy.py,sha256=B,6\n")
    by_record = digest()
    (site / "pkg" / "lazy.py").write_text("x = 3\n")
    assert digest() == by_record != first
    (info / "RECORD").write_text("pkg/__init__.py,sha256=A,0\npkg/lazy.py,sha256=C,6\n")
    assert digest() != by_record


def test_memo_hashes_a_file_once_and_again_when_it_changes(tmp_path):
    f = tmp_path / "libx.so"
    f.write_bytes(b"one")
    memo = loaded.Memo()
    first = memo.sha256(str(f))
    assert first == hashlib.sha256(b"one").hexdigest() and memo.read_bytes == 3
    assert memo.sha256(str(f)) == first and memo.read_bytes == 3  # not read again
    f.write_bytes(b"two!")
    os.utime(f, ns=(1, 1))
    assert memo.sha256(str(f)) == hashlib.sha256(b"two!").hexdigest() and memo.read_bytes == 7


def test_record_reuses_and_extends_the_memo_the_driver_placed(tmp_path, monkeypatch):
    monkeypatch.setattr(loaded, "made_by_run", lambda path: False)  # tmp_path is under /tmp
    lib = tmp_path / "libkit.so.1"
    lib.write_bytes(b"library")
    maps = tmp_path / "maps"
    maps.write_text(f"7f00-7f01 r-xp 00000000 08:01 2 {lib}\n")
    st = lib.stat()
    memo_path = tmp_path / files.HASH_MEMO
    memo_path.write_text(json.dumps({str(lib): [st.st_size, st.st_mtime_ns, SHA["a"]]}))
    rec = loaded.record(tmp_path, str(maps))
    assert rec is not None and rec["libraries"] == {str(lib): SHA["a"]}  # the memo's word
    assert rec["read_bytes"] == 0 and "kit" in rec["modules"] and "json" in rec["modules"]
    Loaded.model_validate(rec)  # the driver's model reads what the worker wrote
    assert set(json.loads(memo_path.read_text())) == {str(lib)}  # libraries only, written back
    memo_path.unlink()
    rec = loaded.record(tmp_path, str(maps))
    assert rec["libraries"] == {str(lib): hashlib.sha256(b"library").hexdigest()}
    assert not memo_path.exists()  # no memo placed: none made


def test_the_driver_places_the_memo_and_keeps_what_the_worker_added(tmp_path, monkeypatch):
    monkeypatch.setenv("KIT_CACHE", str(tmp_path / "cache"))
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    scope = scope_of({"image_id": "sha256:" + SHA["b"]})
    with HashMemo(run_dir, scope) as memo:
        assert json.loads(memo.path.read_text()) == {}
        memo.path.write_text(json.dumps({"/lib/a.so": [1, 2, SHA["c"]], "bad": [1]}))
    assert not memo.path.exists()
    with HashMemo(run_dir, scope) as again:
        assert json.loads(again.path.read_text()) == {"/lib/a.so": [1, 2, SHA["c"]]}
    with HashMemo(run_dir, scope_of({"python_executable": "/usr/bin/python3"})) as other:
        assert json.loads(other.path.read_text()) == {}  # another scope: its own memo
    with HashMemo(run_dir, None):
        assert not (run_dir / files.HASH_MEMO).exists()


# --- the content diff and its verdict ---------------------------------------------------------


def software(**changes) -> Software:
    data = {
        "image_id": "sha256:" + SHA["1"],
        "distributions": [
            {"name": "torch", "version": "2.13.0+cpu", "sha256": SHA["a"], "top": ["torch"]},
            {"name": "six", "version": "1.16.0", "sha256": SHA["b"], "top": ["six"]},
        ],
        "debian": [
            {
                "name": "libc6",
                "version": "2.36",
                "arch": "amd64",
                "sha256": SHA["c"],
                "libs": [LIBC],
            },
            {"name": "tzdata", "version": "2024a", "arch": "all", "sha256": SHA["d"], "libs": []},
        ],
        "libraries": [
            {"path": "/usr/local/cuda/lib64/libcublas.so.13", "size": 1, "sha256": SHA["e"]}
        ],
        "variables": {"CUDA_VERSION": "13.0", "NCCL_NVLS_ENABLE": "0"},
    }
    data.update(changes)
    return Software.model_validate(data)


def ran(**libraries) -> Loaded:
    libs = {LIBC: SHA["c"], TORCH_LIB: SHA["f"], **libraries}
    return Loaded.model_validate(
        {"libraries": libs, "modules": {"torch": "0" * 16, "json": "1" * 16}}
    )


def env(image_id: str, **fields) -> Environment:
    return Environment.model_validate(
        {
            "name": "cpu",
            "pinned": True,
            "runtime": "docker",
            "engine": "docker",
            "placement": "local",
            "image_id": image_id,
            "base_image": "kit-test-base:bookworm",
            **fields,
        }
    )


def test_only_unloaded_differences_match_with_their_count():
    old = Side(env("sha256:" + SHA["1"]), software(), (ran(),))
    planted = software(image_id="sha256:" + SHA["2"])
    planted.debian.append(planted.debian[1].model_copy(update={"name": "kit-planted"}))
    planted.variables["NV_LIBCUBLAS_VERSION"] = "13.0.2"
    new = Side(env("sha256:" + SHA["2"]), planted, (ran(),))
    diff = content_diff(old, new)
    assert [c.words() for c in diff.changes] == [
        "debian kit-planted:all 2024a: only here",
        "variable NV_LIBCUBLAS_VERSION 13.0.2: only here",
    ]
    assert diff.matches and not diff.same_image and not diff.loaded
    chk = check(old, new)
    assert chk.matches
    assert chk.sentence() == (
        "The environment matches: nothing the runs loaded differs (2 differences present but "
        "not loaded)."
    )


def test_a_loaded_difference_is_named_and_the_unloaded_counted_beside():
    old = Side(env("sha256:" + SHA["1"]), software(), (ran(),))
    sw = software(image_id="sha256:" + SHA["2"])
    sw.distributions[0] = sw.distributions[0].model_copy(update={"version": "2.14.0+cpu"})
    sw.distributions[1] = sw.distributions[1].model_copy(update={"sha256": SHA["0"]})  # six
    sw.debian[0] = sw.debian[0].model_copy(update={"version": "2.37"})  # libc6: its lib mapped
    sw.variables["NCCL_NVLS_ENABLE"] = "1"  # read at run time
    new = Side(env("sha256:" + SHA["2"]), sw, (ran(**{TORCH_LIB: SHA["9"], LIBC: SHA["8"]}),))
    diff = content_diff(old, new)
    assert [(c.kind, c.name, c.loaded) for c in diff.changes] == [
        ("python", "torch", True),
        ("debian", "libc6:amd64", True),
        ("variable", "NCCL_NVLS_ENABLE", True),
        ("python", "six", False),  # same version, other files, never imported
    ]
    six = diff.changes[-1]
    assert six.old == "1.16.0 (sha256 bbbbbbbbbbbb)" and six.new == "1.16.0 (sha256 000000000000)"
    # the mapped libtorch and libc are their packages' files: named by the packages, not again
    assert not [c for c in diff.changes if c.kind == "library"]
    chk = check(old, new)
    assert not chk.matches
    assert chk.sentence() == (
        "The environment differs in what the runs loaded: python torch 2.14.0+cpu vs 2.13.0+cpu; "
        "debian libc6:amd64 2.37 vs 2.36; variable NCCL_NVLS_ENABLE 1 vs 0 (1 difference present "
        "but not loaded)."
    )
    record = chk.record()
    assert [c.name for c in record.loaded] == ["torch", "libc6:amd64", "NCCL_NVLS_ENABLE"]
    assert [c.name for c in record.unloaded] == ["six"] and not record.matches


def test_same_image_still_names_a_library_mounted_from_the_host():
    image = "sha256:" + SHA["1"]
    driver = "/usr/lib/x86_64-linux-gnu/libcuda.so."
    old = Side(env(image), software(), (ran(**{driver + "580.95.05": SHA["3"]}),))
    new = Side(env(image), software(), (ran(**{driver + "570.10": SHA["4"]}),))
    diff = content_diff(old, new)
    assert diff.same_image and [c.words() for c in diff.changes] == [
        f"library {driver[:-1]}.*: libcuda.so.580.95.05 (sha256 333333333333) (baseline) -> "
        "libcuda.so.570.10 (sha256 444444444444) (here)"
    ]
    assert (
        check(old, new)
        .sentence()
        .startswith(f"Same image ({image[:19]}), but the environment differs")
    )
    same = Side(env(image), software(), (ran(**{driver + "580.95.05": SHA["3"]}),))
    assert check(old, same).sentence() == f"Same image ({image[:19]}): the environment matches."


def test_base_layers_that_differ_outside_every_listed_file_are_a_note():
    old = Side(
        env("sha256:" + SHA["1"], base_image_content=SHA["5"], content_hash="x"),
        software(),
        (ran(),),
    )
    new_sw = software(image_id="sha256:" + SHA["2"])
    new = Side(
        env("sha256:" + SHA["2"], base_image_content=SHA["6"], content_hash="x"), new_sw, (ran(),)
    )
    chk = check(old, new)
    assert chk.matches and not chk.versions
    assert [d.field for d in chk.notes] == ["base_image_content", "image_id"]
    assert chk.sentence().endswith(
        "nothing the runs loaded differs; the base images' layers differ only in files outside "
        "every package, library and variable listed."
    )


def test_without_run_records_every_difference_may_matter():
    old = Side(env("sha256:" + SHA["1"]), software(), ())
    planted = software(image_id="sha256:" + SHA["2"])
    planted.variables["NV_X_VERSION"] = "1"
    diff = content_diff(old, Side(env("sha256:" + SHA["2"]), planted, ()))
    assert [c.loaded for c in diff.changes] == [True] and not diff.matches


def test_host_runs_compare_their_modules_and_libraries_directly():
    host = Environment.model_validate({"pinned": False, "runtime": "host"})
    a = Loaded.model_validate({"libraries": {LIBC: SHA["c"]}, "modules": {"json": "1" * 16}})
    b = Loaded.model_validate({"libraries": {LIBC: SHA["d"]}, "modules": {"json": "2" * 16}})
    diff = content_diff(Side(host, None, (a,)), Side(host, None, (b,)))
    assert [(c.kind, c.name) for c in diff.loaded] == [("library", LIBC), ("module", "json")]
    assert not check(Side(host, None, (a,)), Side(host, None, (a,))).content.changes


def test_nothing_compared_falls_back_to_the_versions():
    old = Side(env("sha256:" + SHA["1"]), None, ())
    chk = check(old, Side(env("sha256:" + SHA["2"]), None, ()))
    assert not chk.content.compared and chk.matches
    assert "what the images hold was not listed on both sides" in chk.sentence()


# --- pinned means pinned ----------------------------------------------------------------------


def test_pinned_only_by_digest_or_an_exported_archive():
    digest = "sha256:" + SHA["a"]
    assert pin_of("kit-test-base:bookworm", None) == (False, LOCAL_BASE)
    assert pin_of(f"python:3.11@{digest}", None) == (True, f"base image by digest {digest}")
    assert pin_of("nvcr.io/nvidia/pytorch:25.10-py3", digest)[0]  # pulled: the registry's digest
    assert pin_of("mine:local", None, "/x/kit-cpu.tar", "sha256:" + SHA["b"]) == (
        True,
        f"the image of a kit export archive, by its image id sha256:{SHA['b']}",
    )
    old = env("sha256:" + SHA["1"], name="ngc-pytorch")  # an older kit called it pinned
    assert old.pin() == (False, LOCAL_BASE)
    assert old.shown_name() == f"ngc-pytorch FROM kit-test-base:bookworm ({LOCAL_BASE})"
    host = Environment.model_validate({"pinned": False, "runtime": "host", "name": "cuda13"})
    assert host.pin() == (False, None) and host.shown_name() == "cuda13"


def test_the_driver_knows_the_kit_digest_a_run_in_its_image_records(tmp_path):
    """A rerun's check before the runs compares the kit's own code (no inventory lists it): the
    driver's digest of the files it puts in the image is the one a run there records."""
    site = tmp_path / "opt" / "kit"  # as the Dockerfile lays the worker out: /opt/kit/kit
    for rel, f in _worker_sources():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_bytes(f.read_bytes())
    init = str(site / "kit" / "__init__.py")
    recorded = loaded.module_digest("kit", init, True, loaded.Owners(), loaded.Memo())
    assert worker_module_digest() == recorded
    (site / "kit" / "workloads" / "llm_decode" / "kernels.py").write_text("# changed\n")
    changed = loaded.module_digest("kit", init, True, loaded.Owners(), loaded.Memo())
    assert changed != recorded


def test_before_the_runs_a_changed_kit_is_named_as_loaded():
    """Call 18 (2026-11-29): a rerun read "environment matches" before its runs though the kit's
    decode kernels had changed since the bundle; the runs' record named it only afterwards."""
    env = Environment(runtime="docker", name="cpu", pinned=False)
    bundle = Side(env, None, (Loaded(modules={"kit": "440f3cdb29d78b19", "torch": "t"}),))
    here = Side(env, None, (Loaded(modules={"kit": worker_module_digest()}),))
    chk = check(bundle, here)
    assert not chk.matches
    assert [(c.kind, c.name, c.loaded) for c in chk.content.loaded] == [("module", "kit", True)]
    same = Side(env, None, (Loaded(modules={"kit": worker_module_digest()}),))
    assert check(same, here).matches


def test_a_content_hash_alone_reads_as_how_the_image_was_made():
    """A rerun with no inventory on the bundle's side (2x H200, 2026-11-29) named only the image
    content hash, under "the versions the runs read": a hash is not a version, and it covers the
    kit's own files, which the sentence must say."""
    old = Side(env("sha256:" + SHA["1"], content_hash=SHA["b"]), None, ())
    new = Side(env("sha256:" + SHA["2"], content_hash=SHA["c"]), None, ())
    sentence = check(old, new).sentence()
    assert sentence == (
        "The environment differs in how the image was made: image content hash "
        f"{SHA['c'][:12]} vs {SHA['b'][:12]} (its Dockerfile, lock, build arguments and the kit's "
        "own files)."
    )
    both = Side(
        env("sha256:" + SHA["2"], content_hash=SHA["c"], container={"torch": "2.14.0"}), None, ()
    )
    was = Side(
        env("sha256:" + SHA["1"], content_hash=SHA["b"], container={"torch": "2.13.0"}), None, ()
    )
    assert (
        check(was, both)
        .sentence()
        .startswith(
            "The environment differs in the versions the runs read and how the image was made: "
            "torch 2.14.0 vs 2.13.0; image content hash"
        )
    )
