"""kit.refs: shipped references from the committed bundles, a user SQLite store, standing."""

import json
import os
import shutil

import pytest
from typer.testing import CliRunner

from kit.bundle import write_manifest
from kit.cli.refs import refs_app
from kit.io.errors import InputError
from kit.model import load_bundle
from kit.refs import store
from tests.conftest import ROOT, run_kit

EXAMPLES = ROOT / "reports" / "examples"
X2, X4 = EXAMPLES / "h200x2-fsdp-llama", EXAMPLES / "h200x4-fsdp-llama"


@pytest.fixture
def db(tmp_path, monkeypatch):
    path = tmp_path / "refs.sqlite"
    monkeypatch.setenv("KIT_REFS_DB", str(path))
    return path


def test_shipped_refs_are_the_committed_bundles_without_logs():
    refs = store.shipped()
    assert {r["source"] for r in refs} == {
        p.name for p in EXAMPLES.iterdir() if (p / "results.json").is_file()
    }
    x2 = next(r for r in refs if r["source"] == X2.name)
    # every shipped reference is what its bundle reads as now (one derivation: a reference
    # written before a rule changed, a bundle FROM a local base then called pinned, fails)
    for r in refs:
        assert r == {**store.extract(EXAMPLES / r["source"], r["label"]), "origin": "shipped",
                     "id": r["id"]}, r["id"]  # fmt: skip
    assert "logs" not in json.dumps(x2) and "telemetry" not in json.dumps(x2)
    results = json.loads((X2 / "results.json").read_text())
    ok = [r for r in results["runs"] if r["variant"] == "p2p" and r["status"] == "ok"]
    bench = next(b for b in x2["benchmarks"] if b["variant"] == "p2p")
    assert bench["metrics"]["throughput"]["values"] == [
        r["metrics"]["throughput"]["value"] for r in ok
    ]


def test_add_list_remove_in_the_user_store(db):
    doc = store.add(X2, "lab box")
    assert db.is_file() and doc["label"] == "lab box"
    user = [r for r in store.list_refs() if r["origin"] == "user"]
    assert [r["label"] for r in user] == ["lab box"]
    with pytest.raises(InputError, match="'lab box' exists"):
        store.add(X2, "lab box")
    store.remove("lab box")
    assert not [r for r in store.list_refs() if r["origin"] == "user"]
    with pytest.raises(InputError, match="no user reference labelled 'gone'"):
        store.remove("gone")


def test_not_a_bundle_is_an_input_error(db, tmp_path):
    with pytest.raises(InputError, match="not a kit bundle"):
        store.add(tmp_path, "x")


def test_standing_places_x2_against_x4_per_gpu(db, tmp_path):
    copy = tmp_path / "mine"
    shutil.copytree(X2, copy)
    rows = [r for r in store.standing(load_bundle(copy)) if r["metric"] == "throughput"]
    # the shipped x2 reference is this very bundle (same created_at): skipped; the other 2x H200
    # Llama references (the container run of 2026-11-28 and its rerun on another machine) are
    # other bundles: placed as such
    assert {r["source"] for r in rows if r["reference_gpus"] == 2} == {
        "h200x2-fsdp-llama-container (shipped)",
        "h200x2-fsdp-llama-container-rerun (shipped)",
    }
    rows = [r for r in rows if r["reference_gpus"] == 4]
    assert rows
    row = next(r for r in rows if r["variant"] == "p2p")
    assert row["ratio_better"] == pytest.approx(row["value"] / row["reference_value"])
    assert row["ratio_better_per_gpu"] == pytest.approx(row["ratio_better"] * 2)
    lookup = list(store.lookup("llama_lora_fsdp", {"nope": 1}))
    assert lookup == []


def test_cli_add_and_list(db):
    runner = CliRunner()
    res = runner.invoke(refs_app, ["add", str(X2), "--label", "box A"])
    assert res.exit_code == 0, res.output
    assert "added 'box A'" in res.output
    res = runner.invoke(refs_app, ["list"])
    assert "box A" in res.output and "shipped" in res.output


def kit(db, *args):
    return run_kit("refs", *args, cwd=ROOT, env={**os.environ, "KIT_REFS_DB": str(db)})


def test_kit_refs_is_mounted_and_its_errors_are_one_line(db, tmp_path):
    """Through the `kit` command, against a real SQLite file: add, list, standing, remove."""
    added = kit(db, "add", str(X4), "--label", "lab box 3")
    assert added.returncode == 0 and db.is_file(), added.stderr
    listed = kit(db, "list")
    assert any(
        line.startswith("user") and "lab box 3" in line for line in listed.stdout.splitlines()
    )
    copy = tmp_path / "mine"
    shutil.copytree(X2, copy)
    standing = kit(db, "standing", str(copy))
    assert "vs lab box 3" in standing.stdout and "per GPU" in standing.stdout
    assert "(n=2, 4 GPUs)" in standing.stdout
    # a reference that ran on the CPU: its ranks are processes, not GPUs
    cpu = ROOT / "tests" / "fixtures" / "bundles" / "cpu-smoke"
    assert kit(db, "add", str(cpu), "--label", "a laptop").returncode == 0
    mine = tmp_path / "cpu"
    shutil.copytree(cpu, mine)
    results = json.loads((mine / "results.json").read_text())
    results["created_at"] = "2026-11-21T00:00:00+00:00"  # another run than the reference
    (mine / "results.json").write_text(json.dumps(results))
    write_manifest(mine)
    said = kit(db, "standing", str(mine)).stdout
    assert "vs a laptop" in said and " processes): " in said and "GPUs): " not in said
    for args, words in ((("add", str(X4), "--label", "lab box 3"), "'lab box 3' exists"),
                        (("add", str(tmp_path), "--label", "x"), "not a kit bundle"),
                        (("remove", "nobody"), "no user reference labelled 'nobody'"),
                        (("standing", str(tmp_path / "nowhere")), "not a kit bundle")):  # fmt: skip
        proc = kit(db, *args)
        assert proc.returncode == 2, (args, proc.stderr)
        assert proc.stderr.startswith("kit: error:") and proc.stderr.count("\n") == 1
        assert words in proc.stderr
    removed = kit(db, "remove", "lab box 3")
    assert removed.returncode == 0
    assert "lab box 3" not in kit(db, "list").stdout


def test_standing_rows_carry_what_a_report_prints(db, tmp_path):
    copy = tmp_path / "mine"
    shutil.copytree(X2, copy)
    rows = store.standing(load_bundle(copy), headline_only=True)
    assert rows and all(r["headline"] and r["metric"] == "throughput" for r in rows)
    same_size = {f"h200x2-fsdp-llama-container{s} (shipped)" for s in ("", "-rerun")}
    rows = [r for r in rows if r["source"] not in same_size]
    assert rows
    for r in rows:
        assert r["hardware"] == "4x NVIDIA H200, NV18" and r["source"] == f"{X4.name} (shipped)"
        assert r["metric_label"] == "throughput" and r["reference_gpus"] == 4 and r["gpus"] == 2


def test_a_sealed_report_reads_only_the_shipped_references(db, tmp_path):
    store.add(X4, "lab box 3")
    copy = tmp_path / "mine"
    shutil.copytree(X2, copy)
    everyone = {r["reference"] for r in store.standing(load_bundle(copy), headline_only=True)}
    shipped_only = {
        r["reference"]
        for r in store.standing(load_bundle(copy), headline_only=True, include_user=False)
    }
    assert "lab box 3" in everyone and "lab box 3" not in shipped_only and shipped_only


def test_a_known_machine_unlike_this_bundle_is_named_in_words():
    """Issue 34 item 5: the runtime, the timed window, the run and GPU counts where they differ
    from the known machine's; a reference that did not record one says so."""
    here = {"runtime": "docker", "pinned": True}
    bench = {"world_size": 2, "min_window_s": 30}
    there = {"runtime": "host", "pinned": False}
    assert store.unlike(here, bench, there, {"world_size": 2, "min_window_s": 0}, 3, 1) == [
        "3 runs here against 1 there",
        "the docker runtime (pinned) here against the host runtime (not pinned) there",
        "a timed window of at least 30 s here against no minimum there",  # review 5: not 0 s
    ]
    assert store.unlike(here, {**bench, "min_window_s": None}, there, bench, 1, 1)[-1] == (
        "a timed window of no minimum here against at least 30 s there"
    )
    assert store.unlike(here, bench, here, dict(bench), 3, 3) == []
    assert store.unlike(here, {**bench, "world_size": 1}, here, bench, 3, 3) == [
        "1 GPU here against 2 there",  # one H100 against the 2x H200 bundles (2026-12-02)
    ]
    # the GPU model first, where both recorded it: what explains an H100's 0.71x of an H200
    h100 = {**here, "hardware": {"gpu": "NVIDIA H100 80GB HBM3"}}
    h200 = {**here, "hardware": {"gpu": "NVIDIA H200"}}
    assert store.unlike(h100, {**bench, "world_size": 1}, h200, bench, 3, 3) == [
        "NVIDIA H100 80GB HBM3 here against NVIDIA H200 there",
        "1 GPU here against 2 there",
    ]
    assert store.unlike(here, bench, {}, {"world_size": 4}, 1, 1) == [
        "2 GPUs here against 4 there",
        "the docker runtime (pinned) here against a runtime not recorded there",
        "its timed window's rule not recorded there",
    ]
    # every shipped reference records both, from its bundle
    for ref in store.shipped():
        assert "runtime" in ref and "pinned" in ref
        assert all("min_window_s" in b for b in ref["benchmarks"])
