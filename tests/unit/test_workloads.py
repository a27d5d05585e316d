"""The workload registry: every kind is one folder with a spec everything else reads, and no
code outside kit/workloads names a kind."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import re

import pytest

from kit.recipe import load_recipe
from kit.report.kinds import KINDS as FIGURE_KINDS
from kit.shared import metrics as catalog
from kit.workloads import registry
from kit.workloads.base import SpecError, WorkloadSpec
from tests.conftest import ROOT

KIT = ROOT / "kit"
COLLECTIVES = {"allreduce", "all_gather", "reduce_scatter", "alltoall"}


def test_a_folder_registers_its_workload(tmp_path):
    """No list names the kinds: a folder with a spec.py is one; a folder without is not."""
    for name, files in (("new_kind", ("params.py", "worker.py", "spec.py")), ("notes", ())):
        (tmp_path / name).mkdir()
        for f in files:
            (tmp_path / name / f).write_text("")
    assert registry.discover(tmp_path) == ("new_kind",)
    folders = [p for p in (KIT / "workloads").iterdir() if p.is_dir() and p.name != "__pycache__"]
    assert sorted(p.name for p in folders) == list(registry.KINDS)


def test_every_kind_is_a_folder_with_params_worker_and_spec():
    for kind in registry.KINDS:
        folder = KIT / "workloads" / kind
        assert {"params.py", "worker.py", "spec.py"} <= {p.name for p in folder.iterdir()}
        spec = registry.spec(kind)
        assert isinstance(spec, WorkloadSpec) and spec.kind == kind
        assert spec.worker == f"kit.workloads.{kind}.worker"
        assert dataclasses.is_dataclass(spec.params) and spec.params().__class__ is spec.params
        assert spec.figures in FIGURE_KINDS, f"{kind}: no figure kind {spec.figures!r}"
        assert spec.metric(spec.headline) is not None, f"{kind}: headline has no metric entry"
        assert all(spec.metric(m) for m in spec.secondary)
        with pytest.raises(dataclasses.FrozenInstanceError):
            spec.label = "x"  # type: ignore[misc]


def test_one_headline_per_kind():
    """Every sweep is judged by its busbw at the largest size, every training run by its
    throughput: read from the registry, so a new kind is covered without naming it here."""
    sweeps = [k for k in registry.KINDS if registry.spec(k).sweep is not None]
    training = [k for k in registry.KINDS if registry.spec(k).figures == "training"]
    assert set(sweeps) >= COLLECTIVES and {"gpt2_ddp", "llama_lora_fsdp"} <= set(training)
    for kind in sweeps:
        assert registry.headline_metric(kind) == "busbw_largest"
    for kind in training:
        assert registry.headline_metric(kind) == "throughput"
    # a kind this kit does not know (a bundle from another kit) still has an answer
    assert registry.spec("nope") is None and registry.headline_metric("nope") == "throughput"
    assert registry.label("nope") == "nope"
    assert catalog.label("some_thing") == "some thing"
    assert catalog.label("mfu") == "model FLOPs utilisation"


def test_a_training_params_class_must_hold_what_the_loop_reads():
    from kit.workloads.training_spec import LOOP_FIELDS, training_spec

    for kind in registry.KINDS:
        spec = registry.spec(kind)
        if spec.figures == "training":
            assert set(LOOP_FIELDS) <= {f.name for f in dataclasses.fields(spec.params)}, kind

    @dataclasses.dataclass
    class Lacking:
        seed: int = 0
        steps: int = 3

    match = "Lacking lacks warmup_steps, min_window_s, data_batches, which the"
    with pytest.raises(SpecError, match=match):
        training_spec("toy", "Toy", "a toy", Lacking, ())


def test_a_metric_name_the_catalog_lacks_is_named():
    from kit.workloads.base import metrics

    with pytest.raises(ValueError, match="no metric named 'througput' in the catalog"):
        metrics("throughput", "througput")


@pytest.mark.parametrize("kind", ["gpt2_ddp", "llama_lora_fsdp", "resnet_ddp"])
def test_the_window_check_is_shared(kind):
    with pytest.raises(ValueError, match="min_window_s: must be between 0 and 3600 seconds"):
        registry.spec(kind).params(min_window_s=-1)


def test_the_collectives_recipe_runs_all_four():
    recipe = load_recipe(ROOT / "recipes" / "collectives.yaml")
    assert {b.kind for b in recipe.benchmarks} == COLLECTIVES
    assert [v if isinstance(v, str) else v.name for v in recipe.variants] == ["p2p", "no-p2p"]


def _worker(kind: str):
    return importlib.import_module(f"kit.workloads.{kind}.worker")  # imports torch


@pytest.mark.parametrize(
    ("kind", "factor_at_4"), [("allreduce", 1.5), ("all_gather", 0.75),
                              ("reduce_scatter", 0.75), ("alltoall", 0.75)]
)  # fmt: skip
def test_bus_factors_are_nccl_tests(kind, factor_at_4):
    c = _worker(kind).COLLECTIVE
    assert c.bus_factor(4) == pytest.approx(factor_at_4)
    assert c.bus_factor(1) == 0


def test_size_conventions_are_nccl_tests():
    # all_reduce: the buffer; all_gather: the gathered output (size/n sent per rank);
    # reduce_scatter: each rank's input (size/n out); alltoall: what each rank sends in all
    assert _worker("allreduce").COLLECTIVE.layout(1024, 4, 4) == (256, 1024)
    for kind in ("all_gather", "reduce_scatter", "alltoall"):
        layout = _worker(kind).COLLECTIVE.layout
        assert layout(1024, 4, 4) == (64, 1024), kind
        assert layout(1000, 4, 3) == (83, 996), kind  # whole elements per rank
        assert layout(8, 4, 4) == (1, 16), kind  # at least one element each


def test_the_buffers_hold_the_size_nccl_tests_prints():
    """The size printed is the buffer nccl-tests names: all-reduce's buffer, all-gather's
    output, reduce-scatter's and all-to-all's input; the other side is size/n or the same."""
    for kind, side in (("allreduce", 0), ("all_gather", 1), ("reduce_scatter", 0), ("alltoall", 0)):
        c = _worker(kind).COLLECTIVE
        chunk, size = c.layout(1000, 4, 3)
        assert c.counts(chunk, 3)[side] * 4 == size, kind


def _str_constants(tree: ast.AST) -> list[tuple[int, str]]:
    return [
        (n.lineno, n.value)
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str)
    ]


def test_no_module_outside_the_workloads_names_a_kind():
    kinds = set(registry.KINDS)
    offenders = []
    for path in sorted(KIT.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith("kit/workloads/"):
            continue
        tree = ast.parse(path.read_text(), rel)
        offenders += [f"{rel}:{line}: {s!r}" for line, s in _str_constants(tree) if s in kinds]
        for node in ast.walk(tree):
            if isinstance(node, ast.Compare):
                text = ast.unparse(node)
                if re.search(r"\bkind\b", text) and any(
                    isinstance(c, ast.Constant) and c.value in kinds
                    for c in [node.left, *node.comparators]
                ):
                    offenders.append(f"{rel}:{node.lineno}: {text}")
    quoted = re.compile(r"[\"'](" + "|".join(map(re.escape, kinds)) + r")[\"']")
    for path in sorted((KIT / "report" / "templates").glob("*.j2")):
        for i, line in enumerate(path.read_text().splitlines(), 1):
            if quoted.search(line) or re.search(r"\.kind\s*[!=]=", line):
                offenders.append(f"{path.relative_to(ROOT)}:{i}: {line.strip()}")
    assert offenders == [], "kind names outside kit/workloads:\n" + "\n".join(offenders)


def test_the_shared_check_counts_what_the_call_got_wrong(tmp_path):
    """Each collective's #wrong check through the one Collective.wrong, on a one-rank gloo group
    in this process: the real call gets 0; a call that corrupts one element of its output, 1."""
    import dataclasses

    import torch
    import torch.distributed as dist

    from kit.worker.common import Context

    dist.init_process_group(
        "gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1
    )
    try:
        ctx = Context({}, tmp_path, 0, 0, 1, torch.device("cpu"), "gloo")
        for kind in sorted(COLLECTIVES):
            c = _worker(kind).COLLECTIVE

            def corrupt(out, inp, call=c.call):
                call(out, inp)
                out[0] += 1

            assert c.wrong(ctx, 10, torch.float32) == 0, kind
            assert dataclasses.replace(c, call=corrupt).wrong(ctx, 10, torch.float32) == 1, kind
            op, refill = c.prepare(ctx, 10, torch.float32)
            op(), refill()  # the buffers the sweep times, allocated once
            assert c.placement == ("in-place" if c.in_place else "out-of-place"), kind
            if c.also_in_place:  # all-gather, reduce-scatter: the in-place form, checked too
                assert c.wrong_in_place(ctx, 10, torch.float32) == 0, kind
                bad = dataclasses.replace(c, call=corrupt)
                assert bad.wrong_in_place(ctx, 10, torch.float32) == 1, kind
                op, refill = c.prepare_in_place(ctx, 10, torch.float32)
                op(), refill()
        assert {k for k in COLLECTIVES if _worker(k).COLLECTIVE.also_in_place} == {
            "all_gather",
            "reduce_scatter",
        }
        assert _worker("allreduce").COLLECTIVE.placement == "in-place"
    finally:
        dist.destroy_process_group()


def test_the_collectives_call_torchs_current_names_and_fall_back_on_an_older_torch(
    tmp_path, monkeypatch
):
    """Torch 2.13 kept all_gather_into_tensor and reduce_scatter_tensor as wrappers that warn at
    every call (host time inside the one-call latency, a FutureWarning in every run's log): the
    sweeps and the decode gather call the new names, and an older torch's where it lacks them."""
    import warnings

    import torch
    import torch.distributed as dist

    from kit.worker.common import Context, dist_call

    dist.init_process_group(
        "gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1
    )
    try:
        ctx = Context({}, tmp_path, 0, 0, 1, torch.device("cpu"), "gloo")
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a deprecated call fails here
            for kind in sorted(COLLECTIVES):
                c = _worker(kind).COLLECTIVE
                assert c.wrong(ctx, 10, torch.float32) == 0, kind
                if c.also_in_place:
                    assert c.wrong_in_place(ctx, 10, torch.float32) == 0, kind
                assert not c.api.endswith(("_into_tensor", "_scatter_tensor")), c.api
    finally:
        dist.destroy_process_group()
    assert dist_call("all_gather_single", "all_gather_into_tensor") is dist.all_gather_single
    monkeypatch.delattr(dist, "all_gather_single")
    assert dist_call("all_gather_single", "all_gather_into_tensor") is dist.all_gather_into_tensor
    decode = (KIT / "workloads" / "llm_decode" / "model.py").read_text()
    assert "dist.all_gather_into_tensor" not in decode and "dist_call(" in decode
