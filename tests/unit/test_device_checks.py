"""The device harness's comparison scripts, on committed bundles and shipped nccl-tests runs.

collectives_check.py (scripts/device/) and the Llama container study's instruments (in its
measurement folders: runtime_ratio.py, place_table.py, ...) judge what a device call brings back; here they read
real recorded data (the 2x H200 all-reduce example with the nccl-tests runs of its session, and
the interleaved H100 container rounds), so a change that breaks their reading fails on the CPU.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT

# the Llama container study's instruments, in the measurement folders whose results they made
ROUNDS_TOOLS = ROOT / "reports/measurements/2026-11-24-h100x1-llama-container-rounds"
VARIANTS_TOOLS = ROOT / "reports/measurements/2026-11-24-llama-container-variants"


def _load(name: str, folder: Path = ROOT / "scripts/device"):
    spec = importlib.util.spec_from_file_location(name, folder / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


cc = _load("collectives_check")
ROUNDS = ROOT / "reports/measurements/2026-11-24-h100x1-llama-container-rounds/bundles"


def test_each_collective_is_judged_on_the_column_its_spec_names() -> None:
    assert cc.program_and_column("allreduce") == ("all_reduce_perf", "in-place")
    assert cc.program_and_column("all_gather") == ("all_gather_perf", "out-of-place")
    assert cc.program_and_column("reduce_scatter") == ("reduce_scatter_perf", "out-of-place")
    assert cc.program_and_column("alltoall") == ("alltoall_perf", "out-of-place")


def test_collectives_check_judges_the_in_place_column(tmp_path: Path) -> None:
    refs = tmp_path / "refs"
    refs.mkdir()
    for variant in ("p2p", "no-p2p"):
        shutil.copy(
            ROOT / f"kit/refs/nccl_tests/nccl-tests-{variant}-2gpu-h200.txt",
            refs / f"all_reduce_perf-{variant}.txt",
        )
    text, summary = cc.compare(ROOT / "reports/examples/h200x2-allreduce", refs)
    assert (
        "allreduce, p2p (nccl-tests all_reduce_perf, in-place column, 1 run(s), -w 5 -n 20" in text
    )
    # the 1 MiB row: kit 26.6 us, nccl-tests in place 14.77 us / 71.00 GB/s (no latency: the
    # example predates it; no spin-held trial to drop)
    assert "| 1 MiB | 26.6 | 14.8 | 39.35 | 71.00 | 0.554 | - | 0 |" in text
    # the committed example's 1 MiB reading (39.35 GB/s) against nccl-tests' in-place 71.00
    assert summary["allreduce/p2p"]["lowest_at_bytes"] == 1 << 20
    assert round(summary["allreduce/p2p"]["lowest_ratio"], 3) == 0.554
    assert summary["allreduce/p2p"]["pass"] is False
    assert summary["allreduce/p2p"]["headline_at_peak"] is True
    # the collectives the bundle did not run are named, not judged
    assert "all_gather, p2p: not compared (no kit run)" in text
    assert set(summary) == {"allreduce/p2p", "allreduce/no-p2p"}


def _tool(script: Path, bundles: list[Path], out: Path):
    """A measurement's table tool run over `bundles` into `out`: (its process, the file)."""
    proc = subprocess.run(
        [sys.executable, str(script), *map(str, bundles), "--out", str(out)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return proc, out.read_text()


def test_runtime_ratio_pairs_rounds_in_the_order_they_ran(tmp_path: Path) -> None:
    bundles = sorted(ROUNDS.iterdir(), reverse=True)  # any order on the command line
    out = tmp_path / "ratio.md"
    proc, text = _tool(ROUNDS_TOOLS / "runtime_ratio.py", bundles, out)
    assert text.strip() in proc.stdout  # the file holds what was printed
    assert "Bundles: 6 docker, 6 host" in text
    # the first container round ran first: 6709.4 tokens/s, then the host's 6542.0
    assert "| 6709.4, 6582.3, 6521.8, 6390.4, 6532.0, 6787.1 |" in text
    assert "| 6542.0, 6715.3, 6724.2, 6638.0, 6737.5, 6777.2 |" in text
    assert "throughput_window (tokens/s)" in text
    assert "0.975x" in text
    assert "P2P effect" not in text  # one variant: nothing to pair


PLACES = ROOT / "reports/measurements/2026-11-24-h100x1-llama-container-places/bundles"


def test_place_table_reads_each_run_and_groups_by_place(tmp_path: Path) -> None:
    bundles = sorted(PLACES.iterdir(), reverse=True)
    out = tmp_path / "places.md"
    proc, text = _tool(VARIANTS_TOOLS / "place_table.py", bundles, out)
    assert text.strip() in proc.stdout
    rows = [line.split(" | ") for line in text.splitlines() if line.startswith("| call")]
    assert [r[0].strip("| ") for r in rows] == sorted(b.name for b in bundles)  # in the order run
    for name, row in zip(sorted(b.name for b in bundles), rows, strict=True):
        result = json.loads((PLACES / name / "results.json").read_text())["runs"][0]
        assert row[1] == name.rsplit("-", 1)[-1]  # the place from the folder name
        assert row[3] == f"{result['metrics']['throughput_window']['value']:.0f}"
        steps = sorted(result["data"]["step_times_s"][result["data"]["warmup_steps"] :])
        assert row[7] == f"{steps[-1]:.3f}"  # the slowest step after warm-up
    summary = {line.split(" | ")[0].strip("| "): line for line in text.splitlines()[-8:]}
    assert summary["host"].endswith("| - |")  # the baseline is not compared with itself
    assert "| docker | 9 |" in summary["docker"] and "(BCa) |" in summary["docker"]


DEVICE_COPY = {"PATH": "/usr/bin", "KIT_DEVICE_COPY": "1"}


def _device_copy(tmp_path: Path, name: str, source: str) -> tuple[list[str], Path]:
    """A scratch tree holding the device script `name` and a copy of the kit file it edits;
    checks that the script refuses outside a device copy. (the command, the copied file)"""
    copy = tmp_path / "tree"
    tools = copy / VARIANTS_TOOLS.relative_to(ROOT)
    tools.mkdir(parents=True)
    for script in (name, "device_copy.py"):
        shutil.copy(VARIANTS_TOOLS / script, tools)
    target = copy / source
    target.parent.mkdir(parents=True)
    shutil.copy(ROOT / source, target)
    command = [sys.executable, str(tools / name)]
    refused = subprocess.run(command, capture_output=True, text=True, env={"PATH": "/usr/bin"})
    assert refused.returncode == 2 and "device call's copy" in refused.stderr
    return command, target


def test_container_variants_edit_only_a_device_copy(tmp_path: Path) -> None:
    script, target = _device_copy(
        tmp_path, "container_variants.py", "kit/runtime/containers/docker.py"
    )
    subprocess.run(script, check=True, capture_output=True, env=DEVICE_COPY)
    edited = target.read_text()
    for switch in (
        "POLL_S",
        "TORCH",
        "STACK",
        "PRIV",
        "NET",
        "INIT",
        "HOSTFS",
        "ENV",
        "CGNS",
        "TMPFS",
    ):
        assert f"KIT_EXP_{switch}" in edited
    compile(edited, str(target), "exec")
    again = subprocess.run(script, check=True, capture_output=True, text=True, env=DEVICE_COPY)
    assert "already in" in again.stdout and target.read_text() == edited

    # the switches change what the container gets: the edited module's own options, per switch
    spec = importlib.util.spec_from_file_location("kit_exp_docker", target)
    exp = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(exp)
    box = exp.DockerContainer("img", client=object(), memlock=False)

    def opts(**switches: str) -> dict:
        with pytest.MonkeyPatch.context() as mp:
            for k, v in switches.items():
                mp.setenv(f"KIT_EXP_{k}", v)
            return box.options(["true"], {"A": "1"}, tmp_path, None, "cpu")

    plain = opts()
    assert plain["network_mode"] == "none" and plain["init"] and "tmpfs" in plain
    assert "cgroupns" not in plain and "privileged" not in plain
    most = opts(STACK="1", PRIV="1", NET="host", INIT="0", HOSTFS="1", ENV="1", CGNS="host",
                TMPFS="0")  # fmt: skip
    assert most["network_mode"] == "host" and not most["init"] and most["privileged"]
    assert most["cgroupns"] == "host" and "tmpfs" not in most
    assert not [u for u in most["ulimits"] if u["Name"] == "stack"]
    assert {"/usr/lib", "/usr/bin", "/opt/torch"} <= set(most["volumes"])
    assert most["environment"]["A"] == "1" and most["environment"]["KIT_EXP_CGNS"] == "host"


def test_step_stats_edit_only_a_device_copy_and_the_table_reads_them(tmp_path: Path) -> None:
    script, target = _device_copy(tmp_path, "step_stats.py", "kit/worker/training.py")
    subprocess.run(script, check=True, capture_output=True, env=DEVICE_COPY)  # the lines found
    edited = target.read_text()
    assert edited.count("_xs.") == 3
    compile(edited, str(target), "exec")
    module = target.parent / "exp_step_stats.py"
    compile(module.read_text(), str(module), "exec")
    assert "PROFILE = (-1, -1)" in module.read_text()  # no trace unless asked: it slows steps
    traced = tmp_path / "traced"
    shutil.copytree(tmp_path / "tree", traced)
    shutil.copy(ROOT / "kit/worker/training.py", traced / "kit/worker/training.py")
    subprocess.run(
        [sys.executable, str(traced / VARIANTS_TOOLS.relative_to(ROOT) / "step_stats.py")],
        check=True, capture_output=True, env={**DEVICE_COPY, "PROFILE": "1"},
    )  # fmt: skip
    assert "PROFILE = (20, 25)" in (traced / "kit/worker/exp_step_stats.py").read_text()

    # the table, on bundles a device call made with these statistics (call 5 of the gc folder)
    folder = ROOT / "reports/measurements/2026-11-24-h100x1-llama-container-gc/calls"
    shutil.unpack_archive(folder / "call5-bundles.tar.xz", tmp_path / "call5")
    bundles = sorted((tmp_path / "call5").iterdir())
    table = subprocess.run(
        [sys.executable, str(VARIANTS_TOOLS / "step_stats_table.py"), *map(str, bundles)],
        check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    assert table == (folder / "call5-steps.md").read_text()  # what the folder shows
    rows = [ln for ln in table.splitlines() if ln.startswith("| 0")]
    assert [r.split(" | ")[0] for r in rows] == [f"| {b.name}" for b in bundles]


def test_rounds_places_use_switches_the_variants_script_defines() -> None:
    """Every KIT_EXP_ switch container_rounds.sh sets (dall, dsw, dsetup combine several) is one
    container_variants.py writes into the copy: a misspelt switch would run the plain container
    under another place's name."""
    rounds = (VARIANTS_TOOLS / "container_rounds.sh").read_text()
    variants = (VARIANTS_TOOLS / "container_variants.py").read_text()
    used = set(re.findall(r"KIT_EXP_[A-Z_]+", rounds))
    assert {"KIT_EXP_STACK", "KIT_EXP_HOSTFS", "KIT_EXP_ENV"} <= used
    for switch in used:
        assert f'"{switch}' in variants or f"{switch}=" in variants, switch
    for place in ("dall", "dsw", "dsetup", "dcgns", "dtmp", "dmost"):
        assert f"    {place}) one {place} docker env KIT_EXP_" in rounds


def _calls_table(calls: list[Path], out: Path, *args: str) -> str:
    """calls_table.py (the variants study's) over CALLS, written to OUT; its text."""
    subprocess.run(
        [sys.executable, str(VARIANTS_TOOLS / "calls_table.py"), *map(str, calls),
         "--out", str(out), *args],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    return out.read_text()


def test_calls_table_reproduces_the_committed_pooled_ratio(tmp_path: Path) -> None:
    """The container against the host over every call of the two folders: the committed
    calls.md comes out again from the committed archives (per call, and pooled)."""
    gc_calls = ROOT / "reports/measurements/2026-11-24-h100x1-llama-container-gc/calls"
    folder = ROOT / "reports/measurements/2026-11-24-llama-container-variants"
    calls = [gc_calls / f"call{n}-bundles.tar.xz" for n in range(2, 7)]
    calls += [folder / f"calls/call{n}-bundles.tar.xz" for n in range(1, 7)]
    text = _calls_table(calls, tmp_path / "calls.md")
    assert text == (folder / "calls.md").read_text()
    assert (
        "| 2026-11-24-h100x1-llama-container-gc/call5 | - | 6889, 6866 | - (not both places) |"
        in text
    )
    assert "9 of 9 calls read below the host" in text
    assert "The main thread's CPU per ordinary step, docker less host: higher in 9 of 9" in text


def test_equal_pages_tables_come_out_of_the_committed_bundles(tmp_path: Path) -> None:
    """The equal-page-cache folder: every call's step table, calls.md and calls-dmost.md come
    out again from its archives, no run mapped text on 2 MiB pages, and the pooled ratio is
    0.999x."""
    folder = ROOT / "reports/measurements/2026-11-24-llama-container-equal-pages"
    calls = [folder / f"calls/call{n}-bundles.tar.xz" for n in range(1, 7)]
    call_bundles = _load("calls_table", VARIANTS_TOOLS).call_bundles
    for call in calls:
        steps = subprocess.run(
            [sys.executable, str(VARIANTS_TOOLS / "step_stats_table.py"),
             *map(str, call_bundles(call, tmp_path))],
            check=True, capture_output=True, text=True,
        ).stdout  # fmt: skip
        name = call.name.split("-bundles")[0]
        assert steps == (folder / f"calls/{name}-steps.md").read_text()
        rows = [ln for ln in steps.splitlines() if re.match(r"\| \d\d-", ln)]
        assert rows and all(ln.rstrip(" |").endswith("| 0") for ln in rows)
    text = _calls_table(calls, tmp_path / "calls.md")
    assert text == (folder / "calls.md").read_text()
    assert "0.999x [0.960, 1.024]" in text
    assert "3 of 5 calls read below the host" in text
    dmost = _calls_table(calls[2:4], tmp_path / "calls-dmost.md", "--place", "dmost")
    assert dmost == (folder / "calls-dmost.md").read_text()


def test_a_cut_recipe_does_not_keep_the_whole_recipe_s_verified_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The report review, 8: `GPUS=4 cut_recipe.py recipes/fsdp_llama.yaml ...` wrote `gpus: 4`
    beside the 2-GPU recipe's `verified_on`, which the report then printed."""
    cut = _load("cut_recipe")
    recipe = ROOT / "recipes" / "fsdp_llama.yaml"
    assert "verified_on" in yaml.safe_load(recipe.read_text())
    monkeypatch.setenv("GPUS", "4")
    out = tmp_path / "cut.yaml"
    name = yaml.safe_load(recipe.read_text())["benchmarks"][0]["name"]
    assert cut.main(str(recipe), name, str(out)) == 0
    data = yaml.safe_load(out.read_text())
    assert data["gpus"] == 4 and "verified_on" not in data
