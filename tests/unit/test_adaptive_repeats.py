"""Adaptive repeats in the run loop: whole repeats (all variants) are added while a headline
metric is noisy, up to the cap, and the bundle records whether the cap was reached.

The runtime is a stand-in that writes the result file a worker would write (no torchrun here:
the loop is what is tested; tests/integration runs real workers).
"""

from __future__ import annotations

import json

import pytest

import kit.run.engine as engine
from kit.io.errors import InputError
from kit.recipe import parse_recipe
from kit.run.adaptive import adaptive_record
from kit.run.engine import Options, run_recipe
from kit.runtime.base import LaunchRequest, RunOutcome
from kit.stats.spread import AdaptiveRepeats
from tests.conftest import results_model

RECIPE = """\
kit: 1
name: adaptive
gpus: 2
repeats: 2
{extra}
benchmarks:
  - kind: allreduce
    params: {{max_bytes: 64}}
  - kind: allreduce
    name: second
    params: {{max_bytes: 64}}
"""


class ScriptedRuntime:
    """Writes a worker-shaped result whose busbw comes from a per-benchmark script of values."""

    name, pinned = "scripted", False
    inventory = None

    def __init__(self, values: dict[str, list[float]]) -> None:
        self.values = {k: list(v) for k, v in values.items()}
        self.launched: list[str] = []
        self.environment = {
            "name": "scripted",
            "runtime": "scripted",
            "pinned": False,
            "container": None,
        }
        self.closed = False

    def close(self) -> None:
        self.closed = True

    def run(self, req: LaunchRequest) -> RunOutcome:
        run_dir, nproc, env, log_path, device = (
            req.run_dir,
            req.nproc,
            req.env,
            req.log_path,
            req.device,
        )
        spec = json.loads((run_dir / "spec.json").read_text())
        self.launched.append(spec["run_id"])
        value = self.values[spec["benchmark"]].pop(0)
        result = {**{k: spec[k] for k in ("run_id", "benchmark", "kind", "variant", "repeat")},
                  "schema": 1, "status": "ok", "error": None, "world_size": nproc,
                  "device": device, "env": env, "versions": {"torch": "x"},
                  "metrics": {"busbw_peak": {"value": value, "unit": "GB/s", "higher_is_better": True}},
                  "data": {"sizes": []}}  # fmt: skip
        (run_dir / "result.json").write_text(json.dumps(result))
        log_path.write_text("scripted\n")
        return RunOutcome(0, False, False, 0.01, ["scripted"], None)


def go(tmp_path, monkeypatch, extra: str, values: dict[str, list[float]]):
    runtime = ScriptedRuntime(values)
    monkeypatch.setattr(engine, "make_runtime", lambda *a, **k: runtime)
    recipe = parse_recipe(RECIPE.format(extra=extra), "r.yaml")
    bundle, code = run_recipe(recipe, Options(device="cpu", out=tmp_path / "b"))
    assert code == 0 and runtime.closed  # the engine cleans up after the runs
    return bundle, runtime.launched


# values in launch order: p2p r0, no-p2p r0, p2p r1, no-p2p r1, ...
QUIET = [10.0, 5.0, 10.01, 5.01, 10.0, 5.0, 10.0, 5.0]
NOISY_P2P = [10.0, 5.0, 20.0, 5.0, 10.0, 5.0, 20.0, 5.0, 10.0, 5.0]


def test_noisy_benchmark_gets_whole_repeats_until_the_cap(tmp_path, monkeypatch):
    bundle, launched = go(tmp_path, monkeypatch, "max_repeats: 4\ncv_threshold: 0.05",
                          {"allreduce": NOISY_P2P, "second": QUIET})  # fmt: skip
    assert launched == [
        "allreduce.p2p.r0", "allreduce.no-p2p.r0", "allreduce.p2p.r1", "allreduce.no-p2p.r1",
        "allreduce.p2p.r2", "allreduce.no-p2p.r2", "allreduce.p2p.r3", "allreduce.no-p2p.r3",
        "second.p2p.r0", "second.no-p2p.r0", "second.p2p.r1", "second.no-p2p.r1",
    ]  # fmt: skip
    results = json.loads((bundle.path / "results.json").read_text())
    noisy, quiet = results["adaptive"]["allreduce"], results["adaptive"]["second"]
    assert (noisy["repeats"], noisy["cap_reached"], noisy["noisy"]) == (4, True, ["p2p"])
    assert noisy["metric"] == "busbw_peak" and noisy["cv"]["no-p2p"] == 0.0
    assert (quiet["repeats"], quiet["cap_reached"], quiet["noisy"]) == (2, False, [])
    assert results["recipe"] == "adaptive" and len(results["runs"]) == 12


def test_adding_stops_when_the_spread_settles(tmp_path, monkeypatch):
    # r0/r1: CV 4.1%; a third repeat in the middle brings it to 2.9%, under the 3% default
    settles = [10.0, 5.0, 10.6, 5.0, 10.3, 5.0]
    bundle, launched = go(tmp_path, monkeypatch, "max_repeats: 5",
                          {"allreduce": settles, "second": QUIET})  # fmt: skip
    assert sum(r.startswith("allreduce.") for r in launched) == 6
    record = bundle.results.adaptive["allreduce"]
    assert (record.repeats, record.cap_reached, record.noisy) == (3, False, [])


def test_off_by_default(tmp_path, monkeypatch):
    bundle, launched = go(tmp_path, monkeypatch, "", {"allreduce": NOISY_P2P, "second": QUIET})
    assert len(launched) == 8
    record = bundle.results.adaptive["allreduce"]
    assert record.max_repeats == 2 and record.noisy == ["p2p"] and record.cap_reached
    recipe = bundle.recipe_model()
    assert recipe.max_repeats == 2 and recipe.cv_threshold == 0.03


def test_failed_repeats_count_and_never_loop():
    runs = results_model([{"benchmark": "b", "variant": "p2p", "repeat": r, "status": "failed"}
                          for r in range(3)]).runs  # fmt: skip
    record = adaptive_record(runs, "b", AdaptiveRepeats(3, 10, 0.03))
    assert record.repeats == 3 and not record.more and record.metric is None


def test_max_repeats_below_repeats_is_a_located_error():
    text = RECIPE.format(extra="max_repeats: 1")
    with pytest.raises(
        InputError, match=r"^r.yaml:5: max_repeats: must be at least repeats \(2\), got 1$"
    ):
        parse_recipe(text, "r.yaml")


def test_a_cv_just_over_the_threshold_is_said_with_the_digits_that_show_it():
    """The report review's number formats (12): a 2x H200 rerun's comparison printed "stayed
    noisy (no-p2p CV 3.0% > 3%)" for a CV of 3.04%."""
    from kit.model.results import AdaptiveRecord
    from kit.report.method import adaptive_why
    from kit.stats.spread import cv_words

    assert cv_words(0.0304, 0.03) == "3.04%" and cv_words(0.0304, 0.03, 1) == "3.04%"
    assert cv_words(0.05, 0.03) == "5%" and cv_words(0.123, 0.03, 1) == "12.3%"
    assert cv_words(0.0296, 0.03) == "2.96%"  # under it, said apart from it too
    assert cv_words(None, 0.03).startswith("unbounded")
    # a bundle that recorded the old sentence is said from its recorded CVs
    rec = AdaptiveRecord(
        metric="busbw_largest", planned=3, max_repeats=3, cv_threshold=0.03, repeats=3,
        cv={"p2p": 0.005, "no-p2p": 0.0304}, noisy=["no-p2p"], cap_reached=True,
        reason="no-p2p CV 3.0% > 3%",
    )  # fmt: skip
    assert adaptive_why(rec) == "no-p2p CV 3.04% > 3%"
    from tests.unit.test_compare import run

    # the rerun's P2P-off busbw on machine J (28.71, 27.52, 27.08 GB/s: CV 3.04%)
    runs = [run(v, i, x) for v, xs in (("p2p", [348.0, 345.8, 348.1]),
            ("no-p2p", [28.71, 27.52, 27.08])) for i, x in enumerate(xs)]  # fmt: skip
    made = adaptive_record(runs, "ar", AdaptiveRepeats(min_repeats=3, max_repeats=3))
    assert made.noisy == ["no-p2p"] and made.reason == "no-p2p CV 3.04% > 3%"
