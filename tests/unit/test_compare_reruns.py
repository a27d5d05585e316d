"""Issue 48: a rerun keeps its link to the bundle it reruns after `kit report` re-renders that
bundle (a new report re-seals its manifest, and the link was the manifest's hash)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from kit.bundle import Bundle, reseal_report, write_manifest
from kit.model import load_bundle
from kit.report.compare import comparison, load_machines
from kit.report.render import render_bundle
from kit.run.rerun import source_record
from tests.conftest import ROOT, needs_pdf

FIXTURE = ROOT / "tests" / "fixtures" / "bundles" / "cpu-smoke"


def _pair(tmp_path: Path, record: bool = True) -> tuple[Path, Path]:
    """The source, and a bundle that reruns it with the record `kit reproduce BUNDLE` writes
    (without the content hash: the record of a rerun made before it was kept)."""
    src, rerun = tmp_path / "source", tmp_path / "rerun"
    shutil.copytree(FIXTURE, src)
    shutil.copytree(FIXTURE, rerun)
    doc = json.loads((rerun / "results.json").read_text())
    doc["reproduces"] = source_record(src, load_bundle(src))
    if not record:
        del doc["reproduces"]["content_sha256"]
    (rerun / "results.json").write_text(json.dumps(doc, indent=1))
    write_manifest(rerun)
    return src, rerun


def _lines(src: Path, rerun: Path) -> list[str]:
    return comparison(load_machines([src, rerun], {0: "source", 1: "rerun"}), 0)["reproductions"]


def _kit_report(bundle: Path) -> None:
    """What `kit report BUNDLE` does: render, then re-seal the report files in the manifest."""
    reseal_report(bundle, lambda: render_bundle(Bundle.load(bundle)))


@needs_pdf
def test_the_source_re_rendered_by_kit_report_is_still_the_source(tmp_path):
    src, rerun = _pair(tmp_path)
    created = load_bundle(src).results.created_at
    assert _lines(src, rerun) == [
        f"rerun (CPU only, 2 CPUs) reruns source (CPU only, 2 CPUs), created {created}."
    ]
    _kit_report(src)
    _kit_report(rerun)  # the rerun's own report keeps its record too
    assert load_bundle(rerun).results.reproduces.bundle == str(src)
    (line,) = _lines(src, rerun)
    assert "not in this comparison" not in line
    assert line == (
        f"rerun (CPU only, 2 CPUs) reruns source (CPU only, 2 CPUs), created {created} (its "
        "report re-rendered since: every file but the report is as recorded)."
    )


@needs_pdf
def test_an_older_rerun_names_its_re_rendered_source_by_recipe_and_creation_time(tmp_path):
    src, rerun = _pair(tmp_path, record=False)
    _kit_report(src)
    (line,) = _lines(src, rerun)
    assert line.startswith("rerun (CPU only, 2 CPUs) reruns source (CPU only, 2 CPUs), created ")
    assert "matched by its recipe and creation time: its manifest has changed since" in line


def test_another_bundle_of_the_same_recipe_and_time_is_not_the_source(tmp_path):
    src, rerun = _pair(tmp_path)
    doc = json.loads((src / "results.json").read_text())
    doc["runs"][0]["metrics"]["busbw_peak"]["value"] *= 2  # other numbers, resealed
    (src / "results.json").write_text(json.dumps(doc, indent=1))
    write_manifest(src)
    (line,) = _lines(src, rerun)
    assert line.startswith(f"rerun (CPU only, 2 CPUs) reruns {src} (not in this comparison: ")
    assert "source (CPU only, 2 CPUs) has its recipe and creation time, not its content" in line
