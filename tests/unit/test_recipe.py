"""Recipe validation: every bad recipe is one line naming file, line, field and what is allowed."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from kit.io.errors import InputError
from kit.recipe import load_recipe, recipe_dir
from kit.workloads import registry

GOOD = """\
kit: 1
name: demo
gpus: 2
benchmarks:
  - kind: allreduce
    params:
      max_bytes: 4096
"""


def write(tmp_path: Path, text: str, name: str = "r.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def error_of(path: Path) -> str:
    with pytest.raises(InputError) as info:
        load_recipe(path)
    assert info.value.exit_code == 2
    message = str(info.value)
    assert "\n" not in message
    return message


def test_good_recipe_fills_defaults(tmp_path):
    recipe = load_recipe(write(tmp_path, GOOD))
    assert [v.name for v in recipe.resolved_variants()] == ["p2p", "no-p2p"]
    assert recipe.resolved_variants()[1].env == {"NCCL_P2P_DISABLE": "1"}
    params = recipe.benchmarks[0].resolved_params(smoke=False)
    assert params["max_bytes"] == 4096 and params["iters"] == 20


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (GOOD.replace("gpus: 2", "gpus: 2\ncolour: red"), "r.yaml:4: colour: unknown key"),
        (
            GOOD.replace("gpus: 2", "gpus: two"),
            "r.yaml:3: gpus: must be a GPU count from 1 to 64, or all",
        ),
        (
            GOOD.replace("gpus: 2", "gpus: 0"),
            "r.yaml:3: gpus: must be a GPU count from 1 to 64, or all",
        ),
        (  # YAML's true is no count, and "All" is not the word
            GOOD.replace("gpus: 2", "gpus: true"),
            "r.yaml:3: gpus: must be a GPU count from 1 to 64, or all",
        ),
        (
            GOOD.replace("gpus: 2", "gpus: All"),
            "r.yaml:3: gpus: must be a GPU count from 1 to 64, or all",
        ),
        (  # every GPU, and two of them named: one of the two is a slip
            GOOD.replace("gpus: 2", "gpus: all\nvariants: [{name: two, gpu_ids: [0, 1]}]"),
            "r.yaml:4: variants: variant 'two': gpu_ids with gpus: all (every GPU)",
        ),
        (
            GOOD.replace("kind: allreduce", "kind: allgather"),
            "r.yaml:5: benchmarks.0.kind: unknown benchmark kind 'allgather'; allowed: "
            + ", ".join(sorted(registry.KINDS)),
        ),
        (
            GOOD.replace("max_bytes: 4096", "max_bytes: 4096\n      sizes: 3"),
            "r.yaml:8: benchmarks.0.params.sizes: unknown parameter for allreduce; allowed: min_bytes, max_bytes, factor, dtype, warmup_iters, iters, trials, timing, graph_max_bytes, log_nccl_choice, time_in_place, latency, size_budget_s",
        ),
        (
            GOOD.replace("max_bytes: 4096", "max_bytes: 4"),
            "r.yaml:7: benchmarks.0.params.max_bytes: must be at least min_bytes",
        ),
        (
            GOOD.replace("max_bytes: 4096", "dtype: int8"),
            "r.yaml:7: benchmarks.0.params.dtype: input should be 'float32', 'bfloat16' or 'float16'",
        ),
        (
            GOOD.replace("kit: 1", "kit: 2"),
            "r.yaml:1: kit: recipe format version 2 is not supported; allowed: 1",
        ),
        (
            GOOD.replace("gpus: 2", "variants: [p2p, nvlink]"),
            "r.yaml:3: variants: unknown variant 'nvlink'; allowed: p2p, no-p2p or a mapping with name, env, gpu_ids",
        ),
        (  # a benchmark's own variants name the recipe's
            GOOD.replace("kind: allreduce", "kind: allreduce\n    variants: [p2p, nvlink]"),
            "r.yaml:6: benchmarks.0.variants: 'nvlink' is not one of the recipe's variants "
            "(p2p, no-p2p)",
        ),
        (
            GOOD.replace("kind: allreduce", "kind: allreduce\n    variants: [p2p, p2p]"),
            "r.yaml:6: benchmarks.0.variants: names must be unique, got ['p2p', 'p2p']",
        ),
        (
            GOOD.replace("kind: allreduce", "kind: allreduce\n    variants: []"),
            "r.yaml:6: benchmarks.0.variants: list should have at least 1 item after validation, "
            "not 0",
        ),
        (
            GOOD.replace("name: demo", "name: Demo Recipe"),
            "r.yaml:2: name: string should match pattern '^[a-z0-9][a-z0-9._-]*$'",
        ),
        (GOOD.replace("name: demo\n", ""), "r.yaml:1: name: required field is missing"),
        (
            "kit: 1\nname: x\nbenchmarks: []\n",
            "r.yaml:3: benchmarks: list should have at least 1 item after validation, not 0",
        ),
        (GOOD + "gpus: 4\n", "r.yaml:8: gpus: duplicate key"),
        (
            "kit: 1\nname: [unclosed\n",
            "r.yaml:3: invalid YAML: expected ',' or ']', but got '<stream end>'",
        ),
        (
            "- just\n- a list\n",
            "r.yaml:1: the recipe must be a mapping of keys (kit, name, benchmarks, ...)",
        ),
        (
            "kit: !!python/object/apply:os.system ['echo hi']\n",
            "r.yaml:1: invalid YAML: YAML tags are not allowed in recipes ('!!python/object/apply:os.system'): write the value itself",
        ),
        (
            "a: &a [1, 2]\nb: *a\n",
            "r.yaml:2: invalid YAML: YAML aliases (*name) are not allowed in recipes",
        ),
    ],
)
def test_bad_recipes_have_exact_errors(tmp_path, text, expected):
    path = write(tmp_path, text)
    assert error_of(path) == f"{tmp_path}/{expected}"


def test_empty_file(tmp_path):
    assert (
        error_of(write(tmp_path, "  \n"))
        == f"{tmp_path}/r.yaml: the recipe is empty; it needs at least `kit: 1`, a name and benchmarks"
    )


def test_missing_and_directory(tmp_path):
    assert error_of(tmp_path / "nope.yaml") == f"{tmp_path}/nope.yaml: no such file"
    assert error_of(tmp_path) == f"{tmp_path}: is a directory, expected a recipe YAML file"


def test_non_utf8(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_bytes(b"kit: 1\nname: caf\xe9\n")
    assert error_of(path) == f"{path}:2: not valid UTF-8 (byte 0xe9)"


def test_billion_laughs_is_refused_fast(tmp_path):
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [
        f"a{i}: &a{i} [*a{i - 1},*a{i - 1},*a{i - 1},*a{i - 1},*a{i - 1},*a{i - 1}]"
        for i in range(1, 10)
    ]
    path = write(tmp_path, "\n".join(lines) + "\n")
    assert "YAML aliases (*name) are not allowed in recipes" in error_of(path)


def test_custom_variant_and_smoke_overrides(tmp_path):
    text = GOOD.replace(
        "gpus: 2",
        "gpus: 2\nvariants:\n  - p2p\n  - {name: cross, env: {NCCL_P2P_LEVEL: LOC}, gpu_ids: [0, 4]}",
    )
    text += "    smoke:\n      max_bytes: 64\n"
    recipe = load_recipe(write(tmp_path, text))
    assert recipe.resolved_variants()[1].gpu_ids == [0, 4]
    assert recipe.benchmarks[0].resolved_params(smoke=True)["max_bytes"] == 64


def test_shipped_recipes_are_valid():
    paths = sorted(recipe_dir().glob("*.yaml"))
    assert paths, "recipes/ holds no recipe"
    for path in paths:
        load_recipe(path)


def test_a_benchmark_runs_the_variants_it_names(tmp_path):
    """`variants` on a benchmark: its runs are those variants' (recipe order), the others run
    every variant; a bundle's recipe lists them where a benchmark names them, nowhere else, and
    a run of a variant its benchmark does not run is refused when the bundle is read."""
    from kit.model.consistency import check_results
    from kit.run.plan import plan
    from tests.conftest import results_model

    text = GOOD + "  - kind: all_gather\n    variants: [no-p2p]\n"
    recipe = load_recipe(write(tmp_path, text))
    runs = [s.run_id for s in plan(recipe, "cpu", smoke=True, repeats=2)]
    both = [f"allreduce.{v}.r{i}" for i in (0, 1) for v in ("p2p", "no-p2p")]
    assert runs == [*both, "all_gather.no-p2p.r0", "all_gather.no-p2p.r1"]
    resolved = recipe.resolved()["benchmarks"]
    assert "variants" not in resolved[0] and resolved[1]["variants"] == ["no-p2p"]
    assert [v.name for v in recipe.variants_of("all_gather")] == ["no-p2p"]
    assert [v.name for v in recipe.variants_of("allreduce")] == ["p2p", "no-p2p"]
    run = {"benchmark": "all_gather", "kind": "all_gather", "repeat": 0, "device": "cpu"}
    ok = results_model(
        [{**run, "variant": "no-p2p", "run_id": "all_gather.no-p2p.r0"}], recipe="demo"
    )
    check_results(ok, recipe, tmp_path, None)
    bad = results_model([{**run, "variant": "p2p", "run_id": "all_gather.p2p.r0"}], recipe="demo")
    refused = r"variant 'p2p' is not one of the recipe's for 'all_gather' \(no-p2p\)"
    with pytest.raises(InputError, match=refused):
        check_results(bad, recipe, tmp_path, None)
