"""The typed bundle model: every committed bundle loads, round trips, and each bad file is one line."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from kit.io.errors import InputError
from kit.model import (
    BUNDLE_SCHEMA,
    Environment,
    Hardware,
    Results,
    RunResult,
    RunSpec,
    load_bundle,
)
from kit.model.files import MAX_DEPTH, MAX_JSON_BYTES, MAX_YAML_BYTES
from kit.model.schema import MODELS, stale, write
from tests.conftest import ROOT

EXAMPLES = sorted(p.parent for p in (ROOT / "reports" / "examples").glob("*/results.json"))
BUNDLES = [*EXAMPLES, ROOT / "tests" / "fixtures" / "bundles" / "cpu-smoke"]


@pytest.mark.parametrize("path", BUNDLES, ids=lambda p: p.name)
def test_every_committed_bundle_loads(path: Path) -> None:
    data = load_bundle(path)
    raw = json.loads((path / "results.json").read_text())
    assert len(data.results.runs) == len(raw["runs"]) > 0
    assert data.recipe.name == raw["recipe"]
    assert data.hardware is not None and data.environment is not None
    # every run folder has its spec; a worker result, when present, names the same run
    assert sorted(data.runs) == sorted(p.name for p in (path / "runs").iterdir())
    for run_id, files in data.runs.items():
        assert files.spec.run_id == run_id
        assert files.result is None or files.result.run_id == run_id


def test_examples_are_all_found() -> None:
    assert len(EXAMPLES) >= 9  # a glob that found nothing would make the test above vacuous


@pytest.mark.parametrize("path", BUNDLES, ids=lambda p: p.name)
def test_round_trip_model_json_model(path: Path) -> None:
    data = load_bundle(path)
    pairs = [(Results, data.results), (Hardware, data.hardware), (Environment, data.environment)]
    for files in data.runs.values():
        pairs.append((RunSpec, files.spec))
        if files.result is not None:
            pairs.append((RunResult, files.result))
    for model, value in pairs:
        text = json.dumps(value.dump(), allow_nan=False)
        again = model.model_validate(json.loads(text))
        assert again == value
        assert again.dump() == value.dump()


@pytest.mark.parametrize("path", BUNDLES, ids=lambda p: p.name)
def test_dump_as_written_is_the_file(path: Path) -> None:
    """The bridge for readers that still take dicts: validated, yet the file's own shape."""
    data = load_bundle(path)
    for name, value in (
        ("results.json", data.results),
        ("hardware.json", data.hardware),
        ("environment.json", data.environment),
    ):
        assert value is not None
        assert value.dump(as_written=True) == json.loads((path / name).read_text()), name


def test_fields_added_later_take_their_defaults(tmp_path: Path) -> None:
    """An early bundle without adaptive, environment_diff or slurm still loads, with defaults."""
    bundle = copy_bundle(tmp_path)
    results = json.loads((bundle / "results.json").read_text())
    for key in ("adaptive", "environment_diff", "slurm", "planned_runs", "command"):
        results.pop(key, None)
    for run in results["runs"]:
        for key in ("nccl", "launch", "exit_code", "telemetry", "notes", "finished_at"):
            run.pop(key, None)
    (bundle / "results.json").write_text(json.dumps(results))
    data = load_bundle(bundle)
    assert data.results.adaptive == {} and data.results.environment_diff is None
    assert data.results.planned_runs == 0 and data.results.runs[0].launch is None


def test_schema_files_match_the_models() -> None:
    assert stale() == [], "run: python -m kit.model.schema"


def test_schema_check_names_a_stale_file(tmp_path: Path) -> None:
    write(tmp_path)
    assert stale(tmp_path) == []
    (tmp_path / "results.schema.json").write_text("{}\n")
    assert stale(tmp_path) == ["results.schema.json"]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(f"{n}.schema.json" for n in MODELS)


# --- hostile and malformed files ----------------------------------------------------------


def copy_bundle(tmp_path: Path) -> Path:
    dst = tmp_path / "b"
    shutil.copytree(ROOT / "tests" / "fixtures" / "bundles" / "cpu-smoke", dst)
    return dst


def edit_json(bundle: Path, name: str, change) -> None:  # type: ignore[no-untyped-def]
    data = json.loads((bundle / name).read_text())
    change(data)
    (bundle / name).write_text(json.dumps(data))


def first_run(bundle: Path) -> str:
    return sorted(p.name for p in (bundle / "runs").iterdir())[0]


def _set(path: tuple, value):  # type: ignore[no-untyped-def]
    def change(data):  # type: ignore[no-untyped-def]
        for key in path[:-1]:
            data = data[key]
        data[path[-1]] = value

    return change


def _drop(key: str):  # type: ignore[no-untyped-def]
    return lambda data: data.pop(key)


def _write(name: str, content: bytes):  # type: ignore[no-untyped-def]
    return lambda b: (b / name).write_bytes(content)


METRIC = ("runs", 0, "metrics", "busbw_peak", "value")
CASES = {
    "malformed json": (
        _write("results.json", b'{"schema": 1,'),
        "results.json:1: not valid JSON (Expecting property name enclosed in double quotes,"
        " column 14)",
    ),
    "not utf-8": (
        _write("hardware.json", b'{"schema": 1,\n "summary": "\xff"}'),
        "hardware.json:2: not valid UTF-8 (byte 0xff)",
    ),
    "nan": (
        _write("environment.json", b'{"pinned": false, "runtime": "host", "x": NaN}'),
        "environment.json: not valid JSON (NaN is not a number JSON allows)",
    ),
    "infinity": (
        _write("environment.json", b'{"pinned": false, "runtime": "host", "x": -Infinity}'),
        "environment.json: not valid JSON (-Infinity is not a number JSON allows)",
    ),
    "overflowing number": (
        _write("environment.json", b'{"pinned": false, "runtime": "host", "x": 1e999}'),
        "environment.json: not valid JSON (1e999 is beyond ±1e+30 (no measured number is that large))",
    ),
    "duplicate key": (
        _write("environment.json", b'{"pinned": false, "pinned": true, "runtime": "host"}'),
        "environment.json: not valid JSON (duplicate key 'pinned')",
    ),
    "not an object": (
        _write("hardware.json", b"[1, 2]"),
        "hardware.json: expected a JSON object, got list",
    ),
    "deep nesting": (
        _write("hardware.json", b'{"schema": 1, "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"),
        f"hardware.json: nested deeper than {MAX_DEPTH} levels",
    ),
    "wrong type": (
        lambda b: edit_json(b, "results.json", _set(METRIC, "fast")),
        "results.json: runs.0.metrics.busbw_peak.value: expected a valid number, got 'fast'",
    ),
    "float for an integer": (
        lambda b: edit_json(b, "results.json", _set(("repeats",), 1.5)),
        "results.json: repeats: expected a valid integer, got 1.5",
    ),
    "bool for an integer": (
        lambda b: edit_json(b, "results.json", _set(("repeats",), True)),
        "results.json: repeats: expected a valid integer, got True",
    ),
    "repeats beyond the recipe bound": (
        lambda b: edit_json(b, "results.json", _set(("repeats",), 1_000_000_000)),
        "results.json: repeats: expected less than or equal to 100, got 1000000000",
    ),
    "control characters in a key": (
        lambda b: edit_json(b, "results.json", _set(("runs", 0, "metrics", "a\nb"), 1)),
        "results.json: runs.0.metrics.a\\nb: expected a valid dictionary or instance of Metric,"
        " got 1",
    ),
    "string for a number": (
        lambda b: edit_json(b, "results.json", _set(("repeats",), "2")),
        "results.json: repeats: expected a valid integer, got '2'",
    ),
    "unknown status": (
        lambda b: edit_json(b, "results.json", _set(("runs", 0, "status"), "great")),
        "results.json: runs.0.status: expected 'ok', 'failed', 'timeout' or 'skipped', got 'great'",
    ),
    "unknown field": (
        lambda b: edit_json(b, "results.json", _set(("surprise",), 1)),
        "results.json: surprise: unknown field",
    ),
    "missing field": (
        lambda b: edit_json(b, "results.json", _drop("status")),
        "results.json: status: required field is missing",
    ),
    "schema newer": (
        lambda b: edit_json(b, "results.json", _set(("schema",), 3)),
        f"results.json: schema 3 is newer than this kit reads ({BUNDLE_SCHEMA}); upgrade kit",
    ),
    "schema a string": (
        lambda b: edit_json(b, "results.json", _set(("schema",), "1")),
        "results.json: schema: expected a positive integer, got '1'",
    ),
    "hardware schema newer": (
        lambda b: edit_json(b, "hardware.json", _set(("schema",), 7)),
        "hardware.json: schema 7 is newer than this kit reads (1); upgrade kit",
    ),
    "missing results.json": (
        lambda b: (b / "results.json").unlink(),
        ": not a kit bundle (no results.json)",
    ),
    "missing recipe": (
        lambda b: (b / "recipe.yaml").unlink(),
        "recipe.yaml: missing",
    ),
    "python-tagged recipe": (
        _write("recipe.yaml", b"kit: 1\nname: !!python/object/apply:os.system ['true']\n"),
        "recipe.yaml:2: invalid YAML: YAML tags are not allowed in recipes"
        " ('!!python/object/apply:os.system'): write the value itself",
    ),
    "deeply nested recipe": (
        _write("recipe.yaml", b"kit: 1\nname: " + b"[" * 5000 + b"]" * 5000 + b"\n"),
        "recipe.yaml:2: invalid YAML: nested more than 32 levels deep",
    ),
    "recipe not utf-8": (
        _write("recipe.yaml", b"kit: 1\nname: \xfe\n"),
        "recipe.yaml:2: not valid UTF-8 (byte 0xfe)",
    ),
    "huge json": (
        lambda b: os.truncate(b / "results.json", MAX_JSON_BYTES + 1),
        f"results.json: {MAX_JSON_BYTES + 1} bytes is over the {MAX_JSON_BYTES}-byte limit",
    ),
    "huge recipe": (
        lambda b: os.truncate(b / "recipe.yaml", MAX_YAML_BYTES + 1),
        f"recipe.yaml: {MAX_YAML_BYTES + 1} bytes is over the {MAX_YAML_BYTES}-byte limit",
    ),
    "symlinked file": (
        lambda b: _replace(b / "hardware.json", lambda p: p.symlink_to("/etc/passwd")),
        "hardware.json: is a symlink, expected a regular file",
    ),
    "fifo": (
        lambda b: _replace(b / "environment.json", lambda p: os.mkfifo(p)),
        "environment.json: is a FIFO, expected a regular file",
    ),
    "directory for a file": (
        lambda b: _replace(b / "hardware.json", lambda p: p.mkdir()),
        "hardware.json: is a directory, expected a regular file",
    ),
    "symlinked runs folder": (
        lambda b: _replace(b / "runs", lambda p: p.symlink_to(b / "logs")),
        "runs: is a symlink, expected a directory",
    ),
}


def _replace(path: Path, make) -> None:  # type: ignore[no-untyped-def]
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()
    make(path)


@pytest.mark.parametrize("case", sorted(CASES))
def test_malformed_file_is_one_line(tmp_path: Path, case: str) -> None:
    bundle = copy_bundle(tmp_path)
    damage, expected = CASES[case]
    damage(bundle)
    with pytest.raises(InputError) as info:
        load_bundle(bundle)
    message = str(info.value)
    assert "\n" not in message
    assert message == f"{bundle}{'' if expected.startswith(':') else '/'}{expected}"


def test_a_run_folder_that_is_a_symlink_is_refused(tmp_path: Path) -> None:
    bundle = copy_bundle(tmp_path)
    run = first_run(bundle)
    _replace(bundle / "runs" / run, lambda p: p.symlink_to(bundle / "runs" / "elsewhere"))
    with pytest.raises(InputError, match=r"is a symlink, expected a directory$"):
        load_bundle(bundle)


def test_a_run_folder_not_named_for_its_run_is_refused(tmp_path: Path) -> None:
    bundle = copy_bundle(tmp_path)
    run = first_run(bundle)
    (bundle / "runs" / run).rename(bundle / "runs" / "renamed")
    with pytest.raises(InputError) as info:
        load_bundle(bundle)
    assert str(info.value) == (
        f"{bundle}/runs/renamed/spec.json: run_id: expected 'renamed' (its folder), got {run!r}"
    )


def test_a_run_folder_with_a_hostile_name_is_refused(tmp_path: Path) -> None:
    bundle = copy_bundle(tmp_path)
    (bundle / "runs" / first_run(bundle)).rename(bundle / "runs" / "evil\nname")
    with pytest.raises(InputError) as info:
        load_bundle(bundle)
    assert str(info.value) == (
        f"{bundle}/runs/evil\\nname: not a run folder name (^[a-z0-9][a-z0-9._-]*$)"
    )


def test_worker_result_newer_schema(tmp_path: Path) -> None:
    bundle = copy_bundle(tmp_path)
    run = first_run(bundle)
    edit_json(bundle, f"runs/{run}/result.json", _set(("schema",), 2))
    with pytest.raises(InputError) as info:
        load_bundle(bundle)
    assert str(info.value) == (
        f"{bundle}/runs/{run}/result.json: schema 2 is newer than this kit reads (1); upgrade kit"
    )
