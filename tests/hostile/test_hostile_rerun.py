"""A rerun of someone else's bundle opens no path the bundle names, and no command writes into a
bundle it reads (a rerun's --out, kit accept's --json).

The sender edits a Llama bundle's recipe so that its params name `model_path: /etc` or a
`data_path` holding a pickle, and reseals it; a rerun must refuse each before any run, with one
line naming the parameter, unless the user names the same path again with --allow-path. And
`--out` inside the source bundle (or the source itself) is refused: the source would no longer
verify.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kit.bundle import verify_manifest, write_manifest
from kit.model.loader import read_recipe
from kit.run.rerun_paths import check_paths
from tests.conftest import ROOT, run_kit

LLAMA = ROOT / "reports" / "examples" / "h200x2-fsdp-llama"
SMOKE = ROOT / "tests" / "fixtures" / "bundles" / "cpu-smoke"


def hostile(tmp_path: Path, section_line: str, value: str) -> Path:
    b = tmp_path / "b"
    shutil.copytree(LLAMA, b)
    text = (b / "recipe.yaml").read_text()
    assert section_line in text
    (b / "recipe.yaml").write_text(
        text.replace(section_line, section_line.split(":")[0] + f": {value}", 1)
    )
    write_manifest(b)
    return b


CASES = {
    "model-path-etc": ("    model_path: ''", "/etc"),
    "data-path-pickle": ("    data_path: ''", "/tmp/tokens.pt"),
    "model-path-relative": ("    model_path: ''", "../../home/user/.ssh"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_paths_a_bundle_names_are_refused_unless_named_again(tmp_path, case):
    line, value = CASES[case]
    b = hostile(tmp_path, line, value)
    proc = run_kit(
        "reproduce", str(b), "--out", str(tmp_path / "r"), "--device", "cpu", timeout=120
    )
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert line.split(":")[0].strip() in proc.stderr and "--allow-path" in proc.stderr
    assert not (tmp_path / "r").exists()
    other = run_kit("reproduce", str(b), "--out", str(tmp_path / "r"), "--allow-path", "/nope",
                    timeout=120)  # fmt: skip
    assert other.returncode == 2 and not (tmp_path / "r").exists()
    recipe = read_recipe(b)
    check_paths(b, recipe, (Path(value),))  # named again: the user's to open


def test_allow_path_that_the_bundle_does_not_name_is_refused(tmp_path):
    b = tmp_path / "b"
    shutil.copytree(SMOKE, b)
    proc = run_kit("reproduce", str(b), "--allow-path", "/etc", "--out", str(tmp_path / "r"))
    assert proc.returncode == 2 and "names no such path" in proc.stderr
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("where", ["sub", "deep/er", "."])
def test_a_rerun_never_writes_inside_its_source(tmp_path, where):
    b = tmp_path / "b"
    shutil.copytree(SMOKE, b)
    out = b / where
    proc = run_kit("reproduce", str(b), "--out", str(out), timeout=120)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "inside the bundle" in proc.stderr
    assert verify_manifest(b).ok
    inside = run_kit("reproduce", ".", cwd=b, timeout=120)  # the default --out: ./reports
    assert inside.returncode == 2 and "inside the bundle" in inside.stderr
    assert verify_manifest(b).ok


@pytest.mark.parametrize("where", ["x.json", "logs/y.json", "runs/z.json"])
def test_accept_never_writes_its_json_inside_a_bundle_it_reads(tmp_path, where):
    b = tmp_path / "b"
    shutil.copytree(SMOKE, b)
    proc = run_kit("accept", str(b), "--against", "1GB/s", "--json", str(b / where))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "inside the bundle" in proc.stderr and not (b / where).exists()
    assert verify_manifest(b).ok
