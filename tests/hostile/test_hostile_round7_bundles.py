"""Round seven of the black-box campaign: bundles that contradict themselves, a results.json
swapped while `kit refs add` reads it, a references database whose rows `refs list` refuses,
`kit accept` against a bundle of another task, and two machines given one label.

Every case runs the real `kit` (or the function the command calls) on a copy of a recorded
bundle, edited and resealed as a sender would: a user error is one line on stderr, exit 2; a
reference that cannot judge is NOT COMPARABLE, exit 4.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from kit.bundle import write_manifest
from kit.io.errors import InputError
from kit.refs import store
from tests.conftest import ROOT, one_line, run_kit
from tests.conftest import edit_results as edit

FIXTURE = ROOT / "tests" / "fixtures" / "bundles" / "cpu-smoke"
EXAMPLES = ROOT / "reports" / "examples"
FORGED = 98765.4


def copy(tmp_path: Path, name: str) -> Path:
    out = tmp_path / name
    shutil.copytree(FIXTURE, out)
    return out


def _metric(name: str, **fields) -> Callable[[dict], None]:
    def change(data: dict) -> None:
        data["runs"][1]["metrics"][name].update(fields)

    return change


def _negative_bandwidth(data: dict) -> None:
    for run in data["runs"]:
        run["metrics"]["busbw_largest"]["value"] = -abs(run["metrics"]["busbw_largest"]["value"])


def _unit_everywhere(data: dict) -> None:  # consistent between runs, but not the catalog's
    for run in data["runs"]:
        run["metrics"]["busbw_peak"]["unit"] = "MB/s"


def _world(data: dict) -> None:
    data["runs"][2]["world_size"] = 8


def _world_everywhere(data: dict) -> None:  # every run agrees, the spec.json files do not
    for run in data["runs"]:
        run["world_size"] = 8


def _finished_first(data: dict) -> None:
    data["finished_at"] = "2026-11-21T12:00:00+00:00"


def _finished_before_a_run(data: dict) -> None:
    data["finished_at"] = "2026-11-21T12:34:00+00:00"  # after created_at, before runs 2 and 3


def _run_backwards(data: dict) -> None:
    data["runs"][0]["finished_at"] = "2026-11-21T12:33:00+00:00"


def _complete_without_runs(data: dict) -> None:
    data["runs"] = []


def _more_than_planned(data: dict) -> None:
    data["planned_runs"] = 1


def _complete_with_a_failure(data: dict) -> None:
    data["runs"][3]["status"] = "failed"


CASES = {
    "a bandwidth below zero": (_negative_bandwidth, "below zero"),
    "a time below zero": (_metric("time_small_us", value=-1.0), "below zero"),
    "another unit in one run": (_metric("busbw_largest", unit="MB/s"), "busbw_largest"),
    "another direction in one run": (_metric("busbw_peak", higher_is_better=False), "busbw_peak"),
    "a unit the catalog does not give": (_unit_everywhere, "GB/s"),
    "a run on other processes": (_world, "world_size 8"),
    "every run on other processes than started": (_world_everywhere, "world_size 8"),
    "finished before created": (_finished_first, "before created_at"),
    "finished before a run started": (_finished_before_a_run, "started"),
    "a run that ends before it starts": (_run_backwards, "before started_at"),
    "complete with no runs": (_complete_without_runs, "status complete"),
    "complete with more runs than planned": (_more_than_planned, "more than the 1 planned"),
    "complete with a failed run": (_complete_with_a_failure, "status complete"),
}


@pytest.mark.parametrize("case", CASES)
def test_a_self_contradicting_results_json_is_refused_by_every_reader(tmp_path, case):
    change, words = CASES[case]
    a, b = edit(copy(tmp_path, "a"), change), copy(tmp_path, "b")
    assert words in one_line(run_kit("verify", str(a)))  # the seal matches: the content lies
    accepted = one_line(run_kit("accept", str(a), "--against", str(b)))
    assert words in accepted and "results.json" in accepted, accepted
    against = one_line(run_kit("accept", str(b), "--against", str(a)))
    assert words in against, against
    if case in ("a bandwidth below zero", "a run on other processes", "complete with no runs"):
        compared = one_line(run_kit("compare", str(a), str(b), "--out", str(tmp_path / "o")))
        assert words in compared and not (tmp_path / "o").exists(), compared


def test_the_untouched_pair_is_still_judged(tmp_path):
    a, b = copy(tmp_path, "a"), copy(tmp_path, "b")
    proc = run_kit("accept", str(a), "--against", str(b))
    assert proc.returncode != 2 and proc.stderr == "", (proc.stdout, proc.stderr)  # read


def _forge(b: Path) -> tuple[bytes, bytes]:
    original = (b / "results.json").read_bytes()
    data = json.loads(original)
    for run in data["runs"]:
        for m in run["metrics"].values():
            if m["unit"] == "GB/s":
                m["value"] = FORGED
    return original, json.dumps(data).encode()


def _stored_docs(db: Path) -> list[str]:
    if not db.exists():
        return []
    with sqlite3.connect(db) as con:
        return [d for (d,) in con.execute("SELECT doc FROM refs")]


def test_refs_add_stores_the_bytes_it_checked_not_a_second_read(tmp_path, monkeypatch):
    """The other process strikes right after the manifest check: what refs add stores is
    what was checked (one read), never the file swapped in after it."""
    a, db = copy(tmp_path, "a"), tmp_path / "refs.sqlite"
    _, forged = _forge(a)
    received = store.receive

    def receive_then_swap(root, *args, **kwargs):
        data = received(root, *args, **kwargs)
        (a / "results.json").write_bytes(forged)
        return data

    monkeypatch.setattr(store, "receive", receive_then_swap)
    store.add(a, "checked", db)
    (doc,) = _stored_docs(db)
    assert str(FORGED) not in doc and "busbw_largest" in doc


def _swap(b: Path, original: bytes, forged: bytes, stop: threading.Event) -> None:
    """Swap results.json by rename, forged and original in turn, every half millisecond."""
    i = 0
    while not stop.is_set():
        (b.parent / ".swap").write_bytes(forged if i % 2 == 0 else original)
        os.rename(b.parent / ".swap", b / "results.json")
        i += 1
        stop.wait(0.0005)


def test_refs_add_under_a_real_swap_never_stores_a_forged_number(tmp_path):
    """Another thread swaps results.json by rename between the original and a forged one (not in
    the manifest) every half millisecond while `refs add` reads the bundle."""
    a, db = copy(tmp_path, "a"), tmp_path / "refs.sqlite"
    original, forged = _forge(a)
    tries, refused = 30, 0
    for t in range(tries):
        stop = threading.Event()

        swapper = threading.Thread(target=_swap, args=(a, original, forged, stop))
        swapper.start()
        try:
            store.add(a, f"try {t}", db)
        except InputError as err:
            refused += 1
            assert "\n" not in str(err)
        finally:
            stop.set()
            swapper.join()
            (a / "results.json").write_bytes(original)
    docs = _stored_docs(db)
    assert not [d for d in docs if str(FORGED) in d]
    assert len(docs) + refused == tries


ROWS = {
    "a future schema": "UPDATE refs SET doc = replace(doc, '\"schema\": 1', '\"schema\": 99')",
    "a row that is not JSON": "UPDATE refs SET doc = '{not json'",
    "a row that is a list": "UPDATE refs SET doc = '[]'",
}


@pytest.mark.parametrize("case", ROWS)
def test_refs_add_refuses_a_database_refs_list_refuses(tmp_path, case):
    a, b, db = copy(tmp_path, "a"), copy(tmp_path, "b"), tmp_path / "refs.sqlite"
    env = dict(os.environ, KIT_REFS_DB=str(db))
    assert run_kit("refs", "add", str(b), "--label", "base", env=env).returncode == 0
    with sqlite3.connect(db) as con:
        con.execute(ROWS[case])
    con.close()
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    listed = one_line(run_kit("refs", "list", env=env))
    added = one_line(run_kit("refs", "add", str(a), "--label", "new", env=env))
    assert added == listed and "row 1" in added, (added, listed)
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before  # nothing written
    with sqlite3.connect(db) as con:
        assert [label for (label,) in con.execute("SELECT label FROM refs")] == ["base"]
    con.close()


def test_accept_against_a_bundle_of_another_task_is_not_comparable(tmp_path):
    proc = run_kit(
        "accept",
        str(EXAMPLES / "h200x2-allreduce"),
        "--against",
        str(EXAMPLES / "h200x2-fsdp-llama"),
        "--json",
        str(tmp_path / "accept.json"),
    )
    assert proc.returncode == 4, (proc.returncode, proc.stdout, proc.stderr)
    assert proc.stderr == ""
    lines = [line for line in proc.stdout.splitlines() if line.startswith("NOT COMPARABLE")]
    assert lines and all("h200x2-fsdp-llama is no reference" in line for line in lines)
    assert "llama-8b-lora (llama_lora_fsdp)" in lines[0]
    assert "overall: NOT COMPARABLE against h200x2-fsdp-llama" in proc.stdout
    doc = json.loads((tmp_path / "accept.json").read_text())
    assert doc["verdict"] == "NOT COMPARABLE"
    assert {d["verdict"] for d in doc["decisions"]} == {"NOT COMPARABLE"}


def test_two_machines_with_one_label_are_refused(tmp_path):
    a, b, out = copy(tmp_path, "a"), copy(tmp_path, "b"), tmp_path / "o"
    proc = run_kit("compare", str(a), str(b), "--out", str(out), "--label", "1=x", "--label", "2=x")
    line = one_line(proc)
    assert "--label '2=x'" in line and "bundle 1 is labelled 'x'" in line, line
    assert not out.exists()


# hardware.json against the runs (the fifth black-box pass): resealed with a GPU cut, or runs
# of another GPU model, a bundle is refused by the loader, so no verdict is given on it


def _hardware(change: Callable[[dict], None]) -> Callable[[Path], None]:
    def apply(b: Path) -> None:
        data = json.loads((b / "hardware.json").read_text())
        change(data)
        (b / "hardware.json").write_text(json.dumps(data))

    return apply


def _gpu_everywhere(data: dict) -> None:
    for run in data["runs"]:
        run["versions"]["gpu"] = "NVIDIA H100 80GB HBM3"


@pytest.mark.parametrize(
    ("name", "change", "says"),
    [
        ("one-gpu", _hardware(lambda h: h.update(gpus=h["gpus"][:1])), "lists 1 GPU(s)"),
        ("no-gpus", _hardware(lambda h: h.update(gpus=[])), "lists 0 GPU(s)"),
        ("other-model", lambda b: edit(b, _gpu_everywhere), "which hardware.json does not list"),
    ],
)
def test_hardware_that_contradicts_the_runs_is_refused(tmp_path, name, change, says):
    b = tmp_path / "h200x2-allreduce"
    shutil.copytree(EXAMPLES / "h200x2-allreduce", b)
    change(b)
    write_manifest(b)
    for args in (["accept", str(b), "--against", "300GB/s"],
                 ["accept", str(EXAMPLES / "allreduce-h200x2-first"), "--against", str(b)]):  # fmt: skip
        err = one_line(run_kit(*args, timeout=120))
        assert says in err and "hardware.json" in err, err
