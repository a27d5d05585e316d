"""Rerun a bundle, compare the two, and catch edits: the real `kit` command, real torchrun on the
CPU (gloo), a real PDF. They start from the suite's one shared CPU bundle
(tests.conftest.cpu_allreduce_bundle), copied where a test edits it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from pypdf import PdfReader

from kit.bundle import MANIFEST, content_sha256, sha256_file, verify_manifest, write_manifest
from kit.model import load_bundle
from kit.report.machines import short_hardware
from tests.conftest import CPU_ALLREDUCE, copy_bundle, needs_pdf, run_kit

pytestmark = pytest.mark.slow

# two runs a side: a screening, how far apart without a direction (issue 48)
RATIO = re.compile(r"screening \(2 and 2 runs, fewer than 3 a side\): [\d.]+(x|%) apart")


def pdf_text(path: Path, page: int | None = None) -> str:
    pages = PdfReader(path).pages
    chosen = pages if page is None else [pages[page]]
    return re.sub(r"\s+", " ", " ".join(p.extract_text() for p in chosen))


def reseal(bundle: Path) -> None:
    """A test's stand-in for a kit that wrote this bundle differently (e.g. another torch)."""
    write_manifest(bundle)


@pytest.fixture(scope="module")
def original(cpu_allreduce_bundle, tmp_path_factory) -> Path:
    """The suite's shared CPU bundle (tests.conftest.CPU_ALLREDUCE): no test here reads its PDF,
    a rerun or a copy makes one."""
    return copy_bundle(cpu_allreduce_bundle, tmp_path_factory.mktemp("rerun") / "a")


@needs_pdf
def test_rerun_then_compare(original, tmp_path):
    rerun = tmp_path / "b"
    proc = run_kit("reproduce", str(original), "--out", str(rerun))
    assert proc.returncode == 0, proc.stderr
    assert "environment matches the bundle's (before running)" in proc.stderr
    old = json.loads((original / "results.json").read_text())
    new = json.loads((rerun / "results.json").read_text())
    assert new["reproduces"] == {
        "bundle": str(original),
        "recipe": "cpu-smoke",
        "created_at": old["created_at"],
        "manifest_sha256": sha256_file(original / MANIFEST),
        "content_sha256": content_sha256(original),
    }
    assert new["environment_diff"] == []
    assert (new["device"], new["smoke"], new["repeats"]) == (
        old["device"],
        old["smoke"],
        old["repeats"],
    )
    assert (rerun / "recipe.yaml").read_text() == (original / "recipe.yaml").read_text()
    assert len(new["runs"]) == 4 and all(r["status"] == "ok" for r in new["runs"])
    assert verify_manifest(rerun).ok and verify_manifest(original).ok  # the old one is untouched
    # the rerun's own fields, `reproduces` and `environment_diff`, are typed and checked
    data = load_bundle(rerun)
    assert data.results.reproduces is not None and data.results.reproduces.bundle == str(original)
    assert data.results.environment_diff == []  # the same machine, the same Python

    out = tmp_path / "cmp"
    proc = run_kit("compare", str(original), str(rerun), "--out", str(out), "--label", "2=rerun")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [
        str(out / f) for f in ("compare.html", "compare.pdf", "compare.json")
    ]
    text = pdf_text(out / "compare.pdf")
    first = pdf_text(out / "compare.pdf", 0)
    hw = short_hardware(load_bundle(original).hardware)
    assert f"kit comparison: {hw} vs rerun ({hw})" in first
    assert "DIFFERENT ENVIRONMENTS" not in first
    assert f"rerun ({hw}) reruns {hw}" in first
    assert "95% CI" not in text  # two runs each: ranges, never called a confidence interval
    data = json.loads((out / "compare.json").read_text())
    for row in data["workloads"]:
        assert row["cells"][0]["baseline"] and row["cells"][1]["summary"]["n"] == 2
    busbw = next(r for r in data["workloads"] if r["metric"] == "busbw_peak")
    assert busbw["cells"][1]["ratio"]["sentence"] in text
    assert RATIO.search(first)
    assert len(data["p2p"]) == 2 and all(p["pairs"] == 2 for p in data["p2p"])
    for p in data["p2p"]:
        assert p["ratio"]["sentence"] in text

    bad = run_kit("compare", str(original), str(rerun), "--baseline", "5", "--out", str(out))
    assert (bad.returncode, bad.stderr) == (
        2,
        "kit: error: --baseline 5: allowed: 1 to 2 (a bundle's position)\n",
    )


@needs_pdf
def test_verify_catches_a_changed_a_missing_and_an_added_file(original, tmp_path):
    assert run_kit("verify", str(original)).returncode == 0
    cases = {
        "changed": lambda b: (b / "results.json").write_text((b / "results.json").read_text().replace('"ok"', '"OK"', 1)),
        "missing": lambda b: next((b / "logs").iterdir()).unlink(),
        "not in manifest": lambda b: (b / "runs" / "extra.json").write_text("{}"),
    }  # fmt: skip
    for label, edit in cases.items():
        b = copy_bundle(original, tmp_path / label.replace(" ", "-"))
        edit(b)
        proc = run_kit("verify", str(b))
        assert proc.returncode == 1, label
        assert re.fullmatch(rf"{label}: \S+\n", proc.stdout), proc.stdout
        assert proc.stderr.startswith(f"kit: error: {b}: does not match its manifest")
        assert proc.stderr.count("\n") == 1
        # nothing builds on an edited bundle: report (which re-seals) refuses, and so do
        # compare and rerun (checked once: they share the check)
        if label == "changed":
            cmp = run_kit("compare", str(original), str(b), "--out", str(tmp_path / "x"))
            assert cmp.returncode == 2 and "does not match its MANIFEST.sha256" in cmp.stderr
            again = run_kit("reproduce", str(b), "--out", str(tmp_path / "y"))
            assert again.returncode == 2 and "a rerun needs an untouched bundle" in again.stderr
            assert not (tmp_path / "y").exists()
        rep = run_kit("report", str(b))
        assert rep.returncode == 2 and rep.stderr.count("\n") == 1  # the edit is refused:
        assert ("files changed since the bundle was sealed" in rep.stderr  # by the manifest
                or "got 'OK'" in rep.stderr)  # or, first, by the loader's check  # fmt: skip
        assert not verify_manifest(b).ok  # and it stayed unsealed


@needs_pdf
def test_report_reseals_only_report_edits(original, tmp_path):
    b = copy_bundle(original, tmp_path / "b")
    (b / "report.html").write_text("edited")
    proc = run_kit("report", str(b))
    assert proc.returncode == 0, proc.stderr
    assert "edited" not in (b / "report.html").read_text() and verify_manifest(b).ok


@needs_pdf
def test_a_different_environment_is_flagged_and_strict_env_refuses(original, tmp_path):
    other = copy_bundle(original, tmp_path / "other-torch")
    env = json.loads((other / "environment.json").read_text())
    ours = env["container"]["torch"]
    env["container"]["torch"] = "2.0.0+other"
    (other / "environment.json").write_text(json.dumps(env))
    reseal(other)

    out = tmp_path / "cmp"
    assert run_kit("compare", str(original), str(other), "--out", str(out)).returncode == 0
    first = pdf_text(out / "compare.pdf", 0)
    assert "DIFFERENT ENVIRONMENTS" in first
    assert f"torch 2.0.0+other vs {ours}" in first

    strict = run_kit("reproduce", str(other), "--strict-env", "--out", str(tmp_path / "s"))
    assert strict.returncode == 2
    assert strict.stderr.endswith(
        f"kit: error: --strict-env: the environment differs from {other}: "
        f"torch: 2.0.0+other (bundle) -> {ours} (here)\n"
    )
    assert not (tmp_path / "s").exists()  # refused before any run

    # without --strict-env it runs, says so, and records the difference
    lenient = run_kit("reproduce", str(other), "--repeats", "1", "--out", str(tmp_path / "l"))
    assert lenient.returncode == 0, lenient.stderr
    assert f"ENVIRONMENT DIFFERS torch: 2.0.0+other (bundle) -> {ours} (here)" in lenient.stderr
    results = json.loads((tmp_path / "l" / "results.json").read_text())
    assert results["environment_diff"] == [{"field": "torch", "old": "2.0.0+other", "new": ours}]
    assert results["repeats"] == 1 and len(results["runs"]) == 2


def test_strict_env_needs_a_bundle(tmp_path):
    (tmp_path / "r.yaml").write_text(CPU_ALLREDUCE)
    proc = run_kit("reproduce", str(tmp_path / "r.yaml"), "--strict-env", "--device", "cpu")
    assert (proc.returncode, proc.stderr) == (
        2,
        "kit: error: --strict-env: only for rerunning a bundle directory\n",
    )
