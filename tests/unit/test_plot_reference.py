"""Page 1's chart against the same-model reference: each bar in its verdict's colour, a legend,
the variant in its label (the report review, 11: a bar at 0.94x, above the 0.90 threshold, was
drawn in the failure colour with no legend and no variant)."""

from __future__ import annotations

from kit.report.plot_reference import COLOURS, UNDECIDED_COLOUR, against_reference, reference_rows


def entry(measured: float, low: float, high: float, verdict: str) -> dict:
    return {
        "comparable": True, "measured": measured, "value": 100.0, "low": low, "high": high,
        "n": 3, "tolerance": 0.10, "label": "throughput", "variant": "p2p", "verdict": verdict,
    }  # fmt: skip


def test_each_bar_has_its_verdict_s_colour_a_legend_and_its_variant():
    rows = reference_rows(
        {
            "gpt2": [entry(94.0, 85.0, 99.0, "UNDECIDED")],
            "llama": [entry(97.0, 95.0, 99.0, "PASS")],
            "resnet": [entry(70.0, 65.0, 75.0, "FAIL")],
        }
    )
    assert [r["label"] for r in rows] == [
        "gpt2 / p2p (throughput)", "llama / p2p (throughput)", "resnet / p2p (throughput)",
    ]  # fmt: skip
    svg = against_reference(rows, "t")
    assert svg is not None
    low = svg.lower()
    for colour in (UNDECIDED_COLOUR, COLOURS["PASS"], COLOURS["FAIL"]):
        assert colour.lower() in low
    for word in ("UNDECIDED", "PASS", "FAIL"):
        assert word in svg  # the legend (text kept as text in the SVG)
