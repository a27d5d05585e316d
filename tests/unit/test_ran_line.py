"""The report's "what ran" line says what the workload ran, in the words its own spec gives
(WorkloadSpec.ran): the report knows no workload's parameter names."""

from __future__ import annotations

import ast

from kit.report import analysis
from kit.workloads import registry
from tests.conftest import ROOT, recipe_model, results_model


def test_a_run_in_fp32_is_said_to_be_fp32_whatever_was_asked():
    recipe = recipe_model(benchmarks=[{"kind": "resnet_ddp", "params": {"precision": "bf16"}}])
    results = results_model(
        [{"benchmark": "resnet_ddp", "kind": "resnet_ddp", "world_size": 1, "device": "cpu",
          "data": {"params": {"precision": "bf16", "arch": "resnet18"}, "precision": "fp32"}}],
    )  # fmt: skip
    (bench,) = analysis.build_benchmarks(results, recipe)
    line = analysis.ran_line(bench)
    assert "fp32" in line and "bf16" not in line, line
    assert line.startswith("resnet18") and line.endswith("on 1 process")


def test_the_report_names_no_workload_parameter():
    """No string of the summary is a workload's parameter name: the spec's phrases say them."""
    names = {f for k in registry.KINDS for f in registry.spec(k).params.__dataclass_fields__}
    said = set()
    for name in ("summary.py", "ran.py"):
        path = ROOT / "kit" / "report" / "analysis" / name
        tree = ast.parse(path.read_text())
        keys = {id(n.slice) for n in ast.walk(tree) if isinstance(n, ast.Subscript)}
        said |= {
            (path.relative_to(ROOT).as_posix(), node.value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and node.value in names and id(node) not in keys
        }  # a key of a recorded fact's dict (b0["dtype"]: the peak's basis) is no parameter
    assert not said, said
