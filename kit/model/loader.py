"""The one way to read a bundle: every file checked, typed, and each problem one line.

    data = load_bundle(path)   # BundleData: recipe, results, hardware, environment, runs

A problem names the file, the field and what was expected, e.g.
`b/results.json: runs.0.metrics.throughput.value: expected a finite number, got 'fast'`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from kit.io.errors import InputError
from kit.model.base import SCHEMAS
from kit.model.consistency import check_hardware, check_results
from kit.model.environment import Environment
from kit.model.files import MAX_YAML_BYTES, decode, list_dir, one_line, read_bytes, read_json
from kit.model.hardware import Hardware
from kit.model.results import Results
from kit.model.run import RunResult, RunSpec
from kit.model.software import Software
from kit.recipe import Recipe, parse_recipe
from kit.shared import files

M = TypeVar("M", bound=BaseModel)
MAX_RUNS = 10_000
"""Most run folders a bundle may hold (recipes cap repeats at 100)."""
REQUIRED_SCHEMA = (files.RESULTS, files.RESULT, files.SPEC)
"""Files that must carry `schema`; hardware.json and environment.json may lack it (older kits)."""
RUN_ID = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
"""A run folder's name: benchmark.variant.rN, each part a recipe name."""


@dataclass
class RunFiles:
    """One run's folder: the spec the driver wrote and the worker's result (absent on failure)."""

    run_id: str
    spec: RunSpec
    result: RunResult | None


@dataclass
class BundleData:
    """Everything a bundle holds that a reader needs, validated."""

    path: Path
    recipe: Recipe
    results: Results
    hardware: Hardware | None
    environment: Environment | None
    runs: dict[str, RunFiles] = field(default_factory=dict)
    # software.json: what the image held (kit.runtime.images.software); None without one
    software: Software | None = None
    # nccl-tests/<name>: nccl-tests output run in the same call (`kit refs nccl-tests`), as text
    nccl_tests: dict[str, str] = field(default_factory=dict)
    # read with --read-broken-signature although its signature does not verify: the line that
    # says so (every page made from it carries it), else ""
    broken_signature: str = ""


def expected_text(err: dict[str, Any]) -> str:
    """A pydantic error as 'what was expected, got what' (or 'unknown field', 'missing')."""
    kind, msg = err["type"], err["msg"]
    if kind == "extra_forbidden":
        return "unknown field"
    if kind == "missing":
        return "required field is missing"
    text = msg.removeprefix("Value error, ")
    text = text.replace("Input should be", "expected").replace("input should be", "expected")
    text = text[0].lower() + text[1:]
    if "input" in err:
        got = repr(err.get("input"))
        text += f", got {got[:40] + '...' if len(got) > 40 else got}"
    return text


def _field(loc: tuple[Any, ...]) -> str:
    parts = ["schema" if p == "schema_" else str(p) for p in loc]
    return ".".join(parts) if parts else "(top level)"


def validate(model: type[M], data: Any, shown: Path | str) -> M:
    """`data` as `model`, or one InputError line: file, field, what was expected."""
    if not isinstance(data, dict):
        raise InputError(f"{shown}: expected a JSON object, got {type(data).__name__}")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise InputError(f"{shown}: {_field(err['loc'])}: {expected_text(err)}") from None
    except RecursionError:
        raise InputError(f"{shown}: nested too deeply to read") from None


def check_schema(data: Any, name: str, shown: Path, required: bool = True) -> None:
    """Refuse a file whose `schema` is newer than this kit reads (or not a positive integer)."""
    if not isinstance(data, dict):
        return  # validate() says what is wrong
    newest = SCHEMAS[name]
    version = data.get("schema")
    if version is None and not required:
        return
    if type(version) is not int or version < 1:
        raise InputError(f"{shown}: schema: expected a positive integer, got {version!r}")
    if version > newest:
        raise InputError(
            f"{shown}: schema {version} is newer than this kit reads ({newest}); upgrade kit"
        )


def read_model(root: Path, rel: str, model: type[M], schema: str | None = None) -> M:
    """One JSON file of the bundle, read safely, version-checked and validated."""
    shown = root / rel
    try:
        data = read_json(root, rel)
        if schema is not None:
            check_schema(data, schema, shown, required=schema in REQUIRED_SCHEMA)
        if (
            schema == files.RESULTS
            and isinstance(data, dict)
            and isinstance(data.get("runs"), list)
        ):
            for i, run in enumerate(data["runs"]):  # each run record is a result.json's
                check_schema(run, files.RESULT, Path(f"{shown}: runs.{i}"))
        return validate(model, data, shown)
    except InputError as exc:
        raise InputError(one_line(str(exc))) from None


def read_recipe(root: Path) -> Recipe:
    """recipe.yaml as stored (resolved), through the recipe's own strict loader."""
    shown = root / files.RECIPE
    text = decode(read_bytes(root, files.RECIPE, MAX_YAML_BYTES), shown)
    try:
        recipe = parse_recipe(text, str(shown))
    except RecursionError:
        raise InputError(f"{shown}: nested too deeply to read") from None
    if not isinstance(recipe.gpus, int):  # the run counted them: a bundle records the number
        raise InputError(f"{shown}: gpus: {recipe.gpus}; a bundle records the GPU count it ran on")
    return recipe


def _optional(
    root: Path, names: list[str], rel: str, model: type[M], schema: str | None = None
) -> M | None:
    return read_model(root, rel, model, schema) if rel in names else None


def read_runs(root: Path) -> dict[str, RunFiles]:
    """runs/<id>/spec.json (required) and result.json (when the worker wrote one)."""
    names = list_dir(root, files.RUNS)
    if len(names) > MAX_RUNS:
        raise InputError(f"{root / files.RUNS}: {len(names)} entries, more than {MAX_RUNS}")
    runs: dict[str, RunFiles] = {}
    for name in names:
        if not RUN_ID.match(name):
            raise InputError(
                f"{root / files.RUNS / name}: not a run folder name ({RUN_ID.pattern})"
            )
        present = list_dir(root, f"{files.RUNS}/{name}")
        spec = read_model(root, files.run_file(name, files.SPEC), RunSpec, files.SPEC)
        result = None
        if files.RESULT in present:
            result = read_model(root, files.run_file(name, files.RESULT), RunResult, files.RESULT)
        if spec.run_id != name:
            raise InputError(
                f"{root / files.run_file(name, files.SPEC)}: run_id: expected {name!r} (its folder),"
                f" got {spec.run_id!r}"
            )
        runs[name] = RunFiles(name, spec, result)
    return runs


def load_bundle(path: str | Path) -> BundleData:
    """Read and validate a whole bundle; raises InputError (one line) on the first problem.

    Required: results.json, recipe.yaml. Optional: hardware.json, environment.json (absent while
    a Slurm job has not been collected), software.json (an image's inventory), runs/. Nothing is followed through a link.
    """
    try:
        return _load(Path(path))
    except InputError as exc:  # names and keys come from the sender: keep them on one line
        raise InputError(one_line(str(exc))) from None


def _load(root: Path) -> BundleData:
    names = list_dir(root, ".") if root.is_dir() else None
    if names is None:
        raise InputError(f"{root}: not a kit bundle (not a directory)")
    if files.RESULTS not in names:
        raise InputError(f"{root}: not a kit bundle (no results.json)")
    results = read_model(root, files.RESULTS, Results, files.RESULTS)
    if files.RECIPE not in names:
        raise InputError(f"{root / 'recipe.yaml'}: missing")
    recipe = read_recipe(root)
    hardware = _optional(root, names, files.HARDWARE, Hardware, files.HARDWARE)
    environment = _optional(root, names, files.ENVIRONMENT, Environment, files.ENVIRONMENT)
    runs = read_runs(root)
    nprocs = {name: run.spec.nproc for name, run in runs.items()} if files.RUNS in names else None
    check_results(results, recipe, root / files.RESULTS, nprocs)
    check_hardware(results, hardware, root / files.HARDWARE)
    software = _optional(root, names, files.SOFTWARE, Software, files.SOFTWARE)
    nccl_tests = read_nccl_tests(root)
    return BundleData(
        root, recipe, results, hardware, environment, runs, nccl_tests=nccl_tests, software=software
    )


MAX_NCCL_TESTS_BYTES = 1 << 20
"""One nccl-tests output file: a sweep to 16 GiB prints a few kilobytes."""


def read_nccl_tests(root: Path) -> dict[str, str]:
    """The same-call nccl-tests outputs a bundle holds (files.NCCL_TESTS/*.txt), by name."""
    out = {}
    for name in list_dir(root, files.NCCL_TESTS):
        if name.endswith(".txt"):
            rel = f"{files.NCCL_TESTS}/{name}"
            out[name] = decode(read_bytes(root, rel, MAX_NCCL_TESTS_BYTES), root / rel)
    return out
