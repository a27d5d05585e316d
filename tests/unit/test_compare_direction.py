"""Issue 48: a comparison states a direction only from 3 runs a side, and its headline is one
number whichever machine is the baseline (committed 2x H200 GPT-2 bundles)."""

from __future__ import annotations

import re

import pytest

from kit.report.choice import _times
from kit.report.compare import comparison, load_machines, render_html
from tests.conftest import ROOT

EXAMPLES = ROOT / "reports" / "examples"
LAB = EXAMPLES / "h200x2-gpt2-ddp"  # 3 runs a variant
ONCE = EXAMPLES / "h200x2-gpt2-ddp-host-20261128"  # 1 run a variant
BOX = EXAMPLES / "h200x2-gpt2-ddp-container"  # 3 runs a variant

pytestmark = pytest.mark.skipif(
    not all(p.is_dir() for p in (LAB, ONCE, BOX)), reason="the GPT-2 examples are not here"
)
DIRECTION = re.compile(r"\b(better|worse|faster|slower|ahead)\b")


def _choice(paths, labels, capped=None):
    machines = load_machines(paths, labels)
    for m in machines:
        if m.path == capped:  # its runs held the power cap: its page leads with the window
            for run in m.results.runs:
                for gpu in run.telemetry.gpus:
                    gpu["samples"]["throttle_mask"] = [4] * len(gpu["samples"]["t_s"])
    data = comparison(machines, 0)
    return data, data["choice"]["machines"][0]


def test_fewer_than_three_runs_a_side_is_a_screening_that_states_no_direction():
    data, ch = _choice([LAB, ONCE], {0: "lab", 1: "host"})
    assert ch["sentence"].startswith("Screening, no direction stated: gpt2-124m ran fewer than 3")
    assert not DIRECTION.search(ch["sentence"])
    (line,) = ch["lines"]
    assert line["screening"] and line["sentence"].startswith("screening (1 and 3 runs")
    assert not DIRECTION.search(line["sentence"])
    head = next(w for w in data["workloads"] if w["headline"] and w["variant"] == "p2p")
    assert head["cells"][1]["ratio"]["screening"]
    assert not DIRECTION.search(head["cells"][1]["ratio"]["sentence"])
    page = render_html(data, [])
    first = page[page.index("Which machine") : page.index("Headline results")]
    assert "screening" in first and not DIRECTION.search(re.sub(r"<[^>]+>", " ", first))


def test_the_headline_is_one_number_whichever_machine_is_the_baseline():
    """One machine at its power cap leads its page with the whole window; the comparison read the
    last machine's choice, so swapping the two changed the metric and the number."""
    _, first = _choice([LAB, BOX], {0: "lab", 1: "box"}, capped=BOX)
    _, second = _choice([BOX, LAB], {0: "box", 1: "lab"}, capped=BOX)
    assert first["lines"][0]["label"] == second["lines"][0]["label"]
    assert first["lines"][0]["label"] == "throughput over the whole window"
    assert first["sentence"] == second["sentence"]
    assert first["sentence"].startswith(("box (2x H200 NV18) is ", "lab (2x H200 NV18) is "))
    assert first["lines"][0]["apart"] == pytest.approx(second["lines"][0]["apart"])


SILICON = EXAMPLES / "h200x1-silicon-container"  # 3 runs a variant, H200 GPU-2185b559
RERUN = EXAMPLES / "h200x1-silicon-container-rerun"  # the same, rerun on GPU-5d5ef7b4


@pytest.mark.skipif(not RERUN.is_dir(), reason="the silicon rerun example is not here")
def test_no_interval_excluding_one_names_no_machine_ahead():
    """Two H200s, every ratio's interval holding 1: the headline said "A is 1.02x better than
    B" over a line that read "0 of 2 ratios with a confidence interval that excludes 1"."""
    _, ch = _choice([SILICON, RERUN], {0: "a", 1: "b"})
    assert not any(x["sure"] for x in ch["lines"] if x["factor"])
    assert ch["sentence"].startswith("No measurable difference between b (1x H200) and a (1x H200)")
    assert "none of the 2 ratios has a confidence interval that excludes 1" in ch["sentence"]
    assert not DIRECTION.search(ch["sentence"])


ALLREDUCE_F = EXAMPLES / "h200x2-allreduce-container"  # 2x H200, machine F, 2026-11-29
ALLREDUCE_I = EXAMPLES / "h200x2-allreduce-container-machine-i"  # another 2x H200, 2026-11-30


@pytest.mark.skipif(not ALLREDUCE_I.is_dir(), reason="the machine-I all-reduce example is not here")
def test_one_ratio_holding_one_is_worded_as_one():
    """One workload, its interval holding 1: the sentence read "none of the 1 ratio has"."""
    data, ch = _choice([ALLREDUCE_F, ALLREDUCE_I], {0: "f", 1: "i"})
    assert ch["sentence"].startswith("No measurable difference between i (2x H200 NV18) and f")
    assert "the ratio's confidence interval holds 1" in ch["sentence"]
    # the variant it speaks for (no-p2p's row below it may read otherwise: the H100 pair's did)
    assert " on allreduce (p2p): " in ch["sentence"]
    assert "none of the 1" not in ch["sentence"]
    # the kit files differ between the two (another kit made each): the machines say which kit
    assert [m["kit"] for m in data["machines"]] == [
        "kit 0.1.0, commit dc9b8dc0667f",
        "kit 0.1.0, commit 71161db83365",
    ]


def test_a_tiny_spread_is_never_in_e_notation():
    """The report review, 12: kit.stats said "under 0.01%" where the compare page's own copy of
    the rule printed "2e-05%"; both now come from kit.stats.percent."""
    assert _times(1.0000002) == "under 0.01%"
    assert _times(1.0033) == "0.33%"
    assert _times(1.08) == "1.08x"
