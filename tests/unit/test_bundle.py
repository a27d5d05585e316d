"""The manifest: every file hashed, and any edit, removal or addition found."""

import hashlib
import json
import os
from pathlib import Path

import pytest

from kit.bundle import MANIFEST, Bundle, verify_manifest, write_manifest
from kit.io.errors import InputError
from tests.conftest import HEADER


def make(tmp_path):
    bundle = Bundle.create(tmp_path / "b", {"kit": 1, "name": "x"}, {**HEADER, "recipe": "x"})
    (bundle.path / "logs" / "a.log").write_text("hello\n")
    write_manifest(bundle.path)
    return bundle


def test_manifest_is_sha256sum_format(tmp_path):
    bundle = make(tmp_path)
    lines = (bundle.path / MANIFEST).read_text().splitlines()
    names = [line.split("  ", 1)[1] for line in lines]
    assert names == ["logs/a.log", "recipe.yaml", "results.json"]
    assert lines[0].split("  ")[0] == hashlib.sha256(b"hello\n").hexdigest()
    assert verify_manifest(bundle.path).ok


def test_verify_finds_changed_missing_and_extra(tmp_path):
    bundle = make(tmp_path)
    (bundle.path / "logs" / "a.log").write_text("edited\n")
    (bundle.path / "recipe.yaml").unlink()
    (bundle.path / "new.txt").write_text("x")
    check = verify_manifest(bundle.path)
    assert not check.ok
    assert (check.changed, check.missing, check.extra) == (
        ["logs/a.log"],
        ["recipe.yaml"],
        ["new.txt"],
    )


def test_a_folder_left_empty_by_removing_an_empty_folder_is_removed_too(tmp_path):
    """A run stopped before its spec was written leaves runs/<run>/ empty: the seal removes it
    and then runs/, which only held it (a stop-signal test found the bundle failing its check)."""
    bundle = Bundle.create(tmp_path / "b", {"kit": 1, "name": "x"}, {**HEADER, "recipe": "x"})
    (bundle.path / "runs" / "allreduce.p2p.r0" / "deeper").mkdir(parents=True)
    write_manifest(bundle.path)
    assert not (bundle.path / "runs").exists()
    assert verify_manifest(bundle.path).ok


def test_unsealed_bundle(tmp_path):
    bundle = Bundle.create(tmp_path / "b", {}, HEADER)
    with pytest.raises(InputError, match="never sealed"):
        verify_manifest(bundle.path)


def test_create_refuses_non_empty_dir(tmp_path):
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "f").write_text("x")
    with pytest.raises(InputError, match="already exists and is not empty"):
        Bundle.create(tmp_path / "b", {}, {})


def test_a_folder_that_is_no_bundle_is_named_so(tmp_path):
    """`kit verify /etc` must not advise `kit seal`: the folder is not a bundle at all."""
    with pytest.raises(
        InputError, match=r"not a kit bundle \(no results.json, no MANIFEST.sha256\)"
    ):
        verify_manifest(tmp_path)


def test_a_loaded_bundle_is_typed_when_a_writer_asks(tmp_path):
    """Bundle.load reads results.json without judging its fields (a received bundle's readers
    check the manifest first); a writer asking for `results` gets them typed, or one line."""
    bundle = make(tmp_path)
    text = (bundle.path / "results.json").read_text()
    (bundle.path / "results.json").write_text(text.replace('"running"', '"RUNNING"'))
    loaded = Bundle.load(bundle.path)  # no error yet
    with pytest.raises(InputError, match=r"^\S+results\.json: status: expected 'running'"):
        loaded.results  # noqa: B018
    (bundle.path / "results.json").write_text(text)
    again = Bundle.load(bundle.path)
    assert again.results.status == "running" and again.results.runs == []
    again.results.error = "stopped"  # set: written; defaults never set stay out of the file
    again.save()
    written = json.loads((bundle.path / "results.json").read_text())
    assert written == {**json.loads(text), "error": "stopped"}
    assert list(written) == [*json.loads(text), "error"]


def test_kit_commit_of_a_copy_without_git_comes_from_kit_commit(tmp_path):
    """A kit copied without .git (a GPU machine's copy of the tree) records the commit its
    copier states in $KIT_COMMIT; a value that is no commit is not recorded at all."""
    import shutil
    import subprocess
    import sys

    import kit

    shutil.copytree(
        Path(kit.__file__).parent, tmp_path / "kit", ignore=shutil.ignore_patterns("__pycache__")
    )
    sha = "0123456789abcdef0123456789abcdef01234567"

    def commit_with(value: str | None) -> str:
        env = {k: v for k, v in os.environ.items() if k != "KIT_COMMIT"}
        if value is not None:
            env["KIT_COMMIT"] = value
        env["PYTHONPATH"] = str(tmp_path)
        return subprocess.run(
            [sys.executable, "-c", "from kit.bundle import kit_commit; print(kit_commit())"],
            env=env, cwd=tmp_path, capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip

    assert commit_with(sha) == sha
    assert commit_with(sha + "-dirty") == sha + "-dirty"
    assert commit_with(None) == "None"
    assert commit_with("main; rm -rf /") == "None"
    # a copy whose .git is older than its tree: the stated commit wins; a bad one falls to git
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    subprocess.run(["git", "-C", str(tmp_path), "add", "kit"], check=True)
    subprocess.run(["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t",
                    "commit", "-qm", "old"], check=True)  # fmt: skip
    old = subprocess.run(["git", "-C", str(tmp_path), "rev-parse", "HEAD"], capture_output=True,
                         text=True, check=True).stdout.strip()  # fmt: skip
    assert commit_with(sha) == sha
    assert commit_with("main; rm -rf /") == old
    assert commit_with(None) == old
    # "-dirty" speaks of what the kit runs from: a re-rendered report in the checkout is not it
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "report.html").write_text("first")
    subprocess.run(["git", "-C", str(tmp_path), "add", "reports"], check=True)
    subprocess.run(["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t",
                    "commit", "-qm", "report"], check=True)  # fmt: skip
    head = subprocess.run(["git", "-C", str(tmp_path), "rev-parse", "HEAD"], capture_output=True,
                          text=True, check=True).stdout.strip()  # fmt: skip
    (tmp_path / "reports" / "report.html").write_text("re-rendered")
    assert commit_with(None) == head
    with (tmp_path / "kit" / "__init__.py").open("a") as f:
        f.write("\n# a local change\n")
    assert commit_with(None) == head + "-dirty"
