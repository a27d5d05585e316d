"""The progress line's headline figure reads as a person writes it (the report review: the console
printed "1.342e+04 tokens/s")."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from kit.run.engine import _headline


@pytest.mark.parametrize(
    ("kind", "metric", "value", "unit", "line"),
    [
        ("fsdp_llama", "throughput", 13420.4, "tokens/s", "throughput 13,420 tokens/s"),
        ("allreduce", "busbw_largest", 329.52, "GB/s", "busbw_largest 329.5 GB/s"),
        # as the report's pages print it (one definition: kit.shared.metrics.figure)
        ("allreduce", "busbw_largest", 0.001077, "GB/s", "busbw_largest 0.00108 GB/s"),
        ("allreduce", "busbw_largest", 0.0000888, "GB/s", "busbw_largest 0.0000888 GB/s"),
    ],
)
def test_the_headline_figure_has_no_exponent(kind, metric, value, unit, line):
    run = SimpleNamespace(kind=kind, metrics={metric: SimpleNamespace(value=value, unit=unit)})
    assert _headline(run) == line  # type: ignore[arg-type]


def test_a_run_without_its_headline_metric_prints_none():
    assert _headline(SimpleNamespace(kind="allreduce", metrics={})) == ""  # type: ignore[arg-type]


def test_a_run_that_could_not_measure_its_headline_prints_the_first_it_recorded():
    """A matmul ceiling on the CPU records fp32 only (bf16 is its headline): the line printed
    no figure at all, where the report shows the first recorded metric."""
    fp32 = SimpleNamespace(value=0.157, unit="TFLOP/s")
    run = SimpleNamespace(kind="matmul_ceiling", metrics={"tflops_fp32": fp32})
    assert _headline(run) == "tflops_fp32 0.157 TFLOP/s"  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [13420.4, 329.52, 28.824, 0.028841, 0.001077, 0.0000888, -1e-9])
def test_the_terminal_and_the_pages_write_a_figure_alike(value):
    """One definition: a figure the console prints reads as the report prints it."""
    from kit.report.plots import fmt_num
    from kit.shared.metrics import figure

    assert figure(value) == fmt_num(value) and "e" not in figure(value)
