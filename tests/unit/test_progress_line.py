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
        ("allreduce", "busbw_largest", 0.001077, "GB/s", "busbw_largest 0.001077 GB/s"),
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
