"""The user's references database ($KIT_REFS_DB): opened, migrated, or refused with one line.

The path is the user's, and what is there may be anything: a directory, a FIFO (which would
hang an open), a file of garbage, another program's SQLite database, a newer kit's, or a
location this user cannot write. Each is one InputError line naming the path and what is wrong,
never an sqlite3 traceback. The schema version is SQLite's `user_version`: 0 with this kit's
tables is the first layout (before the version was written) and is migrated by writing 1; a
number above this kit's is a newer kit's database and is refused. A trigger or a view (which
this kit never writes) is refused on every open: either could change or fake the rows the kit
reads back.
"""

from __future__ import annotations

import os
import sqlite3
import stat
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path

from kit.io.errors import InputError
from kit.io.outputs import refuse_inside_bundle

DB_VERSION = 1
TABLES = {
    "refs": {"id", "label", "source", "added_at", "doc"},
    "ref_benchmarks": {"ref_id", "kind", "signature"},
}
_CREATE = (
    "CREATE TABLE IF NOT EXISTS refs (id INTEGER PRIMARY KEY, label TEXT NOT NULL UNIQUE, "
    "source TEXT, added_at TEXT DEFAULT CURRENT_TIMESTAMP, doc TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS ref_benchmarks (ref_id INTEGER REFERENCES refs(id) "
    "ON DELETE CASCADE, kind TEXT, signature TEXT)",
    "CREATE INDEX IF NOT EXISTS by_sig ON ref_benchmarks(signature)",
)


def _where(path: Path) -> str:
    return f"references database {path} ($KIT_REFS_DB or ~/.local/share/kit/refs.sqlite)"


def _check_entry(path: Path) -> bool:
    """True when a regular file is there, False when nothing is; anything else is refused."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise InputError(f"{_where(path)}: cannot be read ({exc.strerror})") from None
    if not stat.S_ISREG(mode):
        kind = "a directory" if stat.S_ISDIR(mode) else "not a regular file (a FIFO, a device?)"
        raise InputError(f"{_where(path)}: is {kind}; point KIT_REFS_DB at a file")
    return True


def _check_schema(con: sqlite3.Connection, path: Path) -> int:
    """This kit's version of the database, after checking its tables; refused when foreign."""
    version = con.execute("PRAGMA user_version").fetchone()[0]
    if version < 0:  # SQLite takes any integer; this kit writes 0 (the first layout) or up
        raise InputError(
            f"{_where(path)}: version {version} is none this kit wrote; use another KIT_REFS_DB"
        )
    if version > DB_VERSION:
        raise InputError(
            f"{_where(path)}: version {version} is newer than this kit reads ({DB_VERSION}); "
            "upgrade kit or use another KIT_REFS_DB"
        )
    hidden = con.execute(
        "SELECT type, name FROM sqlite_master WHERE type IN ('trigger', 'view') ORDER BY name"
    ).fetchall()
    if hidden:
        what = ", ".join(f"{kind} {name}" for kind, name in hidden[:5])
        raise InputError(
            f"{_where(path)}: holds {what}; this kit writes no trigger or view, and a database "
            "that changes rows behind it is refused: use another KIT_REFS_DB"
        )
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    others = sorted(tables - set(TABLES) - {"sqlite_sequence"})
    if others:
        raise InputError(
            f"{_where(path)}: holds another program's tables ({', '.join(others[:5])}); "
            "use another KIT_REFS_DB"
        )
    for name, columns in TABLES.items():
        if name in tables:
            have = {r[1] for r in con.execute(f"PRAGMA table_info({name})")}
            if have != columns:
                raise InputError(
                    f"{_where(path)}: table {name} has columns {', '.join(sorted(have))}, not "
                    f"this kit's ({', '.join(sorted(columns))}); use another KIT_REFS_DB"
                )
    return version


@contextmanager
def open_db(path: Path, write: bool) -> Iterator[sqlite3.Connection | None]:
    """A connection to the database (None to a reader when there is none yet): created and
    migrated for a writer, read-only for a reader; every sqlite3 problem is one line."""
    exists = _check_entry(path)
    if not exists and not write:
        yield None
        return
    try:
        if write:
            refuse_inside_bundle(path, "KIT_REFS_DB")  # a bundle's manifest would not match
            path.parent.mkdir(parents=True, exist_ok=True)
            con = sqlite3.connect(path, timeout=10)
        else:
            # read-write where the user may write (never created): a journal that a killed
            # writer left is rolled back, which a read-only connection cannot do
            mode = "rw" if os.access(path, os.W_OK) else "ro"
            con = sqlite3.connect(f"{path.resolve().as_uri()}?mode={mode}", uri=True, timeout=10)
        with closing(con):
            version = _check_schema(con, path)
            if write:
                for statement in _CREATE:
                    con.execute(statement)
                if version < DB_VERSION:
                    con.execute(f"PRAGMA user_version = {DB_VERSION}")  # the migration
                con.commit()
            yield con
            if write:
                con.commit()
    except sqlite3.Error as exc:
        raise InputError(f"{_where(path)}: {' '.join(str(exc).split())}") from None
    except OSError as exc:
        raise InputError(f"{_where(path)}: {exc.strerror or exc}") from None
