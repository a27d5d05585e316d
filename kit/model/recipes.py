"""Whether two stored recipes ask for the same runs, field by field.

Recipes are compared after validation with every default filled in (Recipe.resolved), so a
field one bundle wrote as `nodes: null` and an older bundle did not write at all are equal.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from kit.io.errors import InputError
from kit.model.loader import expected_text
from kit.recipe import Recipe

IGNORED = ("description", "verified_on")
"""Top-level fields that describe a recipe without changing what it runs."""


def _drop_prose(recipe: dict[str, Any]) -> None:
    """A reference's `source` (where a figure came from) and a variant's description are prose,
    not part of the method (the built-in variants' words changed in kit 0.1.0's life)."""
    for variant in recipe.get("variants") or []:
        if isinstance(variant, dict):
            variant.pop("description", None)
    for bench in recipe.get("benchmarks") or []:
        for ref in (bench.get("expect") or {}).values() if isinstance(bench, dict) else ():
            if isinstance(ref, dict):
                ref.pop("source", None)


def _resolved(recipe: Recipe | dict[str, Any], label: str) -> dict[str, Any]:
    if isinstance(recipe, dict):
        try:
            recipe = Recipe.model_validate(recipe)
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(map(str, err["loc"])) or "(top level)"
            raise InputError(f"{label}: {where}: {expected_text(err)}") from None
    return recipe.resolved()


def _diff(a: Any, b: Any, path: str, out: list[str]) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b), key=str):
            _diff(a.get(key), b.get(key), f"{path}.{key}" if path else str(key), out)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _diff(x, y, f"{path}.{i}" if path else str(i), out)
    elif a != b:
        out.append(path or "(top level)")


def recipe_differences(
    a: Recipe | dict[str, Any], b: Recipe | dict[str, Any], ignore: tuple[str, ...] = IGNORED
) -> list[str]:
    """Dotted paths of the fields where `a` and `b` differ, defaults filled; [] when equal.

    `ignore` drops top-level fields that do not change what runs (description by default).
    A dict is validated as a Recipe first (InputError, one line, if it is not one).
    """
    left, right = _resolved(a, "first recipe"), _resolved(b, "second recipe")
    for key in ignore:
        left.pop(key, None)
        right.pop(key, None)
    _drop_prose(left)
    _drop_prose(right)
    out: list[str] = []
    _diff(left, right, "", out)
    return out
