"""The second black-box pass (issue 37): outputs below a bundle or through a link, and the
references store fed an incomplete bundle or a label of two lines. Each is one line, exit 2,
before anything runs, and the bundle still verifies."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_kit

FIXTURE = ROOT / "tests" / "fixtures" / "bundles" / "cpu-smoke"
EXAMPLE = ROOT / "reports" / "examples" / "h200x2-allreduce"


def one_line_exit_2(proc, words: str) -> None:  # type: ignore[no-untyped-def]
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = [x for x in proc.stderr.strip().splitlines() if x.startswith("kit: error")]
    assert len(lines) == 1 and words in lines[0], proc.stderr


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    b = tmp_path / "theirs"
    shutil.copytree(EXAMPLE, b)
    return b


def test_a_new_bundle_below_another_or_through_a_link_is_refused(tmp_path, bundle):
    link = tmp_path / "link"
    link.symlink_to(bundle)
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "nowhere")
    for out, words in [
        (bundle / "runs" / "deep" / "x", "is inside the bundle"),
        (link / "x", "is inside the bundle"),
        (dangling, "is a symbolic link"),
    ]:
        proc = run_kit("reproduce", "recipes/allreduce.yaml", "--device", "cpu", "--smoke",
                       "--repeats", "1", "--out", str(out))  # fmt: skip
        one_line_exit_2(proc, words)
    assert not (tmp_path / "nowhere").exists()
    assert run_kit("verify", str(bundle)).returncode == 0


def test_compare_below_a_bundle_makes_nothing_there(tmp_path, bundle):
    twin = tmp_path / "twin"
    shutil.copytree(FIXTURE, twin)
    for out in (bundle / "a" / "b" / "c", bundle / "runs" / "x"):
        proc = run_kit("compare", str(FIXTURE), str(twin), "--out", str(out))
        one_line_exit_2(proc, "is inside the bundle")
    assert not (bundle / "a").exists() and not (bundle / "runs" / "x").exists()
    assert run_kit("verify", str(bundle)).returncode == 0


def test_the_references_store_inside_a_bundle_is_refused(tmp_path, bundle):
    env = {**os.environ, "KIT_REFS_DB": str(bundle / "refs.sqlite")}
    proc = run_kit("refs", "add", str(FIXTURE), "--label", "mine", env=env)
    one_line_exit_2(proc, "is inside the bundle")
    assert not (bundle / "refs.sqlite").exists()


def test_refs_add_takes_only_a_complete_bundle_and_a_one_line_label(tmp_path):
    env = {**os.environ, "KIT_REFS_DB": str(tmp_path / "refs.sqlite")}
    proc = run_kit("refs", "add", str(FIXTURE), "--label", "a\nb", env=env)
    one_line_exit_2(proc, "--label")
    proc = run_kit("refs", "add", str(FIXTURE), "--label", "h200x4-allreduce", env=env)
    one_line_exit_2(proc, "the name of a shipped reference")
    partial = tmp_path / "partial"  # an interrupted bundle, sealed as such
    shutil.copytree(ROOT / "tests" / "fixtures" / "bundles" / "synthetic-failures", partial)
    assert run_kit("seal", str(partial)).returncode == 0
    proc = run_kit("refs", "add", str(partial), "--label", "partial", env=env)
    one_line_exit_2(proc, "not every planned run finished")
    assert "partial" not in run_kit("refs", "list", env=env).stdout


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("--against", "3_30GB/s"), "not a published figure's id"),
        (("--against", "0GB/s"), "must be more than 0"),
        (("--against", "330GB/s", "--tolerance", "0.0_5"), "a fraction (0.05)"),
        (("--against", "330GB/s", "--tolerance", "\uff10.\uff10\uff15"), "a fraction (0.05)"),
        (("--against", "\uff13\uff13\uff10GB/s"), "not a published figure's id"),
        (("--against", "330 GB / s"), "not a published figure's id"),
        (("--against", "330GB/s", "--tolerance", "busbw_largest = 0.1"), "a fraction (0.05)"),
        (("--against", "330\u00a0GB/s"), "not a published figure's id"),
    ],
)
def test_numbers_that_only_look_like_numbers_are_refused(args, words):
    one_line_exit_2(run_kit("accept", str(FIXTURE), *args), words)
