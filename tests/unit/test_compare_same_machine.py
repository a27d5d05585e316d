"""Issue 48: two bundles of one machine (the same GPU UUIDs in hardware.json, as the committed
GPT-2 container and host bundles of 2026-11-28) are said to be the same machine, not two."""

from __future__ import annotations

import re

import pytest

from kit.report.compare import comparison, load_machines, render_html
from tests.conftest import ROOT

EXAMPLES = ROOT / "reports" / "examples"
BOX = EXAMPLES / "h200x2-gpt2-ddp-container"
HOST = EXAMPLES / "h200x2-gpt2-ddp-host-20261128"  # the same two H200s, on the host
LAB = EXAMPLES / "h200x2-gpt2-ddp"  # two other H200s

pytestmark = pytest.mark.skipif(
    not all(p.is_dir() for p in (BOX, HOST, LAB)), reason="the GPT-2 examples are not here"
)


def _page(data) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", render_html(data, [])))


def test_one_machine_compared_with_itself_is_said_to_be_the_same_machine():
    machines = load_machines([BOX, HOST])
    assert {g.uuid for g in machines[0].hardware.gpus} == {
        g.uuid for g in machines[1].hardware.gpus
    }
    data = comparison(machines, 0)
    assert [m["label"] for m in data["machines"]] == [
        "2x H200 NV18, bundle 1",
        "2x H200 NV18, bundle 2",
    ]
    same = [w["text"] for w in data["warnings"] if w["level"] == "same"]
    assert same == [
        "2x H200 NV18, bundle 1 and 2x H200 NV18, bundle 2 are the same machine (the same GPU "
        "UUIDs in hardware.json): what differs between them is the runs (software, settings, the "
        "day), not the hardware."
    ]
    ch = data["choice"]["machines"][0]
    assert ch["same_machine"] and ch["sentence"].startswith("The same machine (the same GPU UUIDs)")
    env = next(w["text"] for w in data["warnings"] if w["level"] == "env")
    assert env.endswith("These results compare software on the same machine.")
    page = _page(data)
    assert "The same machine, two bundles: 2x H200 NV18, bundle 2 against" in page
    assert "are the same machine (the same GPU UUIDs in hardware.json)" in page
    assert "[1]" not in page and "[2]" not in page


def test_two_machines_of_one_model_are_still_two():
    data = comparison(load_machines([LAB, BOX]), 0)
    assert [m["label"] for m in data["machines"]] == ["2x H200 NV18 [1]", "2x H200 NV18 [2]"]
    assert not [w for w in data["warnings"] if w["level"] == "same"]
    assert not data["choice"]["machines"][0]["same_machine"]
    assert "same machine" not in _page(data)
