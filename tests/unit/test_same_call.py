"""The same-call comparison's reading of nccl-tests output: header counts, the NCCL call each
program makes, which stored files belong to a program and variant, which mode a size compares
in. Inputs are the real nccl-tests runs shipped in kit/refs/nccl_tests (copies edited where a
case needs another header)."""

from __future__ import annotations

from kit.refs.nccl_tests import parse
from kit.report.analysis.same_call import mode_of, runs_of
from tests.conftest import ROOT

TEXT = (ROOT / "kit/refs/nccl_tests/nccl-tests-p2p-2gpu-h200.txt").read_text()


def test_the_header_gives_counts_mode_library_and_each_size_checked():
    run = parse(TEXT)
    assert (run.warmup, run.iters, run.graph, run.nccl_library) == (5, 20, 0, 22809)
    assert run.mode == "eager" and run.nccl_call == "ncclAllReduce"
    assert set(run.wrong) == set(run.sizes) and not any(run.wrong.values())
    graph = parse(TEXT.replace("graph: 0", "graph: 1"))
    assert graph.mode == "cuda-graph"
    unchecked = parse(TEXT.replace("       0\n", "     N/A\n"))  # the in-place column, -c 0
    assert set(unchecked.wrong_in_place.values()) == {None}


def test_alltoall_perf_calls_ncclalltoall_from_nccl_2_28():
    a2a = TEXT.replace("all_reduce_perf", "alltoall_perf")
    assert parse(a2a).nccl_call == "ncclAlltoAll"
    older = a2a.replace("nccl-library=22809", "nccl-library=22703")
    assert parse(older).nccl_call == "ncclSend/ncclRecv group"


def test_runs_of_takes_the_program_and_variant_and_skips_what_does_not_parse():
    texts = {
        "all_reduce_perf-p2p-1.txt": TEXT,
        "all_reduce_perf-p2p-2.txt": "no rows here\n",  # planted: skipped, not a crash
        "all_reduce_perf-no-p2p-1.txt": TEXT,  # another variant
        "all_gather_perf-p2p-1.txt": TEXT,  # named for a program its content is not
    }
    assert [r.name for r in runs_of(texts, "all_reduce_perf", "p2p")] == [
        "all_reduce_perf-p2p-1.txt"
    ]
    assert runs_of(texts, "all_gather_perf", "p2p") == []


def test_a_size_compares_only_in_its_own_timing_mode():
    assert mode_of(["spin-held"]) == "eager" and mode_of(["host-clock"]) == "eager"
    assert mode_of(["cuda-graph"]) == "cuda-graph"
    assert mode_of(["cuda-events", "cuda-graph"]) == "mixed"


def test_an_interrupted_add_leaves_the_bundle_as_it_was(tmp_path, monkeypatch):
    import shutil

    import pytest

    from kit.bundle import verify_manifest
    from kit.refs import same_call

    bundle = tmp_path / "bundle"
    shutil.copytree(ROOT / "tests/fixtures/bundles/cpu-smoke", bundle)
    given = tmp_path / "all_reduce_perf-p2p-r1.txt"
    given.write_text(TEXT)

    def interrupted(root, names):
        raise KeyboardInterrupt

    monkeypatch.setattr(same_call, "add_to_manifest", interrupted)
    with pytest.raises(KeyboardInterrupt):
        same_call.add(bundle, [given])
    assert not (bundle / "nccl-tests").exists()
    assert verify_manifest(bundle).ok


def test_busbw_above_nccl_tests_names_the_sizes_and_the_timing_that_explains_it():
    """The report review, 7: the kit read 1.10x nccl-tests at 1 MiB on 4 GPUs, printed without a
    reason. A spin-held size above SAME_CALL_ABOVE x nccl-tests' without -G is named with it."""
    from kit.refs.nccl_tests import SAME_CALL_ABOVE
    from kit.report.analysis.same_call import SameCall

    sc = SameCall("p2p", "all_reduce_perf", "out-of-place", ["a.txt"], "spin-held")
    assert "above" not in sc.verdict and sc.verdict.startswith("busbw at least 0.97x")
    sc.above = [(1 << 20, 1.10), (2 << 20, 1.14)]
    assert SAME_CALL_ABOVE < 1.10
    words = sc.verdict
    assert words.startswith("busbw at least 0.97x nccl-tests' at every size from 1 MiB")
    assert "busbw above nccl-tests' at 1 MiB (1.10x), 2 MiB (1.14x): the kit queues" in words
    assert "nccl-tests without -G launches each call as it goes" in words


def test_the_sentence_starts_at_the_first_size_it_compared():
    """A reader of the H100 pair's report: "at every compared size from 1 MiB" above a table
    that starts at 2 MiB (1 MiB was timed by CUDA-graph replay, which no nccl-tests run
    matched). The sentence names the first size at or above 1 MiB that was compared."""
    from kit.report.analysis.same_call import SameCall

    sc = SameCall("no-p2p", "all_reduce_perf", "in-place", ["a.txt"], "spin-held")
    sc.skipped = "18 sizes timed by CUDA-graph replay not compared: no nccl-tests run used -G"
    sc.rows = [{"size": s} for s in (512 << 10, 2 << 20, 4 << 20)]
    assert sc.verdict.startswith(
        "busbw at least 0.97x nccl-tests' at every compared size from 2 MiB"
    )
