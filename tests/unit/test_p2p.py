"""One answer to "did this run have peer-to-peer off?", asked by every part of the kit."""

from __future__ import annotations

import pytest

from kit.recipe import BUILTIN_VARIANTS
from kit.report.analysis import build_benchmarks
from kit.shared import p2p
from kit.shared.p2p import p2p_off
from tests.conftest import recipe_model, results_model


@pytest.mark.parametrize(
    ("value", "off"),
    [("1", True), (" 1", True), ("0x1", True), ("2", True), ("0", False), ("", False),
     ("true", False), ("00", False), ("yes", False)],
)  # fmt: skip
def test_the_environment_is_read_as_nccl_reads_it(value, off):
    """NCCL parses an integer (strtoll, base 0); a word is invalid and leaves its default."""
    assert p2p_off({"NCCL_P2P_DISABLE": value}) is off


def test_what_nccl_took_from_the_environment_wins():
    env = {"NCCL_P2P_DISABLE": "1"}
    assert p2p_off(env, {"env": {"NCCL_P2P_DISABLE": "0"}}) is False
    assert p2p_off({}, {"env": {"NCCL_P2P_DISABLE": "1"}}) is True
    assert p2p_off(env, {"env": {}}) is True and p2p_off(None) is False


def test_the_recipe_variants_are_the_shared_ones():
    for name, (env, _) in p2p.VARIANTS.items():
        assert BUILTIN_VARIANTS[name].env == env
    assert p2p_off(BUILTIN_VARIANTS["no-p2p"].env) and not p2p_off(BUILTIN_VARIANTS["p2p"].env)


def _run(variant: str, repeat: int, value: float, env: dict[str, str]) -> dict:
    return {
        "run_id": f"ar.{variant}.r{repeat}", "benchmark": "ar", "kind": "allreduce",
        "variant": variant, "repeat": repeat, "status": "ok", "env": env, "device": "cuda",
        "metrics": {"busbw_largest": {"value": value, "unit": "GB/s", "higher_is_better": True}},
    }  # fmt: skip


def test_a_variant_is_judged_by_what_its_runs_held_not_by_its_name():
    """Variants named "staged" (P2P off) and "direct": the P2P verdict compares direct with
    staged, whatever their order and names; a variant set to "true" did not turn P2P off."""
    off, on, word = {"NCCL_P2P_DISABLE": "1"}, {}, {"NCCL_P2P_DISABLE": "true"}
    runs = [
        _run(v, i, x, env)
        for i in range(3)
        for v, x, env in (("staged", 30.0 + i / 10, off), ("direct", 300.0 + i, on),
                          ("word", 310.0 + i, word))
    ]  # fmt: skip
    recipe = recipe_model(benchmarks=[{"kind": "allreduce", "name": "ar"}],
                          variants=[{"name": "staged"}, {"name": "direct"}, {"name": "word"}])  # fmt: skip
    (bench,) = build_benchmarks(results_model(runs, repeats=3), recipe)
    assert [v.p2p_off for v in bench.variants] == [True, False, False]
    first = bench.verdicts[0]
    assert first.p2p and first.sentence.startswith("Peer-to-peer makes")
    assert "10." in first.sentence and "faster" in first.sentence
    assert not bench.verdicts[1].p2p  # direct against word: both had P2P on
