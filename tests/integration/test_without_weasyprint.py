"""A machine without WeasyPrint (the GPU machines often lack it): the run and its report.html are
kept, and the one warning says that only the PDF is missing and how to get it.

WeasyPrint is hidden from the real `kit` process by a sitecustomize module that makes its import
fail exactly as it does where the package is absent (ModuleNotFoundError)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from kit.bundle import verify_manifest, write_manifest
from tests.conftest import ROOT, needs_pdf, run_kit

pytestmark = pytest.mark.slow

HIDE = """\
import sys


class _NoWeasyPrint:
    def find_spec(self, name, path=None, target=None):
        if name == "weasyprint" or name.startswith("weasyprint."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, _NoWeasyPrint())
"""

RECIPE = """\
kit: 1
name: no-weasyprint
gpus: 2
repeats: 1
timeout_s: 120
variants: [p2p]
benchmarks:
  - kind: allreduce
    params: {max_bytes: 1024, factor: 4, iters: 2, warmup_iters: 1, trials: 1}
"""


def without_weasyprint(tmp_path: Path) -> dict[str, str]:
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(HIDE)
    env = dict(os.environ)
    env.pop("KIT_PDF", None)  # the kit tries to make the PDF, as it does by default
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(site)])
    env["COLUMNS"] = "400"  # one line per message, whatever rich thinks the width is
    return env


def test_the_hiding_works(tmp_path):
    """The control: under the stand-in, importing weasyprint fails as on a machine without it."""
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-c", "import weasyprint"],
        env=without_weasyprint(tmp_path),
        capture_output=True,
        text=True,
    )
    assert "ModuleNotFoundError: No module named 'weasyprint'" in proc.stderr


@needs_pdf  # its last step makes the PDF where WeasyPrint works
def test_reproduce_keeps_the_html_and_says_only_the_pdf_is_missing(tmp_path):
    recipe = tmp_path / "r.yaml"
    recipe.write_text(RECIPE)
    out = tmp_path / "bundle"
    env = without_weasyprint(tmp_path)
    proc = run_kit("reproduce", str(recipe), "--device", "cpu", "--out", str(out), env=env)
    assert proc.returncode == 0, proc.stderr
    said = " ".join(proc.stderr.split())
    assert (
        "kit: warning: report.html written, report.pdf not: WeasyPrint is not installed here "
        "(No module named 'weasyprint'); for the PDF, run "
        f"`kit report {out}` where WeasyPrint works (pip install weasyprint)"
    ) in said, proc.stderr
    assert "report not rendered" not in said
    assert (out / "report.html").is_file() and not (out / "report.pdf").exists()
    assert verify_manifest(out).ok
    # the advice works: the same command where WeasyPrint is installed makes the PDF
    proc = run_kit("report", str(out))
    assert proc.returncode == 0, proc.stderr
    assert (out / "report.pdf").stat().st_size > 10_000


def test_kit_report_without_weasyprint_says_what_is_missing(tmp_path):
    b = tmp_path / "b"
    shutil.copytree(ROOT / "tests" / "fixtures" / "bundles" / "cpu-smoke", b)
    (b / "report.pdf").unlink(missing_ok=True)
    write_manifest(b)
    proc = run_kit("report", str(b), env=without_weasyprint(tmp_path))
    assert proc.returncode == 1
    assert " ".join(proc.stderr.split()) == (
        "kit: error: report.html written, report.pdf not: WeasyPrint is not installed here "
        f"(No module named 'weasyprint'); for the PDF, run `kit report {b}` where WeasyPrint "
        "works (pip install weasyprint)"
    )
    assert (b / "report.html").is_file() and not (b / "report.pdf").exists()


def test_kit_pdf_0_writes_the_pages_alone_and_says_nothing(tmp_path):
    """KIT_PDF=0 (a GPU server without Pango, or a test that reads no PDF): the HTML page alone,
    no warning since it was asked for; the bundle verifies; `kit report` makes the PDF later."""
    b = tmp_path / "b"
    shutil.copytree(ROOT / "tests" / "fixtures" / "bundles" / "cpu-smoke", b)
    (b / "report.pdf").unlink(missing_ok=True)
    write_manifest(b)
    off = {**os.environ, "KIT_PDF": "0"}
    proc = run_kit("report", str(b), env=off)
    assert (proc.returncode, proc.stderr) == (0, ""), proc.stderr
    assert (b / "report.html").is_file() and not (b / "report.pdf").exists()
    assert verify_manifest(b).ok
    other = ROOT / "tests" / "fixtures" / "bundles" / "decode-cpu-smoke"
    out = tmp_path / "cmp"
    proc = run_kit("compare", str(b), str(other), "--out", str(out), env=off)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [str(out / "compare.html"), str(out / "compare.json")]
    assert not (out / "compare.pdf").exists()


def test_refs_nccl_tests_without_weasyprint_keeps_the_files_and_warns(tmp_path):
    """On a GPU machine without WeasyPrint `kit refs nccl-tests` takes the runs in (exit 0, one
    warning): its first device run exited 1 there although every file was added and sealed. A
    report.pdf older than the new report.html is removed rather than left saying something else."""
    bundle = tmp_path / "bundle"
    shutil.copytree(ROOT / "tests/fixtures/bundles/cpu-smoke", bundle)
    (bundle / "report.pdf").write_bytes(b"%PDF-1.4 an older report\n")
    write_manifest(bundle)
    runs = []
    for variant in ("p2p", "no-p2p"):
        path = tmp_path / f"all_reduce_perf-{variant}-r1.txt"
        shutil.copy(ROOT / f"kit/refs/nccl_tests/nccl-tests-{variant}-2gpu-h200.txt", path)
        runs.append(str(path))
    r = run_kit("refs", "nccl-tests", str(bundle), *runs, env=without_weasyprint(tmp_path))
    assert r.returncode == 0, r.stderr
    warnings = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(warnings) == 1 and "report.pdf not" in warnings[0], r.stderr
    assert not (bundle / "report.pdf").exists()
    assert (bundle / "nccl-tests").is_dir()
    assert verify_manifest(bundle).ok
