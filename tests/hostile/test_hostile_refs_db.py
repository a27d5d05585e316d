"""The references database ($KIT_REFS_DB) opens, migrates, or is refused with one line.

A directory, a FIFO, a file of garbage, another program's SQLite file, a table of another
layout, a newer kit's database, a path under a file: every `kit refs` command says what is wrong
in one line, exit 2, and leaves the file as it was. A database of the first layout (no version
written) is migrated.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from kit.refs.db import DB_VERSION
from tests.conftest import ROOT, run_kit

BUNDLE = str(ROOT / "tests" / "fixtures" / "bundles" / "cpu-smoke")
COMMANDS = [["refs", "list"], ["refs", "add", BUNDLE], ["refs", "remove", "x"],
            ["refs", "standing", BUNDLE]]  # fmt: skip


def _sqlite(path: Path, *statements: str) -> Path:
    con = sqlite3.connect(path)
    for s in statements:
        con.execute(s)
    con.commit()
    con.close()
    return path


CASES = {
    "directory": (lambda p: p.mkdir() or p, "is a directory"),
    "fifo": (lambda p: os.mkfifo(p) or p, "not a regular file"),
    "garbage": (lambda p: p.write_text("garbage\n" * 100) and p, "file is not a database"),
    "other-program": (lambda p: _sqlite(p, "CREATE TABLE users (name)"), "another program's tables"),
    "other-layout": (lambda p: _sqlite(p, "CREATE TABLE refs (x)"), "table refs has columns x"),
    "newer-kit": (lambda p: _sqlite(p, "PRAGMA user_version = 99"), "newer than this kit"),
    "negative-version": (lambda p: _sqlite(p, "PRAGMA user_version = -5"), "version -5 is none"),
    "under-a-file": (lambda p: p.write_text("x") and p / "refs.sqlite", "Not a directory"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_refs_command_refuses_a_bad_database_in_one_line(tmp_path, case):
    make, words = CASES[case]
    db = make(tmp_path / "refs.sqlite")
    before = db.read_bytes() if db.is_file() else None
    for args in COMMANDS:
        proc = run_kit(*args, env={**os.environ, "KIT_REFS_DB": str(db)}, timeout=60)
        assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
        assert (
            proc.stderr.startswith("kit: error: references database ")
            and proc.stderr.count("\n") == 1
        )
        assert words in proc.stderr and "Traceback" not in proc.stderr
    if before is not None:
        assert db.read_bytes() == before


def test_a_database_of_the_first_layout_is_migrated(tmp_path):
    db = _sqlite(
        tmp_path / "refs.sqlite",
        "CREATE TABLE refs (id INTEGER PRIMARY KEY, label TEXT NOT NULL UNIQUE, source TEXT, "
        "added_at TEXT DEFAULT CURRENT_TIMESTAMP, doc TEXT NOT NULL)",
        "CREATE TABLE ref_benchmarks (ref_id INTEGER, kind TEXT, signature TEXT)",
    )
    env = {**os.environ, "KIT_REFS_DB": str(db)}
    assert run_kit("refs", "list", env=env).returncode == 0  # read-only: nothing written
    assert sqlite3.connect(db).execute("PRAGMA user_version").fetchone()[0] == 0
    added = run_kit("refs", "add", BUNDLE, "--label", "lab box", env=env)
    assert added.returncode == 0, added.stderr
    assert sqlite3.connect(db).execute("PRAGMA user_version").fetchone()[0] == DB_VERSION
    listed = run_kit("refs", "list", env=env)
    assert listed.returncode == 0 and "lab box" in listed.stdout


def test_a_row_that_is_no_reference_is_one_line(tmp_path):
    db = tmp_path / "refs.sqlite"
    env = {**os.environ, "KIT_REFS_DB": str(db)}
    assert run_kit("refs", "add", BUNDLE, env=env).returncode == 0
    _sqlite(db, "UPDATE refs SET doc = 'not json'")
    proc = run_kit("refs", "list", env=env)
    assert proc.returncode == 2 and "is not a kit reference" in proc.stderr
    assert proc.stderr.count("\n") == 1


@pytest.mark.parametrize(
    ("edit", "says"),
    [
        ("json_remove(doc, '$.label')", "label: required field is missing"),
        ("json_set(doc, '$.hardware', 'red')", "hardware"),
        ("json_set(doc, '$.benchmarks[0].metrics.busbw_largest.values[0]', 'fast')", "values"),
        ("json_remove(doc, '$.benchmarks[0].kind')", "kind: required field is missing"),
    ],
)
def test_a_row_without_what_readers_need_is_one_line(tmp_path, edit, says):
    """A row another program edited (the fifth black-box pass: no label was a KeyError
    traceback in `refs list`) is refused by every reader in one line naming the row."""
    db = tmp_path / "refs.sqlite"
    env = {**os.environ, "KIT_REFS_DB": str(db)}
    assert run_kit("refs", "add", BUNDLE, env=env).returncode == 0
    _sqlite(db, f"UPDATE refs SET doc = {edit}")
    for args in (["refs", "list"], ["refs", "standing", BUNDLE]):
        proc = run_kit(*args, env=env)
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1, (args, proc.stderr)
        assert "row 1: " in proc.stderr and says in proc.stderr, proc.stderr


KIT_TABLES = (
    "CREATE TABLE refs (id INTEGER PRIMARY KEY, label TEXT NOT NULL UNIQUE, source TEXT, "
    "added_at TEXT DEFAULT CURRENT_TIMESTAMP, doc TEXT NOT NULL)",
    "CREATE TABLE ref_benchmarks (ref_id INTEGER, kind TEXT, signature TEXT)",
    "PRAGMA user_version = 1",
)
BEHIND = {
    # rewrites every number the kit adds: `refs add` once said "added" for numbers it never wrote
    "trigger": "CREATE TRIGGER forge AFTER INSERT ON refs BEGIN UPDATE refs SET doc = "
    "replace(doc, '\"value\": ', '\"value\": 9') WHERE id = new.id; END",
    "view": "CREATE VIEW shown AS SELECT * FROM refs",
}


@pytest.mark.parametrize("case", sorted(BEHIND))
def test_a_database_that_changes_rows_behind_the_kit_is_refused(tmp_path, case):
    db = _sqlite(tmp_path / "refs.sqlite", *KIT_TABLES, BEHIND[case])
    env = {**os.environ, "KIT_REFS_DB": str(db)}
    for args in COMMANDS:
        proc = run_kit(*args, env=env, timeout=60)
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1, (args, proc.stderr)
        assert case in proc.stderr and "behind it" in proc.stderr
    assert sqlite3.connect(db).execute("SELECT count(*) FROM refs").fetchone()[0] == 0


def test_a_row_of_a_future_schema_is_refused_by_every_reader(tmp_path):
    db = tmp_path / "refs.sqlite"
    env = {**os.environ, "KIT_REFS_DB": str(db)}
    assert run_kit("refs", "add", BUNDLE, env=env).returncode == 0
    _sqlite(db, "UPDATE refs SET doc = json_set(doc, '$.schema', 99)")
    for args in (["refs", "list"], ["refs", "standing", BUNDLE]):
        proc = run_kit(*args, env=env)
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1, (args, proc.stderr)
        assert "schema 99" in proc.stderr


def test_refs_add_reads_back_what_it_wrote(tmp_path, monkeypatch):
    """A database that answers with other rows than were written (here: a connection whose
    reads are forged) is refused and nothing is committed."""
    from kit.io.errors import InputError
    from kit.refs import store

    db = tmp_path / "refs.sqlite"
    real = store._read_back

    def forged(con, path, rid, doc, rows):
        con.execute('UPDATE refs SET doc = replace(doc, \'"label": "x"\', \'"label": "y"\')')
        real(con, path, rid, doc, rows)

    monkeypatch.setattr(store, "_read_back", forged)
    with pytest.raises(InputError, match="reads back other rows"):
        store.add(Path(BUNDLE), "x", db=db)
    assert sqlite3.connect(db).execute("SELECT count(*) FROM refs").fetchone()[0] == 0


KILLED_WRITER = """
import os, signal, sqlite3, sys
con = sqlite3.connect(sys.argv[1], isolation_level=None)
con.execute("PRAGMA cache_size=1")  # pages reach the file before the commit: a hot journal
con.execute("BEGIN IMMEDIATE")
for i in range(5000):
    con.execute("INSERT INTO refs (label, doc) VALUES (?, ?)", (f"l{i}", "x" * 500))
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_writer_killed_mid_transaction_leaves_a_listable_database(tmp_path):
    import subprocess
    import sys

    db = tmp_path / "refs.sqlite"
    env = {**os.environ, "KIT_REFS_DB": str(db)}
    assert run_kit("refs", "add", BUNDLE, "--label", "kept", env=env).returncode == 0
    subprocess.run([sys.executable, "-c", KILLED_WRITER, str(db)], check=False)
    assert (tmp_path / "refs.sqlite-journal").exists()  # what SIGKILL during `refs add` leaves
    proc = run_kit("refs", "list", env=env)
    assert proc.returncode == 0, proc.stderr
    assert "kept" in proc.stdout and "l4999" not in proc.stdout
