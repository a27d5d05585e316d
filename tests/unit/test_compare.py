"""The comparison's logic on bundles with known samples: medians, ratios, P2P effect, flags."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from pypdf import PdfReader

from kit.bundle import Bundle, write_manifest
from kit.io.errors import InputError, KitError
from kit.model import Hardware, RunResult
from kit.report.compare import (
    comparison,
    load_machines,
    p2p_effects,
    pick_baseline,
    warnings_for,
    workload_rows,
    write_comparison,
)
from kit.report.render import machine_line
from tests.conftest import ROOT, needs_pdf, run_kit

RECIPE = {"kit": 1, "name": "known", "description": "", "repeats": 5,
          "benchmarks": [{"kind": "allreduce", "name": "ar"}]}  # fmt: skip
A_P2P = [10.0, 10.5, 9.5, 10.2, 9.8]
A_OFF = [5.0, 5.5, 4.5, 5.2, 4.8]
B_P2P = [20.0, 21.0, 19.0, 20.5, 19.5]
B_OFF = [5.1, 5.4, 4.6, 5.0, 4.9]


def run(variant: str, repeat: int, busbw: float | None, time_us: float = 10.0) -> RunResult:
    """A run as the worker records it: its variant's env (P2P off for no-p2p) included."""
    return RunResult.model_validate(run_record(variant, repeat, busbw, time_us))


def run_record(variant: str, repeat: int, busbw: float | None, time_us: float = 10.0) -> dict:
    """The same run as results.json holds it."""
    env = {"NCCL_P2P_DISABLE": "1"} if variant == "no-p2p" else {}
    if busbw is None:
        return {"schema": 1, "run_id": f"ar.{variant}.r{repeat}", "benchmark": "ar",
                "kind": "allreduce", "device": "cuda", "world_size": 2,
                "variant": variant, "repeat": repeat, "status": "failed", "error": "x", "env": env,
                "metrics": {}, "data": {}}  # fmt: skip
    return {
        "schema": 1, "run_id": f"ar.{variant}.r{repeat}", "benchmark": "ar", "kind": "allreduce",
        "device": "cuda", "world_size": 2, "env": env,
        "variant": variant, "repeat": repeat, "status": "ok",
        "metrics": {
            "busbw_peak": {"value": busbw, "unit": "GB/s", "higher_is_better": True},
            "time_small_us": {"value": time_us, "unit": "us", "higher_is_better": False},
        },
        "data": {"sizes": [{"bytes": 8, "busbw_gbps": [busbw / 10], "time_us": [time_us], "wrong": 0},
                           {"bytes": 1024, "busbw_gbps": [busbw], "time_us": [time_us], "wrong": 0}]},
    }  # fmt: skip


def hardware(gpus: int, host: str = "box") -> dict:
    return {"host": {"hostname": host}, "driver": {"version": "580.95.05"},
            "gpus": [{"index": i, "name": "NVIDIA H200", "memory_total_gib": 139.8}
                     for i in range(gpus)],
            "topology": {"matrix": [["X" if i == j else "NV18" for j in range(gpus)]
                                    for i in range(gpus)]}}  # fmt: skip


def make_bundle(
    root: Path,
    name: str,
    p2p: list[float | None],
    off: list[float | None],
    host: str = "box",
    torch: str = "2.11.0+cu130",
    times: list[float] | None = None,
    smoke: bool = False,
) -> Path:
    bundle = Bundle.create(
        root / name,
        RECIPE,
        {
            "recipe": "known",
            "device": "cuda",
            "runtime": "host",
            "pinned": False,
            "smoke": smoke,
            "repeats": 5,
        },
    )
    times = times or [10.0] * len(p2p)
    for i, (a, b) in enumerate(zip(p2p, off, strict=True)):
        bundle.add_run(run("p2p", i, a, times[i]))
        bundle.add_run(run("no-p2p", i, b, times[i]))
    bundle.finish("complete")
    bundle.write_json("hardware.json", hardware(2, host))
    bundle.write_json("environment.json", {"name": "cuda13", "runtime": "host", "pinned": False,
                      "container": {"python": "3.11.7", "torch": torch, "nccl": "2.28.9"}})  # fmt: skip
    write_manifest(bundle.path)
    return bundle.path


@pytest.fixture
def two(tmp_path):
    a = make_bundle(tmp_path, "a", A_P2P, A_OFF, host="alpha", times=[10, 11, 9, 10.5, 9.5])
    b = make_bundle(tmp_path, "b", B_P2P, [*B_OFF[:4], None], host="beta",
                    times=[20, 21, 19, 20.5, 19.5])  # fmt: skip
    return a, b


def cell(rows, variant, metric, machine):
    row = next(r for r in rows if r.variant == variant and r.metric == metric)
    return row.cells[machine]


def test_medians_intervals_and_counts_per_machine(two):
    rows = workload_rows(load_machines(list(two)), 0)
    a = cell(rows, "p2p", "busbw_peak", 0)["summary"]
    assert (a["median"], a["n"]) == (10.0, 5)
    assert a["ci_low"] <= 10.0 <= a["ci_high"] and a["ci_low"] >= 9.5 and a["ci_high"] <= 10.5
    b_off = cell(rows, "no-p2p", "busbw_peak", 1)
    assert b_off["summary"]["n"] == 4 and b_off["failed"] == 1


def test_ratio_against_the_baseline_with_words_and_intervals(two):
    rows = workload_rows(load_machines(list(two)), 0)
    assert (
        cell(rows, "p2p", "busbw_peak", 0)["baseline"]
        and cell(rows, "p2p", "busbw_peak", 0)["ratio"] is None
    )
    faster = cell(rows, "p2p", "busbw_peak", 1)["ratio"]
    assert faster["estimate"] == pytest.approx(2.0) and faster["ci_low"] > 1
    assert faster["sentence"].startswith("2.00x faster (95% CI ")
    same = cell(rows, "no-p2p", "busbw_peak", 1)["ratio"]
    assert same["includes_one"] and same["sentence"].startswith(
        "no measurable difference (ratio 1.0"
    )
    slower = cell(rows, "p2p", "time_small_us", 1)["ratio"]  # lower is better: twice the time
    assert slower["estimate"] == pytest.approx(2.0) and slower["sentence"].startswith(
        "2.00x slower"
    )


def test_baseline_choice_flips_the_ratio(two):
    rows = workload_rows(load_machines(list(two)), 1)
    assert cell(rows, "p2p", "busbw_peak", 1)["baseline"]
    assert cell(rows, "p2p", "busbw_peak", 0)["ratio"]["sentence"].startswith("2.00x slower")


def test_p2p_effect_is_paired_per_machine(two):
    effects = {e["index"]: e for e in p2p_effects(load_machines(list(two)))}
    a = effects[1]
    assert a["pairs"] == 5 and a["ratio"]["paired"]
    per_pair = sorted(x / y for x, y in zip(A_P2P, A_OFF, strict=True))
    assert a["ratio"]["estimate"] == pytest.approx(per_pair[2])
    assert a["ratio"]["sentence"].startswith(f"{per_pair[2]:.2f}x faster")
    assert effects[2]["pairs"] == 4  # the failed no-p2p repeat has no pair


def test_pick_baseline(two):
    machines = load_machines(list(two))
    assert pick_baseline("2", machines) == 1
    assert pick_baseline(str(two[1]), machines) == 1
    assert pick_baseline(None, machines) == 0
    with pytest.raises(InputError, match=r"--baseline 3: allowed: 1 to 2"):
        pick_baseline("3", machines)
    with pytest.raises(InputError, match="not one of the compared bundles"):
        pick_baseline("/nowhere", machines)


def test_a_different_environment_is_flagged(tmp_path):
    a = make_bundle(tmp_path, "a", A_P2P, A_OFF)
    b = make_bundle(tmp_path, "b", B_P2P, B_OFF, torch="2.14.1+cu130")
    machines = load_machines([a, b])
    env = [w for w in warnings_for(machines, 0) if w["level"] == "env"]
    assert len(env) == 1 and "torch 2.14.1+cu130 vs 2.11.0+cu130" in env[0]["text"]
    same = make_bundle(tmp_path, "c", B_P2P, B_OFF)
    assert not [w for w in warnings_for(load_machines([a, same]), 0) if w["level"] == "env"]
    data = comparison(machines, 0)
    torch_row = next(r for r in data["environment"] if r["name"] == "torch")
    assert torch_row["differs"] == [False, True]


def test_a_different_recipe_is_flagged(tmp_path):
    a = make_bundle(tmp_path, "a", A_P2P, A_OFF)
    b = make_bundle(tmp_path, "b", B_P2P, B_OFF)
    shutil.copytree(b, tmp_path / "b2")
    (tmp_path / "b2" / "recipe.yaml").write_text(
        "kit: 1\nname: known\nrepeats: 9\nvariants: [p2p, no-p2p, {name: ib-off, env: "
        "{NCCL_IB_DISABLE: '1'}}]\nbenchmarks: [{kind: allreduce, name: ar}]\n"
    )  # another variant: the runs of b are still the recipe's (kit.model.consistency)
    write_manifest(tmp_path / "b2")
    warnings = warnings_for(load_machines([a, tmp_path / "b2"]), 0)
    # a variant more: only those both ran are compared, each the same measurement on both sides
    assert not [w for w in warnings if w["level"] == "recipe"]
    assert any("ran other variants (variants): only the variants both ran are compared" in
               w["text"] for w in warnings)  # fmt: skip
    assert any("differ in max_repeats, repeats" in w["text"] for w in warnings)
    # p2p defined otherwise there (another variable): its figures are not like for like
    (tmp_path / "b2" / "recipe.yaml").write_text(
        "kit: 1\nname: known\nrepeats: 9\nvariants: [{name: p2p, env: {NCCL_ALGO: Tree}}, "
        "no-p2p]\nbenchmarks: [{kind: allreduce, name: ar}]\n"
    )
    write_manifest(tmp_path / "b2")
    warnings = warnings_for(load_machines([a, tmp_path / "b2"]), 0)
    (recipe,) = [w["text"] for w in warnings if w["level"] == "recipe"]
    assert recipe.startswith("Different recipes:")
    assert "in the env.NCCL_ALGO of variant p2p;" in recipe
    assert "repeats" not in recipe  # more repeats: wider or narrower intervals, the same runs


def test_edited_or_unsealed_bundles_are_refused(two):
    a, b = two
    data = json.loads((b / "results.json").read_text())
    data["runs"][0]["metrics"]["busbw_peak"]["value"] = 999.0
    (b / "results.json").write_text(json.dumps(data))
    with pytest.raises(KitError, match=r"b: does not match its MANIFEST.sha256 \(results.json\)"):
        load_machines([a, b])
    with pytest.raises(InputError, match="at least two bundles"):
        load_machines([a])


def test_hardware_summary_fallback():
    assert machine_line(Hardware(summary="2x H200, NV18")) == "2x H200, NV18"
    gpus = [{"index": i, "name": "H100"} for i in range(2)]
    line = machine_line(Hardware.model_validate({"gpus": gpus, "driver": {"version": "1.2"}}))
    assert line.startswith("2x H100")


@pytest.mark.slow
@needs_pdf
def test_html_and_pdf_say_it_on_the_first_page(tmp_path):
    a = make_bundle(tmp_path, "a", A_P2P, A_OFF, host="alpha")
    b = make_bundle(tmp_path, "b", B_P2P, B_OFF, host="beta", torch="2.14.1+cu130")
    html, pdf, js = write_comparison([a, b], "1", tmp_path / "out")
    assert html.is_file() and pdf.is_file() and json.loads(js.read_text())["baseline"] == 1
    pages = PdfReader(pdf).pages
    first = re.sub(r"\s+", " ", pages[0].extract_text())
    assert "DIFFERENT ENVIRONMENTS" in first and "torch 2.14.1+cu130 vs 2.11.0+cu130" in first
    assert "2x H200 NV18 [1]" in first and "2x H200 NV18 [2]" in first
    assert "95% t-interval of the geometric mean, n=5" in first  # the interval says what it is
    assert "2.00x faster" in first and "no measurable difference" in first
    # the comparison never writes into a bundle
    with pytest.raises(InputError, match="inside the bundle"):
        write_comparison([a, b], "1", a / "cmp")


def test_a_cell_says_its_interval_as_the_single_report_does_and_its_ratio_once(tmp_path):
    """The per-workload table's interval ends keep their significant zero ("0.579 to 0.580",
    not "0.579 to 0.58": the single report's rule, Summary.ends), and a cell states its ratio
    once, in its sentence: "ratio 0.978: no measurable difference (ratio 0.98, ...)" gave one
    figure at two precisions, and "ratio 2.009: screening ...: no direction is stated" a
    direction beside the words that state none."""
    a = make_bundle(tmp_path, "a", [0.579, 0.580], [0.5, 0.5], host="alpha")
    b = make_bundle(tmp_path, "b", [0.570, 0.590], [0.5, 0.5], host="beta")
    written = write_comparison([a, b], "1", tmp_path / "out")
    html, js = written[0], written[-1]
    text = re.sub(r"<[^>]+>", " ", html.read_text())
    text = re.sub(r"\s+", " ", text)
    assert "0.579 to 0.580, range of 2 runs" in text and "0.579 to 0.58," not in text
    assert "screening (2 and 2 runs, fewer than 3 a side): under 0.01% apart" in text
    assert not re.search(r"ratio [0-9.]+: ", text)  # was "ratio 1.000: screening (...)"
    cell = json.loads(js.read_text())["workloads"][0]["cells"][0]["summary"]
    assert cell["ends"] == "0.579 to 0.580" and cell["centred_label"] == "range of 2 runs"


def test_a_recipe_written_with_defaults_or_nulls_is_the_same_recipe(tmp_path):
    """Compared after validation: `nodes: null`, an omitted field and a written default agree."""
    a = make_bundle(tmp_path, "a", A_P2P, A_OFF)
    b = make_bundle(tmp_path, "b", B_P2P, B_OFF)
    # the shipped recipe, its benchmark named as these bundles' runs name it
    text = (ROOT / "recipes" / "allreduce.yaml").read_text()
    text = text.replace("  - kind: allreduce\n", "  - kind: allreduce\n    name: ar\n", 1)
    assert "name: ar\n" in text
    text = text.replace("name: allreduce\n", "name: known\n", 1)  # the name its results give
    (a / "recipe.yaml").write_text(text)
    (b / "recipe.yaml").write_text(text + "nodes: null\ncv_threshold: 0.03\n")
    for path in (a, b):
        write_manifest(path)
    assert not [w for w in warnings_for(load_machines([a, b]), 0) if w["level"] == "recipe"]
    (b / "recipe.yaml").write_text(text.replace("repeats: 3", "repeats: 4"))
    write_manifest(b)
    warnings = warnings_for(load_machines([a, b]), 0)
    assert not [w for w in warnings if w["level"] == "recipe"]
    assert any("differ in max_repeats, repeats: the intervals" in w["text"] for w in warnings)


def test_no_factor_between_a_smoke_run_and_a_full_one(tmp_path):
    """Smoke shrinks the sizes to check the method: its numbers are no factor over a full run's
    (the tables show both, the choice states none)."""
    a = make_bundle(tmp_path, "a", A_P2P, A_OFF)
    b = make_bundle(tmp_path, "b", B_P2P, B_OFF, host="beta", smoke=True)
    data = comparison(load_machines([a, b]), 0)
    cells = [c for row in data["workloads"] for c in row["cells"][1:]]
    assert cells and all(c["ratio"] is None for c in cells)
    assert all("full-scale runs there, smoke-scale here" in c["ratio_error"]
               for c in cells)  # fmt: skip
    mine = data["choice"]["machines"][0]
    assert mine["geomean"] is None and "nothing to choose on" in mine["sentence"]


@needs_pdf
def test_no_factor_between_a_cpu_bundle_and_a_gpu_bundle(tmp_path):
    """`kit compare` of a CPU bundle and a GPU bundle: both in the tables, no "N x better"."""
    out = tmp_path / "cmp"
    proc = run_kit("compare", str(ROOT / "tests/fixtures/bundles/cpu-smoke"),
                   str(ROOT / "reports/examples/h200x2-allreduce"), "--out", str(out))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    data = json.loads((out / "compare.json").read_text())
    cells = [c for row in data["workloads"] for c in row["cells"][1:]]
    assert cells and all(c["ratio"] is None for c in cells)
    assert any("cuda runs against the baseline's cpu runs" in c["ratio_error"] for c in cells)
    text = "".join(page.extract_text() for page in PdfReader(out / "compare.pdf").pages)
    assert "better than" not in text and "not like for like" in text


@needs_pdf
def test_a_benchmark_one_bundle_never_ran_is_not_called_failed(tmp_path):
    """Two bundles of different recipes (decode data parallel against tensor parallel): a
    benchmark one of them never ran is "not run" there, never "FAILED", and the choice says
    which side did not run it."""
    a = make_bundle(tmp_path, "a", A_P2P, A_OFF, host="alpha")
    recipe = {**RECIPE, "benchmarks": [{"kind": "allreduce", "name": "other"}]}
    b = Bundle.create(tmp_path / "b", recipe, {"recipe": "known", "device": "cuda",
                      "runtime": "host", "pinned": False, "smoke": False, "repeats": 5})  # fmt: skip
    for variant, values in (("p2p", B_P2P), ("no-p2p", B_OFF)):
        for i, value in enumerate(values):
            record = run_record(variant, i, value)
            record |= {"benchmark": "other", "run_id": f"other.{variant}.r{i}"}
            b.add_run(RunResult.model_validate(record))
    b.finish("complete")
    b.write_json("hardware.json", hardware(2, "beta"))
    b.write_json("environment.json", json.loads((a / "environment.json").read_text()))
    write_manifest(b.path)
    _, pdf, js = write_comparison([a, b.path], "1", tmp_path / "out")
    data = json.loads(js.read_text())
    rows = {(r["benchmark"], r["variant"], r["metric"]): r["cells"] for r in data["workloads"]}
    mine, theirs = rows[("ar", "p2p", "busbw_peak")]
    assert mine["summary"] and not mine["absent"]
    assert theirs["absent"] and theirs["ratio"] is None
    assert theirs["ratio_error"] == "no ratio: 2x H200 NV18 [2] did not run ar p2p"
    base, other = rows[("other", "p2p", "busbw_peak")]
    assert base["absent"] and not other["absent"]
    assert other["ratio_error"] == "no ratio: the baseline 2x H200 NV18 [1] did not run other p2p"
    choice = data["choice"]["machines"][0]["lines"]
    assert [x["absent"] for x in choice] == [True, True]  # said in grey, not as a failure
    text = re.sub(r"\s+", " ", "".join(p.extract_text() for p in PdfReader(pdf).pages))
    assert "not run: not in this bundle's recipe" in text
    assert "FAILED" not in text and "no result" not in text
    assert "not in kit's table" not in text  # no datasheet claim for a line with no factor
