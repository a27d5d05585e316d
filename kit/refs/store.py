"""Reference results: extract from a bundle, store, list, look up, and place a new result.

A reference is a small JSON document: the bundle's label and source, a hardware summary (GPU
model and count, interconnect, driver, CPU) and, per benchmark and variant, the per-repeat
values of every metric of the runs that finished. No logs, no telemetry samples.

Results are matched by recipe kind and the workload parameters that change the figure
(kit.refs.matching: each workload declares the ones that do not, and those are named where they
differ; a reference stored without its parameters by the signature of all of them, canonical
JSON, sha256), not by GPU count: a 4-GPU machine that ran the same workload is a reference for a
2-GPU one, and `standing` gives per-GPU ratios for that reason.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3
import statistics
from collections.abc import Iterator, Mapping
from importlib import resources
from pathlib import Path
from typing import Any

from kit.bundle.intake import receive
from kit.inventory.topology import first_pair_link
from kit.io.errors import InputError
from kit.model import BundleData, Hardware, load_bundle
from kit.model.loader import validate
from kit.refs.db import open_db
from kit.refs.document import StoredReference
from kit.refs.matching import WINDOW_ONLY, same_workload
from kit.shared import files
from kit.shared import metrics as catalog
from kit.workloads.registry import headline_metric

REF_SCHEMA = 1
MAX_REF_LABEL = 80
LABEL = re.compile(rf"[\w .,:+()/@#-]{{1,{MAX_REF_LABEL}}}")
"""A user reference's label: one printable line (it is a row of `kit refs list`)."""


def db_path() -> Path:
    """$KIT_REFS_DB, else $XDG_DATA_HOME/kit/refs.sqlite (~/.local/share/kit/refs.sqlite).
    Set but empty (`KIT_REFS_DB=`, a script's unset variable) is refused: falling back to the
    default store would add to, or read, a database the user did not name."""
    named = os.environ.get("KIT_REFS_DB")
    if named is not None and not named.strip():
        raise InputError(
            "KIT_REFS_DB is set but empty; name the references database file, or unset it for "
            "the default (~/.local/share/kit/refs.sqlite)"
        )
    if named:
        return Path(named)
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "kit" / "refs.sqlite"


def signature(kind: str, params: Mapping[str, Any] | None) -> str:
    """ "kind:sha256(params)[:12]": equal when the workload is the same, GPU count aside."""
    same = {k: v for k, v in (params or {}).items() if k not in WINDOW_ONLY}
    blob = json.dumps(same, sort_keys=True, separators=(",", ":"))
    return f"{kind}:{hashlib.sha256(blob.encode()).hexdigest()[:12]}"


def hardware_summary(hardware: Hardware | None) -> dict[str, Any]:
    """GPU model and count, interconnect between GPU0 and GPU1, driver, CPU: a machine's label."""
    hw = hardware or Hardware()
    link = first_pair_link(hw)
    names = sorted({g.name for g in hw.gpus if g.name})
    return {
        "gpu": names[0] if len(names) == 1 else ", ".join(names) or None,
        "gpus": len(hw.gpus),
        "interconnect": link,
        "power_limit_w": hw.gpus[0].power_limit_w if hw.gpus else None,
        "driver": hw.driver.version if hw.driver else None,
        "cpu": hw.host.cpu_model if hw.host else None,
        "label": f"{len(hw.gpus)}x {names[0]}" + (f", {link}" if link else "")
        if len(names) == 1
        else None,
    }


def extract(bundle_dir: Path, label: str | None = None) -> dict[str, Any]:
    """The compact reference of a bundle (InputError for a directory that is not one)."""
    if not (Path(bundle_dir) / files.RESULTS).is_file():  # before walking a large folder
        raise InputError(f"{bundle_dir}: not a kit bundle (no results.json)")
    return reference_of(load_bundle(bundle_dir), label)


def reference_of(data: BundleData, label: str | None = None) -> dict[str, Any]:
    """The compact reference of a bundle already read: `refs add` passes the bundle that
    kit.bundle.intake.receive read once and checked against its manifest, so what is stored
    is what was verified (a second read could see a file swapped in between)."""
    bundle_dir = data.path
    res = data.results
    hw = hardware_summary(data.hardware)
    benches: dict[tuple[str, str], dict[str, Any]] = {}
    for run in res.runs:
        if run.status != "ok":
            continue
        entry = benches.setdefault(
            (run.benchmark, run.variant),
            {
                "benchmark": run.benchmark,
                "variant": run.variant,
                "kind": run.kind,
                "signature": signature(run.kind, run.data.params),
                # what it ran: matched on those that change the figure (kit.refs.matching)
                "params": dict(run.data.params or {}),
                "world_size": run.world_size,
                # how long a window was timed: not in the signature, named where it differs
                "min_window_s": (run.data.params or {}).get("min_window_s"),
                "metrics": {},
            },
        )
        for name, m in run.metrics.items():
            slot = entry["metrics"].setdefault(
                name, {"unit": m.unit, "higher_is_better": m.higher_is_better, "values": []}
            )
            slot["values"].append(m.value)
    return {
        "schema": REF_SCHEMA,
        "label": label or hw["label"] or Path(bundle_dir).name,
        "source": Path(bundle_dir).name,
        "recipe": res.recipe,
        "created_at": res.created_at,
        "kit_version": res.kit_version,
        "runtime": res.runtime,  # host or a container: named beside a ratio where it differs
        # by the one rule (Environment.pin): an image FROM a local base is not pinned, whatever
        # a bundle written before the rule recorded
        "pinned": data.environment.pin()[0] if data.environment else res.pinned,
        "hardware": hw,
        "benchmarks": list(benches.values()),
    }


def shipped() -> list[dict[str, Any]]:
    """The references that come with kit (kit/refs/data/*.json)."""
    out = []
    for f in sorted(resources.files("kit.refs").joinpath("data").iterdir(), key=lambda p: p.name):
        if f.name.endswith(".json"):
            out.append({**json.loads(f.read_text()), "origin": "shipped", "id": f.name[:-5]})
    return out


def add(
    bundle_dir: Path,
    label: str | None = None,
    db: Path | None = None,
    allowed_signers: Path | None = None,
    allow_unsigned: bool = False,
) -> dict[str, Any]:
    """Add a bundle's reference to the user store; a label already there is an InputError.
    The bundle must be sealed, complete and (with `allowed_signers`) signed (kit.bundle.intake)."""
    # read_broken None: the database never holds a bundle whose signature is broken
    data = receive(
        Path(bundle_dir),
        "add only an untouched bundle",
        allowed_signers,
        allow_unsigned,
        read_broken=None,
    )
    if data.results.status != "complete":
        raise InputError(
            f"{bundle_dir}: status {data.results.status}, not every planned run finished; a "
            "reference is made only from a complete bundle"
        )
    if label is not None and not LABEL.fullmatch(label):
        raise InputError(
            f"--label {label[:40]!r}: at most {MAX_REF_LABEL} letters, digits, spaces and "
            ".,:+()/@#-_ (one line)"
        )
    if label is not None and label in {r["id"] for r in shipped()}:
        raise InputError(f"--label {label!r}: the name of a shipped reference; choose another")
    doc = reference_of(data, label)
    path = db or db_path()
    with open_db(path, write=True) as con:
        stored_rows(con, path)  # a row `refs list` refuses is refused here too: nothing written
        try:
            cur = con.execute(
                "INSERT INTO refs (label, source, doc) VALUES (?, ?, ?)",
                (doc["label"], str(Path(bundle_dir).resolve()), json.dumps(doc)),
            )
        except sqlite3.IntegrityError:
            raise InputError(
                f"a reference labelled {doc['label']!r} exists; choose another --label"
            ) from None
        rows = [(cur.lastrowid, b["kind"], b["signature"]) for b in doc["benchmarks"]]
        con.executemany(
            "INSERT INTO ref_benchmarks (ref_id, kind, signature) VALUES (?, ?, ?)", rows
        )
        _read_back(con, path, cur.lastrowid, doc, rows)
    return doc


def _read_back(
    con: Any, path: Path, rid: int, doc: dict[str, Any], rows: list[tuple[Any, ...]]
) -> None:
    """The rows as the database now holds them must be the ones written; else nothing is
    committed (open_db rolls back on the error) and the database is refused."""
    got = con.execute("SELECT label, doc FROM refs WHERE id = ?", (rid,)).fetchone()
    stored = con.execute(
        "SELECT ref_id, kind, signature FROM ref_benchmarks WHERE ref_id = ? ORDER BY rowid",
        (rid,),
    ).fetchall()
    if got != (doc["label"], json.dumps(doc)) or [tuple(r) for r in stored] != rows:
        raise InputError(
            f"references database {path}: reads back other rows than the kit wrote; nothing "
            "was added (use another KIT_REFS_DB)"
        )


def remove(label: str, db: Path | None = None) -> None:
    try:
        label.encode()
    except UnicodeEncodeError:  # bytes that are no text (a surrogate): no label is that
        raise InputError(f"no user reference labelled {label!r} (see: kit refs list)") from None
    with open_db(db or db_path(), write=True) as con:
        row = con.execute("SELECT id FROM refs WHERE label = ?", (label,)).fetchone()
        if row is None:
            raise InputError(f"no user reference labelled {label!r} (see: kit refs list)")
        con.execute("DELETE FROM ref_benchmarks WHERE ref_id = ?", (row[0],))
        con.execute("DELETE FROM refs WHERE id = ?", (row[0],))


def list_refs(
    db: Path | None = None, include_shipped: bool = True, include_user: bool = True
) -> list[dict[str, Any]]:
    """Every reference: the shipped ones, then the user's (each with `origin`)."""
    out = shipped() if include_shipped else []
    path = db or db_path()
    if not include_user:
        return out
    with open_db(path, write=False) as con:
        rows = stored_rows(con, path) if con else []
    return out + [{**doc, "origin": "user", "id": rid} for rid, doc in rows]


def stored_rows(con: sqlite3.Connection, path: Path) -> list[tuple[int, dict[str, Any]]]:
    """Every user reference as (id, document), each checked by `_stored`: the one read check
    that `refs list`, `standing` and `refs add` (before it writes) apply."""
    rows = con.execute("SELECT id, doc FROM refs ORDER BY id").fetchall()
    return [(rid, _stored(doc, path, rid)) for rid, doc in rows]


def _stored(doc: object, path: Path, rid: int) -> dict[str, Any]:
    """A stored reference document, or one line: the database was edited by something else."""
    try:
        data = json.loads(doc) if isinstance(doc, str) else None
    except ValueError:
        data = None
    if not isinstance(data, dict) or not isinstance(data.get("benchmarks"), list):
        raise InputError(f"references database {path}: row {rid} is not a kit reference")
    if data.get("schema") != REF_SCHEMA:
        shown = repr(data.get("schema"))[:20]
        raise InputError(
            f"references database {path}: row {rid} has schema {shown}, this kit reads "
            f"{REF_SCHEMA}; upgrade kit or use another KIT_REFS_DB"
        )
    validate(StoredReference, data, f"references database {path}: row {rid}")
    return data


def lookup(
    kind: str, params: Mapping[str, Any] | None, db: Path | None = None
) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """(reference, its benchmark entry) for every known result of the same workload."""
    here = {"kind": kind, "params": dict(params or {}), "signature": signature(kind, params)}
    return ((ref, b) for ref, b, _ in same_workloads(here, db))


def same_workloads(
    here: Mapping[str, Any], db: Path | None = None, include_user: bool = True
) -> Iterator[tuple[dict[str, Any], dict[str, Any], list[str]]]:
    """(reference, its benchmark entry, the parameters that differ without changing the figure,
    in words) for every known result of the workload of `here` (a benchmark entry as
    reference_of writes it): kit.refs.matching.same_workload, one rule for every reference."""
    for ref in list_refs(db, include_user=include_user):
        for b in ref["benchmarks"]:
            words = same_workload(here["kind"], here, b)
            if words is not None:
                yield ref, b, words


def standing(
    data: BundleData,
    db: Path | None = None,
    headline_only: bool = False,
    include_user: bool = True,
    judged: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """Where a bundle's results (as read once, kit.bundle.intake.receive) stand against every
    known machine that ran the same workload.

    One row per (benchmark, variant, metric, reference): both medians, the ratio new/ref
    (oriented so > 1 is better), and the same per GPU when the GPU counts differ; with the
    reference's `hardware` label ("2x NVIDIA H200, NV18"), `source` (its bundle's name and
    whether it is shipped or the user's) and the metric's words (`metric_label`, `headline`).
    The reference that is the bundle itself (same recipe and created_at) is skipped.
    headline_only: only each workload's headline metric (what a report's first page shows).
    include_user: False for a sealed report, which must read the same on every machine: only
    the references shipped with kit, none from this user's store.
    judged: benchmark -> the metric its page leads with where that is not the workload's
    headline (whole-window throughput under a power cap), so page 1 compares that figure.
    """
    new = reference_of(data)  # the bundle as the caller read (and checked) it: read once
    rows = []
    for b in new["benchmarks"]:
        head = (judged or {}).get(b["benchmark"]) or headline_metric(b["kind"])
        for ref, rb, params in same_workloads(b, db, include_user):
            if (ref.get("recipe"), ref.get("created_at")) == (new["recipe"], new["created_at"]):
                continue
            if rb["variant"] != b["variant"]:
                continue
            for name, m in b["metrics"].items():
                if headline_only and name != head:
                    continue
                r = rb["metrics"].get(name)
                vals = [v for v in m["values"] if isinstance(v, int | float)]
                rvals = [v for v in (r or {}).get("values", []) if isinstance(v, int | float)]
                if not vals or not rvals:
                    continue
                mine, theirs = statistics.median(vals), statistics.median(rvals)
                if theirs == 0 or mine == 0:
                    continue
                hib = catalog.higher_is_better(name, m.get("higher_is_better", True))
                better = mine / theirs if hib else theirs / mine
                gpus, rgpus = b.get("world_size"), rb.get("world_size")
                rows.append(
                    {
                        "benchmark": b["benchmark"],
                        "variant": b["variant"],
                        "metric": name,
                        "unit": m["unit"],
                        "value": mine,
                        "n": len(vals),
                        "reference": ref["label"],
                        "origin": ref["origin"],
                        "reference_value": theirs,
                        "reference_n": len(rvals),
                        "metric_label": catalog.label(name),
                        "headline": name == head,
                        "hardware": (ref.get("hardware") or {}).get("label") or "unknown hardware",
                        "source": f"{ref.get('source')} ({ref['origin']})",
                        "ratio_better": better,
                        "gpus": gpus,
                        "reference_gpus": rgpus,
                        # what its processes drove: GPUs, or CPU ranks on a machine without any
                        "reference_on_gpus": bool((ref.get("hardware") or {}).get("gpus")),
                        "unlike": unlike(new, b, ref, rb, len(vals), len(rvals), params),
                        "ratio_better_per_gpu": better * rgpus / gpus
                        if gpus and rgpus and gpus != rgpus and catalog.per_gpu(name)
                        else None,
                    }
                )
    return rows


def unlike(
    new: dict[str, Any],
    b: dict[str, Any],
    ref: dict[str, Any],
    rb: dict[str, Any],
    n: int,
    ref_n: int,
    params: list[str] | None = None,
) -> list[str]:
    """How a known machine's figure was not taken like this bundle's, in words: the GPU model,
    the run count, the GPU count, the runtime (host or container, pinned or not), the timed
    window and the parameters that differ without changing the figure (`params`,
    kit.refs.matching); a reference that did not record one of them says so ([]: like for like
    on all six)."""
    out = []
    model, rmodel = ((d.get("hardware") or {}).get("gpu") for d in (new, ref))
    if model and rmodel and model != rmodel:  # the first thing that explains a ratio
        out.append(f"{model} here against {rmodel} there")
    if n != ref_n:
        out.append(f"{n} run{'s' if n != 1 else ''} here against {ref_n} there")
    gpus, rgpus = b.get("world_size"), rb.get("world_size")
    if gpus != rgpus:
        out.append(f"{gpus} GPU{'s' if gpus != 1 else ''} here against {rgpus} there")
    here, there = _runtime_words(new), _runtime_words(ref)
    if here != there:
        out.append(f"{here} here against {there} there")
    window, rwindow = b.get("min_window_s") or 0, rb.get("min_window_s")
    if "min_window_s" not in rb:
        if window:
            out.append("its timed window's rule not recorded there")
    elif window != (rwindow or 0):  # 0 or none: the window lasted the steps, no minimum
        mine, theirs = (f"at least {w:g} s" if w else "no minimum" for w in (window, rwindow))
        out.append(f"a timed window of {mine} here against {theirs} there")
    if params:
        out.append("parameters that do not change the figure: " + "; ".join(params))
    return out


def _runtime_words(doc: Mapping[str, Any]) -> str:
    if "runtime" not in doc:
        return "a runtime not recorded"
    pinned = "pinned" if doc.get("pinned") else "not pinned"
    return f"the {doc.get('runtime') or 'unknown'} runtime ({pinned})"
