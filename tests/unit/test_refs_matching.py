"""Issue 48: a known machine is offered when only parameters that do not change the figure
differ (its warm-up and iteration counts, what is recorded beside the timed column), and those
are named where it is shown; a parameter that changes the figure still keeps it out."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kit.bundle import Bundle, write_manifest
from kit.cli.refs import refs_app
from kit.model import load_bundle
from kit.refs import store
from kit.report.render import render_html
from kit.shared.metrics import figure
from kit.workloads.registry import KINDS, params_class, same_figure
from tests.conftest import ROOT

X4 = ROOT / "reports" / "examples" / "h200x4-allreduce"  # shipped as a known machine
NEWER = {"log_nccl_choice": True, "time_in_place": True, "latency": True}
"""What this kit's worker records beside the parameters the 4x H200 run of 2026-11-21 had."""
NAMED = (
    "parameters that do not change the figure: iters 100 here against 20 there; latency true "
    "here, not recorded there; log_nccl_choice true here, not recorded there; time_in_place "
    "true here, not recorded there; warmup_iters 20 here against 5 there"
)

pytestmark = pytest.mark.skipif(not X4.is_dir(), reason="the 4x H200 example is not here")


def today(tmp_path: Path, source: Path = X4, **params) -> Path:
    """The 4x H200 all-reduce (or `source`) as this kit runs it today: another bundle (a second
    earlier), its runs' recorded parameters changed by `params`, sealed."""
    b = tmp_path / "today"
    shutil.copytree(source, b)
    doc = json.loads((b / "results.json").read_text())
    then = datetime.fromisoformat(doc["created_at"]) - timedelta(seconds=1)
    doc["created_at"] = then.isoformat()
    for r in doc["runs"]:
        r["data"]["params"].update(params)
    (b / "results.json").write_text(json.dumps(doc, indent=1))
    write_manifest(b)
    return b


def against_x4(bundle: Path, source: Path = X4) -> list[dict]:
    rows = store.standing(load_bundle(bundle), headline_only=True, include_user=False)
    return [r for r in rows if r["source"] == f"{source.name} (shipped)"]


def test_the_same_workload_with_other_counts_is_offered_and_the_counts_named(tmp_path):
    b = today(tmp_path, **NEWER, iters=100, warmup_iters=20)
    rows = against_x4(b)
    assert {r["variant"] for r in rows} == {"p2p", "no-p2p"}
    p2p = next(r for r in rows if r["variant"] == "p2p")
    assert p2p["metric"] == "busbw_largest" and p2p["ratio_better"] == pytest.approx(1.0)
    assert round(p2p["reference_value"]) == 355
    assert NAMED in p2p["unlike"]
    # page 1 names them under "Against known machines"
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", render_html(Bundle.load(b))))
    known = text[text.index("Against known machines") :]
    assert f"allreduce / p2p against {X4.name} (shipped): {NAMED}" in known
    # and so does `kit refs standing`
    out = CliRunner().invoke(refs_app, ["standing", str(b)])
    assert out.exit_code == 0, out.output
    assert f"not like for like: {NAMED}" in out.output


@pytest.mark.parametrize(
    "change",
    [{"max_bytes": 1 << 29}, {"dtype": "bfloat16"}, {"timing": "spin"}, {"unknown_knob": 1}],
)
def test_a_parameter_that_changes_the_figure_keeps_the_reference_out(tmp_path, change):
    assert against_x4(today(tmp_path, **NEWER, **change)) == []


def test_each_workload_declares_only_its_own_parameters():
    for kind in KINDS:
        names = {f.name for f in dataclasses.fields(params_class(kind))}
        assert same_figure(kind) <= names, kind
    assert same_figure("no_such_kind") == frozenset()  # every parameter counts


DECODE = ROOT / "reports" / "examples" / "h200x2-decode-tp2-container"  # before all_reduce


@pytest.mark.parametrize(("all_reduce", "offered"), [("nccl", True), ("one-shot", False)])
def test_a_parameter_added_later_compares_as_its_default_where_a_reference_lacks_it(
    tmp_path, all_reduce, offered
):
    """llm_decode's all_reduce came after the 2x H200 decode bundle was recorded: its default,
    NCCL, is what that run did, so a run with it is offered that reference; the one-shot is not."""
    assert DECODE.is_dir()
    rows = against_x4(today(tmp_path, DECODE, all_reduce=all_reduce), DECODE)
    assert bool(rows) is offered
    assert all("all_reduce" not in r["unlike"] for r in rows)


def test_kit_refs_standing_writes_figures_as_the_run_line_does(tmp_path, monkeypatch):
    """26,799 tokens/s, never 2.68e+04 (`:,.4g` wrote that): one rule, kit.shared.metrics.figure,
    for the run's progress line, the acceptance verdicts and this command."""
    monkeypatch.setenv("KIT_REFS_DB", str(tmp_path / "refs.db"))
    dp = ROOT / "reports" / "examples" / "h200x2-decode-dp-container"
    out = CliRunner().invoke(refs_app, ["standing", str(dp)])
    assert out.exit_code == 0, out.output
    line = next(x for x in out.output.splitlines() if " decode_tokens_per_s: " in x)
    assert re.search(r"decode_tokens_per_s: \d{2},\d{3} tokens/s", line), line
    assert "e+" not in out.output
    assert figure(26799.4) == "26,799" and figure(4.2671) == "4.267" and figure(-1234.5) == "-1,234"
