"""Hostile cases of the sixth black-box pass (issue 37): what it found and what its fixes hold."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from kit.bundle import write_manifest
from tests.conftest import ROOT, run_kit

SMOKE = ROOT / "tests" / "fixtures" / "bundles" / "cpu-smoke"


@pytest.mark.parametrize("where", ["kit_version", "key"])
def test_a_megabyte_long_text_in_a_resealed_bundle_is_refused_in_one_line(tmp_path, where):
    """A 5 MB kit_version (or key) stalled `kit report` past three minutes: every reader now
    refuses a text longer than any the kit writes, in one line, before rendering anything."""
    b = tmp_path / "b"
    shutil.copytree(SMOKE, b)
    data = json.loads((b / "results.json").read_text())
    if where == "key":
        data["runs"][0]["env"]["K" * 5_000_000] = "1"
    else:
        data["kit_version"] = "v" * 5_000_000
    (b / "results.json").write_text(json.dumps(data))
    write_manifest(b)
    for args in (["report", str(b)], ["verify", str(b)], ["accept", str(b), "--against", "1GB/s"],
                 ["compare", str(b), str(SMOKE), "--out", str(tmp_path / "c")]):  # fmt: skip
        t0 = time.monotonic()
        proc = run_kit(*args, timeout=120)
        assert proc.returncode == 2, (args, proc.stderr[-500:])
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and "characters" in lines[0] and len(lines[0]) < 400, lines[:2]
        assert time.monotonic() - t0 < 60
    assert not (tmp_path / "c").exists()


def test_a_bundle_whose_results_name_another_recipe_is_refused(tmp_path):
    """results.json naming a recipe its recipe.yaml is not (resealed): `refs add` stored it and
    `kit compare` compared it; every reader refuses it in one line."""
    b = tmp_path / "b"
    shutil.copytree(SMOKE, b)
    data = json.loads((b / "results.json").read_text())
    data["recipe"] = "fsdp_llama"
    (b / "results.json").write_text(json.dumps(data))
    write_manifest(b)
    env = {"KIT_REFS_DB": str(tmp_path / "refs.db")}
    for args in (["refs", "add", str(b), "--label", "L"], ["accept", str(b), "--against", "1GB/s"],
                 ["compare", str(b), str(SMOKE), "--out", str(tmp_path / "c")]):  # fmt: skip
        proc = run_kit(*args, timeout=120, env={**os.environ, **env})
        assert proc.returncode == 2, (args, proc.stderr[-500:])
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and "recipe.yaml is 'allreduce'" in lines[0], lines
    listed = run_kit("refs", "list", timeout=120, env={**os.environ, **env})
    assert "L" not in listed.stdout.split()


def test_an_oversized_signature_is_a_broken_signature(tmp_path):
    """A 20 MB MANIFEST.sha256.sig was a usage error (exit 2) in `kit verify`: it is a broken
    signature like any other that does not verify (exit 1; readers refuse it, naming it)."""
    b = tmp_path / "b"
    shutil.copytree(SMOKE, b)
    (b / "MANIFEST.sha256.sig").write_bytes(b"A" * 20_000_000)
    proc = run_kit("verify", str(b), timeout=120)
    assert proc.returncode == 1 and "longer than any SSH signature" in proc.stderr
    proc = run_kit("accept", str(b), "--against", "1GB/s", timeout=120)
    assert proc.returncode == 2 and "BAD SIGNATURE" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_a_five_thousand_digit_number_in_a_recipe_is_one_line(tmp_path):
    """Python refuses to read an integer of more than 4,300 digits with an error of its own: a
    bundle's recipe.yaml holding one was a traceback in every reader (exit 1, accept's FAIL)."""
    b = tmp_path / "b"
    shutil.copytree(SMOKE, b)
    text = (b / "recipe.yaml").read_text()
    (b / "recipe.yaml").write_text(text + f"gpus: {'9' * 5000}\n" if "gpus:" not in text else
                                   text.replace("gpus:", f"gpus: {'9' * 5000} #", 1))  # fmt: skip
    write_manifest(b)
    for args in (["verify", str(b)], ["accept", str(b), "--against", "1GB/s"],
                 ["recipes", "validate", str(b / "recipe.yaml")]):  # fmt: skip
        proc = run_kit(*args, timeout=120)
        assert proc.returncode == 2, (args, proc.stderr[-800:])
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and "5,000 characters" in lines[0], lines[:3]


def test_refs_remove_of_a_label_that_is_no_text_is_one_line(tmp_path):
    env = {**os.environ, "KIT_REFS_DB": str(tmp_path / "refs.db")}
    proc = subprocess.run([sys.executable, "-m", "kit", "refs", "remove", b"\xed\xa0\x80"],
                          capture_output=True, env={**env, "PYTHONPATH": str(ROOT)},
                          timeout=120)  # fmt: skip
    assert proc.returncode == 2 and b"Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("how", ["| true", "--json - >&-"])
def test_a_verdict_nobody_reads_is_exit_2_never_a_verdict(how):
    """`kit accept ... | true` exited 1 (accept's FAIL) in silence, `--json - >&-` was a
    traceback: a verdict that could not be written is one line, exit 2."""
    cmd = (f"{sys.executable} -m kit accept {ROOT}/reports/examples/h200x2-allreduce "
           f"--against 300GB/s {how}; echo rc=${{PIPESTATUS[0]}} >&2")  # fmt: skip
    if how.startswith("--json"):
        cmd = cmd.replace("${PIPESTATUS[0]}", "$?")
    proc = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})  # fmt: skip
    lines = proc.stderr.strip().splitlines()
    assert lines[-1] == "rc=2", lines
    assert len(lines) == 2 and "standard output is closed" in lines[0], lines


def test_accept_never_judges_a_smoke_bundle_by_a_full_one(tmp_path):
    """7th pass, class 5: a smoke-scale bundle (sizes shrunk to check the method) against a
    full-scale one was judged PASS both ways; it is NOT COMPARABLE (exit 4), as `kit compare`
    states no factor between them."""
    full = ROOT / "reports" / "examples" / "h200x2-allreduce"
    smoke = tmp_path / "smoke"
    shutil.copytree(full, smoke)
    data = json.loads((smoke / "results.json").read_text())
    data["smoke"] = True
    (smoke / "results.json").write_text(json.dumps(data))
    (smoke / "MANIFEST.sha256.sig").unlink(missing_ok=True)
    write_manifest(smoke)
    for a, b in ((full, smoke), (smoke, full)):
        proc = run_kit("accept", str(a), "--against", str(b), timeout=120)
        assert proc.returncode == 4, proc.stdout[-800:] + proc.stderr[-800:]
        assert "NOT COMPARABLE" in proc.stdout and "smoke-scale" in proc.stdout
