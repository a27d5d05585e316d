"""JSON Schema of every bundle file, generated from the models into schema/ at the repository root.

    python -m kit.model.schema           # rewrite schema/*.schema.json
    python -m kit.model.schema --check   # exit 1 naming each file that differs (CI, tests)

The files are for people and other tools (ReFrame-style report checks); the kit itself reads
through the models.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from kit.model.environment import Environment
from kit.model.hardware import Hardware
from kit.model.results import Results
from kit.model.run import RunResult, RunSpec
from kit.model.software import Software
from kit.recipe import Recipe

MODELS: dict[str, type[BaseModel]] = {
    "results": Results,
    "run_result": RunResult,
    "run_spec": RunSpec,
    "hardware": Hardware,
    "environment": Environment,
    "software": Software,
    "recipe": Recipe,
}
SCHEMA_DIR = Path(__file__).resolve().parent.parent.parent / "schema"


def schema_of(model: type[BaseModel]) -> dict[str, Any]:
    schema = model.model_json_schema(by_alias=True, mode="validation")
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema}


def render(name: str) -> str:
    return json.dumps(schema_of(MODELS[name]), indent=2, sort_keys=True) + "\n"


def write(directory: Path = SCHEMA_DIR) -> list[Path]:
    directory.mkdir(exist_ok=True)
    out = []
    for name in MODELS:
        path = directory / f"{name}.schema.json"
        path.write_text(render(name))
        out.append(path)
    return out


def stale(directory: Path = SCHEMA_DIR) -> list[str]:
    """Names of the committed schema files that differ from what the models generate."""
    return [
        f"{name}.schema.json"
        for name in MODELS
        if not (directory / f"{name}.schema.json").is_file()
        or (directory / f"{name}.schema.json").read_text() != render(name)
    ]


def main(argv: list[str]) -> int:
    if argv == ["--check"]:
        bad = stale()
        for name in bad:
            print(f"schema/{name} differs from the models; run: python -m kit.model.schema")
        return 1 if bad else 0
    if argv:
        print("usage: python -m kit.model.schema [--check]", file=sys.stderr)
        return 2
    for path in write():
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
