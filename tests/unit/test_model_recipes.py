"""recipe_differences: stored recipes compared with defaults filled, never an empty difference."""

from __future__ import annotations

import pytest
import yaml

from kit.io.errors import InputError
from kit.model import load_bundle, recipe_differences
from kit.recipe import load_recipe
from tests.conftest import ROOT

BUNDLE = ROOT / "reports" / "examples" / "h200x2-fsdp-llama"


def stored(path=BUNDLE) -> dict:  # type: ignore[no-untyped-def]
    return yaml.safe_load((path / "recipe.yaml").read_text())


def test_nodes_null_and_absent_are_the_same_recipe() -> None:
    """The bug of `kit compare`: `nodes: null` in one recipe, no `nodes` in the other."""
    with_null, without = stored(), stored()
    with_null["nodes"] = None
    without.pop("nodes", None)
    assert recipe_differences(with_null, without) == []


def test_a_stored_recipe_equals_its_loaded_model() -> None:
    data = load_bundle(BUNDLE)
    assert recipe_differences(data.recipe, stored()) == []


def test_defaults_written_or_not_are_equal() -> None:
    full = stored()
    short = {k: v for k, v in full.items() if k not in ("cv_threshold", "timeout_s", "max_repeats")}
    short["max_repeats"] = None  # resolves to repeats, as the stored recipe wrote it
    short["cv_threshold"], short["timeout_s"] = 0.03, full["timeout_s"]
    assert full["cv_threshold"] == 0.03  # the default, written out in the stored recipe
    assert recipe_differences(full, short) == []


def test_differences_are_dotted_paths() -> None:
    a, b = stored(), stored()
    b["gpus"] = a["gpus"] + 2
    b["benchmarks"][0]["params"]["seq_len"] = a["benchmarks"][0]["params"]["seq_len"] // 2
    assert recipe_differences(a, b) == ["benchmarks.0.params.seq_len", "gpus"]


def test_description_alone_is_no_difference() -> None:
    a, b = stored(), stored()
    b["description"] = "another text"
    assert recipe_differences(a, b) == []
    assert recipe_differences(a, b, ignore=()) == ["description"]


def at(tree, path: str):  # type: ignore[no-untyped-def]
    """The value at a dotted path, or a marker when the path does not exist on this side."""
    for key in path.split("."):
        if isinstance(tree, dict) and key in tree:
            tree = tree[key]
        elif isinstance(tree, list) and key.isdigit() and int(key) < len(tree):
            tree = tree[int(key)]
        else:
            return "<absent>"
    return tree


@pytest.mark.parametrize(
    ("recipe", "bundle"),
    [("fsdp_llama", "h200x2-fsdp-llama"), ("allreduce", "h200x4-allreduce")],
)
def test_every_named_path_really_differs(recipe: str, bundle: str) -> None:
    """The shipped recipe against a committed bundle: no path named that is equal on both."""
    fresh = load_recipe(ROOT / "recipes" / f"{recipe}.yaml")
    old = load_bundle(ROOT / "reports" / "examples" / bundle).recipe
    paths = recipe_differences(fresh, old)
    for path in paths:
        assert at(fresh.resolved(), path) != at(old.resolved(), path), path
    if bundle == "h200x2-fsdp-llama":  # issue 13's case: the same recipe, `nodes` written or not
        # since recorded, the recipe times a window of at least 30 s (smoke: none)
        # and its expect names the GPU model and count it was measured on
        assert paths == [
            "benchmarks.0.expect.throughput.gpu_model",
            "benchmarks.0.expect.throughput.gpus",
            "benchmarks.0.params.min_window_s",
            "benchmarks.0.smoke.min_window_s",
        ]
    else:
        assert "gpus" in paths


def test_an_invalid_recipe_is_one_line() -> None:
    bad = stored()
    bad["gpus"] = "two"
    with pytest.raises(InputError) as info:
        recipe_differences(stored(), bad)
    assert str(info.value) == (
        "second recipe: gpus: must be a GPU count from 1 to 64, or all, got 'two'"
    )
