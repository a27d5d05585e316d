"""Recipes: YAML files validated into typed models, with errors that point at a line.

A recipe says what to measure (benchmarks and their parameters), how (GPU count, variants,
repeats, timeout) and in which pinned environment. Loading is strict: unknown keys, YAML tags
that construct objects, aliases (the billion-laughs bomb) and duplicate keys are all errors, and
every error is one line naming the file, the line, the field and what is allowed.
"""

from __future__ import annotations

import re
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    BeforeValidator,
    Field,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from kit.io.errors import InputError
from kit.recipe.base import Strict, TuningEnv
from kit.recipe.environments import check_environment
from kit.recipe.gpus import check_gpus
from kit.recipe.nodes import Nodes
from kit.recipe.yamlfile import LocatedError, StrictLoader, line_map, read_text
from kit.shared import p2p
from kit.shared.gpu_specs import gpu_model_key
from kit.shared.limits import MAX_GPUS, MAX_REPEATS
from kit.shared.metrics import CV_THRESHOLD
from kit.shared.metrics import metric as catalog_entry
from kit.workloads.base import check_counts, check_numbers
from kit.workloads.registry import KINDS, broken, params_class

RECIPE_VERSION = 1
NAME_PATTERN = r"^[a-z0-9][a-z0-9._-]*$"
# a name becomes part of file and folder names (a bundle's, a run's `BENCH.VARIANT.rN`): well
# under a file system's 255 bytes, so that a run never fails on "File name too long"
NAME_MAX = 100
MAX_VARIANTS = 64
MAX_BENCHMARKS = 64


class Variant(Strict):
    """One way of running every benchmark: environment variables and, optionally, which GPUs."""

    name: str = Field(pattern=NAME_PATTERN, max_length=NAME_MAX)
    description: str = ""
    env: TuningEnv = Field(default={})  # pydantic copies a mutable default per model
    gpu_ids: list[Annotated[int, Field(strict=True, ge=0, le=1023)]] | None = None

    @field_validator("gpu_ids")
    @classmethod
    def _unique(cls, ids: list[int] | None) -> list[int] | None:
        if ids is not None and len(set(ids)) != len(ids):
            raise ValueError(f"GPU ids must be distinct, got {ids}")
        return ids


BUILTIN_VARIANTS = {
    name: Variant(name=name, description=words, env=env)
    for name, (env, words) in p2p.VARIANTS.items()
}


class Expectation(Strict):
    """A reference figure for a headline metric, ReFrame style: value, unit and tolerance, and
    the GPU model and count it was measured on (a reference judges only runs on those)."""

    value: float = Field(gt=0)  # a rate, a time or a count: never zero or negative
    unit: str
    tolerance: float = Field(default=0.1, ge=0, le=1)
    source: str = ""
    gpu_model: str | None = None  # "NVIDIA H200", as nvidia-smi names it
    gpus: int | None = Field(default=None, strict=True, ge=1)

    @field_validator("value", "tolerance", mode="before")
    @classmethod
    def _no_bool(cls, v: Any) -> Any:
        """YAML's true is no figure (pydantic would read it as 1.0); 1e3 (a YAML string) is."""
        if isinstance(v, bool):
            raise ValueError(f"must be a number, not {str(v).lower()}")
        return v

    def measured_on(self) -> tuple[str | None, int | None]:
        """(GPU model, count): the fields, else what an older recipe's source names ("2x H200
        NV18" -> ("H200", 2)); (None, None) where neither says."""
        found = MEASURED_ON.search(self.source)
        model = self.gpu_model or (found.group(2) if found else None)
        count = self.gpus or (int(found.group(1)) if found else None)
        return model, count


MEASURED_ON = re.compile(r"\b(\d+)\s*x\s*((?:NVIDIA\s+)?[A-Z]+\d+[A-Z]*)")
"""An older recipe's source text: "2x H200 NV18, P2P on" -> 2, "H200"."""


def _known_units(name: str, found: list[Expectation]) -> None:
    """A reference is for a metric the catalog knows, in a unit that metric is recorded in."""
    entry = catalog_entry(name)
    if entry is None:
        raise ValueError(f"{name}: not a metric this kit records")
    for exp in found:
        if exp.unit not in entry.units():
            raise ValueError(
                f"{name}: unit {exp.unit[:40]!r} is not one {name} is recorded in "
                f"({', '.join(entry.units())})"
            )


class Benchmark(Strict):
    kind: str
    name: str = Field(default="", pattern=r"^$|" + NAME_PATTERN, max_length=NAME_MAX)
    # mutable defaults written as Field(default=...): pydantic copies them per model
    params: dict[str, Any] = Field(default={})
    smoke: dict[str, Any] = Field(default={})
    # per metric, one reference or a list of them, one per GPU model and count it was measured
    # on: a run is judged only by the entry for its own model and count (kit.stats.acceptance)
    expect: dict[str, Expectation | list[Expectation]] = Field(default={})
    # the recipe's variants this benchmark runs, by name (None: all of them); a data-parallel
    # decode or a device-local copy moves nothing between GPUs, so its P2P-off runs would
    # measure the same thing again
    variants: list[str] | None = Field(default=None, min_length=1, max_length=MAX_VARIANTS)

    @field_validator("expect")
    @classmethod
    def _one_per_machine(
        cls, expect: dict[str, Expectation | list[Expectation]]
    ) -> dict[str, Expectation | list[Expectation]]:
        for metric, found in expect.items():
            _known_units(metric, found if isinstance(found, list) else [found])
            if not isinstance(found, list):
                continue
            if not found:
                raise ValueError(f"{metric}: an empty list of references")
            seen: set[tuple[str | None, int | None]] = set()
            for exp in found:
                model, count = exp.measured_on()
                if not (model and count):
                    raise ValueError(f"{metric}: each reference in a list names gpu_model and gpus")
                key = (gpu_model_key(model), count)
                if key in seen:
                    raise ValueError(f"{metric}: two references for {count}x {model}")
                seen.add(key)
        return expect

    def expectations(self) -> list[tuple[str, list[Expectation]]]:
        """(metric, its references), one entry or several per metric, as the recipe lists them."""
        return [(m, e if isinstance(e, list) else [e]) for m, e in self.expect.items()]

    @field_validator("kind")
    @classmethod
    def _known_kind(cls, kind: str) -> str:
        if kind not in KINDS:
            raise ValueError(
                f"unknown benchmark kind {kind!r}; allowed: {', '.join(sorted(KINDS))}"
            )
        if why := broken(kind):
            raise ValueError(f"workload {kind!r} cannot be loaded: {why}")
        return kind

    @property
    def label(self) -> str:
        return self.name or self.kind

    def resolved_params(self, smoke: bool) -> dict[str, Any]:
        """The parameters a run gets: defaults, then `params`, then `smoke` when smoke-scaled."""
        merged = {**self.params, **(self.smoke if smoke else {})}
        check_numbers(params_class(self.kind), merged)
        params = asdict(TypeAdapter(params_class(self.kind)).validate_python(merged))
        check_counts(params)
        return params


class Recipe(Strict):
    kit: int = Field(strict=True)  # `kit: "1"` or `kit: true` is not the format version
    name: str = Field(pattern=NAME_PATTERN, max_length=NAME_MAX)
    description: str = ""
    verified_on: str = ""
    environment: str = Field(default="cuda13", pattern=NAME_PATTERN, max_length=NAME_MAX)
    # a count, or `all`: every GPU of the machine, counted when the run starts (kit.recipe.gpus)
    gpus: Annotated[
        Annotated[int, Field(ge=1, le=MAX_GPUS)] | Literal["all"], BeforeValidator(check_gpus)
    ] = 2
    repeats: int = Field(default=3, strict=True, ge=1, le=MAX_REPEATS)
    # adaptive repeats: after `repeats`, add repeats while a headline metric's CV is above
    # cv_threshold, up to max_repeats (default: repeats, i.e. no adaptive repeats)
    max_repeats: int | None = Field(default=None, strict=True, ge=1, le=MAX_REPEATS)
    cv_threshold: float = Field(default=CV_THRESHOLD, strict=True, gt=0, lt=1)
    # at least a second: no launch starts sooner (0.001 would only ever time out)
    timeout_s: float = Field(default=1800, strict=True, ge=1, le=7 * 24 * 3600)
    # bounded: every variant runs every benchmark (or those that name it) every repeat
    # (10,000 variants is no recipe)
    variants: list[str | Variant] = Field(default=["p2p", "no-p2p"], max_length=MAX_VARIANTS)
    benchmarks: list[Benchmark] = Field(min_length=1, max_length=MAX_BENCHMARKS)
    nodes: Nodes | None = None  # several machines (kit/run/multinode.py); None: this one

    @field_validator("kit")
    @classmethod
    def _version(cls, v: int) -> int:
        if v != RECIPE_VERSION:
            raise ValueError(
                f"recipe format version {v} is not supported; allowed: {RECIPE_VERSION}"
            )
        return v

    @field_validator("max_repeats")
    @classmethod
    def _cap(cls, v: int | None, info: ValidationInfo) -> int | None:
        repeats = info.data.get("repeats")
        if v is not None and repeats is not None and v < repeats:
            raise ValueError(f"must be at least repeats ({repeats}), got {v}")
        return v

    @field_validator("variants")
    @classmethod
    def _variants(cls, items: list[str | Variant], info: ValidationInfo) -> list[str | Variant]:
        if not items:
            raise ValueError("at least one variant is needed")
        names = []
        for item in items:
            if isinstance(item, str) and item not in BUILTIN_VARIANTS:
                raise ValueError(
                    f"unknown variant {item!r}; allowed: {', '.join(BUILTIN_VARIANTS)}"
                    " or a mapping with name, env, gpu_ids"
                )
            names.append(item if isinstance(item, str) else item.name)
        if len(set(names)) != len(names):
            raise ValueError(f"variant names must be unique, got {names}")
        gpus = info.data.get("gpus")
        for item in items:
            ids = None if isinstance(item, str) else item.gpu_ids
            if ids is not None and gpus == "all":
                raise ValueError(f"variant {item.name!r}: gpu_ids with gpus: all (every GPU)")
            if ids is not None and gpus is not None and len(ids) != gpus:
                raise ValueError(
                    f"variant {item.name!r}: gpu_ids {ids} names {len(ids)} GPUs; gpus is {gpus}"
                )
        return items

    @model_validator(mode="after")
    def _benchmark_variants(self) -> Recipe:
        """A benchmark's own `variants` name the recipe's, each once."""
        names = [v.name for v in self.resolved_variants()]
        for i, bench in enumerate(self.benchmarks):
            chosen = bench.variants or []
            if len(set(chosen)) != len(chosen):
                raise ValueError(f"benchmarks.{i}.variants: names must be unique, got {chosen}")
            if unknown := [v for v in chosen if v not in names]:
                raise ValueError(
                    f"benchmarks.{i}.variants: {unknown[0]!r} is not one of the recipe's "
                    f"variants ({', '.join(names)})"
                )
        return self

    def resolved_variants(self) -> list[Variant]:
        return [BUILTIN_VARIANTS[v] if isinstance(v, str) else v for v in self.variants]

    def variants_of(self, benchmark: str) -> list[Variant]:
        """The variants the benchmark labelled `benchmark` runs, in the recipe's order (all of
        them for a label the recipe does not hold: a run a bundle recorded is judged by them)."""
        bench = next((b for b in self.benchmarks if b.label == benchmark), None)
        every = self.resolved_variants()
        if bench is None or bench.variants is None:
            return every
        return [v for v in every if v.name in bench.variants]

    def resolved(self) -> dict[str, Any]:
        """The recipe with every default filled in, as written into a bundle."""
        data = self.model_dump(mode="json")
        data["variants"] = [v.model_dump(mode="json") for v in self.resolved_variants()]
        data["max_repeats"] = self.max_repeats or self.repeats
        for bench, raw in zip(self.benchmarks, data["benchmarks"], strict=True):
            raw["name"] = bench.label
            raw["params"] = bench.resolved_params(smoke=False)
            if raw["variants"] is None:  # every variant: said once, by the recipe's list
                del raw["variants"]
        return data


UNION_BRANCHES = {"str", "Variant", "Expectation", "list[Expectation]"}
"""The names pydantic puts in an error's location for the branch of a union it tried."""


def _field_path(loc: tuple) -> str:
    parts = [str(p) for p in loc if not (isinstance(p, str) and p in UNION_BRANCHES)]
    return ".".join(parts) if parts else "(top level)"


def _line_for(lines: dict[tuple, int], loc: tuple) -> int | None:
    loc = tuple(p for p in loc if not (isinstance(p, str) and p in UNION_BRANCHES))
    while loc:
        if loc in lines:
            return lines[loc]
        loc = loc[:-1]
    return lines.get(())


def _explain(err: dict) -> str:
    kind, msg = err["type"], err["msg"]
    if kind == "extra_forbidden":
        return "unknown key"
    if kind == "missing":
        return "required field is missing"
    if kind == "value_error":
        return msg.removeprefix("Value error, ")
    if kind == "checked":
        return msg
    return msg[0].lower() + msg[1:]


def parse_recipe(text: str, source: str) -> Recipe:
    """Parse and validate recipe text; `source` names it in errors (usually the path)."""
    data, lines = _read_yaml(text, source)
    recipe = _validate(data, lines, source)
    for i, bench in enumerate(recipe.benchmarks):
        _check_params(bench, i, lines, source)
    labels = [b.label for b in recipe.benchmarks]
    if len(set(labels)) != len(labels):
        raise InputError(f"{source}: benchmarks: names must be unique, got {labels}; set `name:`")
    return recipe


def _read_yaml(text: str, source: str) -> tuple[dict[str, Any], dict[tuple, int]]:
    """The recipe's mapping and each key's line, read by the strict loader (no object tags, no
    duplicate keys); any YAML problem is one line naming the file and line."""
    if not text.strip():
        raise InputError(
            f"{source}: the recipe is empty; it needs at least `kit: 1`, a name and benchmarks"
        )
    try:
        loader = StrictLoader(text)
        try:
            node = loader.get_single_node()
            if node is None:
                raise InputError(f"{source}: the recipe is empty")
            lines = line_map(node)
            data = loader.construct_document(node)
        finally:
            loader.dispose()
    except LocatedError as exc:
        raise InputError(f"{source}:{exc.line}: {exc.field}: {exc.message}") from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{source}:{mark.line + 1}" if mark else source
        problem = (exc.problem or exc.context or "invalid YAML").strip()
        if "could not determine a constructor" in problem:
            problem = (
                "YAML tags that construct objects are not allowed ("
                + problem.split("tag ")[-1]
                + ")"
            )
        raise InputError(f"{where}: invalid YAML: {problem}") from None
    except yaml.YAMLError as exc:
        raise InputError(f"{source}: invalid YAML: {str(exc).splitlines()[0]}") from None
    except ValueError as exc:  # a value YAML's constructor cannot make
        raise InputError(f"{source}: invalid YAML: {str(exc).splitlines()[0][:200]}") from None
    if not isinstance(data, dict):
        raise InputError(
            f"{source}:1: the recipe must be a mapping of keys (kit, name, benchmarks, ...)"
        )
    return data, lines


def _validate(data: dict[str, Any], lines: dict[tuple, int], source: str) -> Recipe:
    """The typed recipe; its first error as one line at the line of the field it names."""
    try:
        return Recipe.model_validate(data)
    except ValidationError as exc:
        # a variant given as a mapping fails the `str` branch too: report the mapping's error
        errs = [
            e
            for e in exc.errors()
            if not (e["loc"][:1] == ("variants",) and e["loc"][-1:] == ("str",))
        ] or exc.errors()
        # a list of references fails the one-reference branch too: report the list's error
        errs = [e for e in errs if e["type"] != "model_type"] or errs
        err = errs[0]
        placed = re.match(r"^Value error, (benchmarks)\.(\d+)\.(\w+): (.*)$", err["msg"])
        if not err["loc"] and placed:  # a whole-recipe check names the field it refuses
            loc = (placed[1], int(placed[2]), placed[3])
            err = {**err, "loc": loc, "msg": placed[4], "type": "checked"}
        line = _line_for(lines, err["loc"])
        where = f"{source}:{line}" if line else source
        raise InputError(f"{where}: {_field_path(err['loc'])}: {_explain(err)}") from None


def _check_params(bench: Benchmark, i: int, lines: dict[tuple, int], source: str) -> None:
    """The benchmark's parameters, as run and at smoke scale, built by its workload's params
    class; an error points at the field, in `params` or `smoke`, where the value came from."""
    for section, smoke in (("params", False), ("smoke", True)):
        try:
            bench.resolved_params(smoke=smoke)
        except ValidationError as exc:
            err = exc.errors()[0]
            named = re.match(r"^Value error, (\w+): (.*)$", err["msg"])
            if named:  # a check in __post_init__ names its field first: point at that field
                err = {**err, "loc": (named[1],), "msg": named[2], "type": "checked"}
            loc = ("benchmarks", i, section, *err["loc"])
            # a bad value that came from `params` is reported there, even when found with smoke
            if section == "smoke" and err["loc"] and err["loc"][0] not in bench.smoke:
                loc = ("benchmarks", i, "params", *err["loc"])
            line = _line_for(lines, loc)
            allowed = ", ".join(f.name for f in _fields(params_class(bench.kind)))
            detail = _explain(err)
            if err["type"] in ("extra_forbidden", "unexpected_keyword_argument"):
                detail = f"unknown parameter for {bench.kind}; allowed: {allowed}"
            raise InputError(f"{source}:{line}: {_field_path(loc)}: {detail}") from None
        except ValueError as exc:
            named = re.match(r"^(\w+): ", str(exc))  # check_counts names its field first
            where: tuple[str, ...] = (section,)
            if named:  # where the value came from: smoke when it set it, else params
                in_smoke = section == "smoke" and named[1] in bench.smoke
                where = ("smoke" if in_smoke else "params", named[1])
            line = _line_for(lines, ("benchmarks", i, *where))
            raise InputError(f"{source}:{line}: benchmarks.{i}.{where[0]}: {exc}") from None


def _fields(cls: type) -> list:
    import dataclasses

    return [f for f in dataclasses.fields(cls) if not f.name.startswith("_")]


def load_recipe(path: str | Path) -> Recipe:
    """Read and validate a recipe file; raises InputError with file:line on any problem."""
    path = Path(path)
    recipe = parse_recipe(read_text(path), str(path))
    check_environment(recipe.environment, str(path))
    return recipe


def recipe_dir() -> Path:
    """Where the recipes that come with the kit live (the checkout's recipes/ folder)."""
    return Path(__file__).resolve().parents[2] / "recipes"
