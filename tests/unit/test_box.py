"""The box judgement (kit.report.analysis.box) over a 4-GPU H100 bundle built here: each GPU
against the shipped figure of its model and against the median of the box's other GPUs, each
pair against the other pairs of its path. The numbers are made up for the test; they test the rule and the words,
not any machine."""

from __future__ import annotations

import copy
import html as html_text
import json
import re
import shutil

import pytest

from kit.bundle import Bundle, write_manifest
from kit.model import Hardware
from kit.model.hardware import uncorrected_words
from kit.report import analysis
from kit.report.analysis.box import COPY_MARGIN, judge_box
from kit.report.analysis.ordered import gpus_ran, identity
from kit.report.render import render_html
from kit.workloads.copy_bandwidth import matrix
from kit.workloads.matmul_ceiling.params import MatmulCeilingParams
from tests.conftest import ROOT, recipe_model, results_model

N = 4
NAME = "NVIDIA H100 80GB HBM3"  # the model kit/refs/per_gpu.json has figures for
BF16 = [4096, 4096, 16384]  # the shape of the shipped bf16 figure


def uuid(i: int) -> str:
    return f"GPU-0000000{i}-aaaa-bbbb-cccc-00000000000{i}"


def hardware(name: str = NAME, words: str = "NV18", n: int = N, links_down: int = 0) -> Hardware:
    """n GPUs of one model; GPU 3 with `links_down` of its 18 NVLinks down."""
    return Hardware.model_validate(
        {
            "gpus": [
                {
                    "index": i,
                    "name": name,
                    "uuid": uuid(i),
                    "pci_bus_id": f"0000:{0x18 + i:02x}:00.0",
                    "nvlinks": [{"active": not (i == 3 and k < links_down)} for k in range(18)],
                    "power_limit_w": 700.0,
                    "power_default_limit_w": 700.0,
                    "ecc": {"mode_current": 1, "volatile_uncorrected": 0},
                    "clocks_max_mhz": {"sm": 1980, "mem": 2619},
                }
                for i in range(n)
            ],
            "topology": {
                "labels": [f"GPU{i}" for i in range(n)],
                "matrix": [["X" if i == j else words for j in range(n)] for i in range(n)],
            },
        }
    )


def copy_data(local: list[float], pair=lambda a, b: 370.0) -> dict:
    rows = [
        {"device": i, "mib": 512, "h2d_gbps": 53.0, "d2h_gbps": 54.0, "local_gbps": v, "wrong": 0}
        for i, v in enumerate(local)
    ]
    return {
        "params": {"size_mib": 512, "loop_count": 16, "samples": 3},
        "names": [NAME] * len(local),
        "per_gpu": rows,
        "plateau": [rows[0]],
        "pairs": {
            "ce_one_way": matrix.one_way(len(local), pair),
            "ce_both_ways": matrix.both_ways(len(local), lambda a, b: 2 * pair(a, b)),
        },
    }


def mm_data(
    alone: list[float], shape: list[int] = BF16, name: str = NAME, search: dict | None = None
) -> dict:
    def trial(v: float) -> dict:
        return {"shape": shape, "matmuls": 50, "trials": [v, v, v], "tflops": v}

    return {
        "params": {"sustain_s": 0.3, "trials": 3, **(search or {})},
        "gpus": [name] * len(alone),
        "skipped": {},
        "dtypes": {
            "bf16": {
                "best_shape": shape,
                "alone": [trial(v) for v in alone],
                "together": [trial(v - 10) for v in alone],
            }
        },
    }


def run(kind: str, repeat: int, data: dict, n: int = N) -> dict:
    return {
        "run_id": f"{kind}.p2p.r{repeat}",
        "benchmark": kind,
        "kind": kind,
        "repeat": repeat,
        "world_size": n,
        "data": data,
    }


def box(local_of, alone_of, repeats: int = 3, hw: Hardware | None = None, pair=None, **kw):
    """The judged box of `repeats` copy and matmul runs; local_of(r) / alone_of(r): the per-GPU
    figures of repeat r."""
    runs = [
        run("copy_bandwidth", r, copy_data(local_of(r), *([pair] if pair else [])))
        for r in range(repeats)
    ]
    runs += [run("matmul_ceiling", r, mm_data(alone_of(r), **kw)) for r in range(repeats)]
    results = results_model(runs, repeats=repeats)
    benches = analysis.build_benchmarks(results, recipe_model("copy_bandwidth", "matmul_ceiling"))
    return judge_box(benches, hw or hardware(), smoke=False)


def steady(values: list[float]):
    """Each repeat a little off the last (an interval needs a spread)."""
    return lambda r: [v * (1 + 0.002 * (r - 1)) for v in values]


def test_a_slow_gpu_is_named_with_its_uuid_bus_and_nvlinks_and_fails_its_reference():
    b = box(steady([1490, 1492, 1488, 1491]), steady([700, 705, 350, 698]))
    assert not b.screening and b.repeats == 3
    gpu2 = b.rows[2]
    bf16 = gpu2.figures["tflops_bf16"]
    assert bf16.median == pytest.approx(350) and bf16.others_median == pytest.approx(700)
    assert bf16.below and bf16.standing.verdict == "FAIL"  # 350 against 702.5 less 10%
    assert gpu2.verdict == "FAIL" and [r.name for r in b.rows if r.below] == ["GPU 2"]
    (named,) = b.outliers
    assert named.startswith(f"GPU 2 ({uuid(2)}, bus 0000:1a:00.0, NVLinks 18 of 18 up): ")
    assert (
        "matmul bf16 alone 350 TFLOP/s, 50% below the median of the 3 other GPUs, 700 (named "
        "beyond 10%)" in named
    )
    for r in (b.rows[0], b.rows[1], b.rows[3]):  # the healthy ones pass their model's figures
        assert r.verdict == "PASS" and not r.below
        assert r.figures["local_gbps"].standing.verdict == "PASS"
        # the host link is the server's (slot, CPU), not the model's: no reference judges it
        assert r.figures["h2d_gbps"].standing.verdict == "NOT COMPARABLE"
    assert (b.rows[0].power, b.rows[0].ecc) == ("700 W of 700", "on, 0 uncorrected since boot")
    assert b.rows[0].clocks == "SM max 1,980 MHz"
    assert b.link_outliers == [] and b.rows[0].weakest_pair == pytest.approx(370)


def test_two_gpus_are_each_held_against_the_other_not_their_midpoint():
    """2x H200 with a background load on GPU 1 (2026-11-29, the medians of its 3 repeats): page 1
    read "932 GB/s, 38% below the box's median 1,515", a figure neither GPU measured, and the
    healthy GPU "+38%"; the slow direction of the pair was named under GPU 0 as its "hub"."""
    hw = hardware(n=2)
    slow = {(0, 1): 28.4}  # the loaded GPU's copy engine, GPU 0 -> GPU 1
    b = box(
        steady([2099.0, 932.2]),
        steady([697.7, 328.7]),
        hw=hw,
        pair=lambda a, c: slow.get((a, c), 365.0),
    )
    copy0, copy1 = (r.figures["local_gbps"] for r in b.rows)
    assert copy1.others_median == pytest.approx(2099) and copy0.others_median == pytest.approx(
        932.2
    )
    assert [r.name for r in b.rows if r.below] == ["GPU 1"]
    (named,) = b.outliers
    assert named == (
        f"GPU 1 ({uuid(1)}, bus 0000:19:00.0, NVLinks 18 of 18 up): HBM copy 932 GB/s, 56% below "
        "the other GPU's 2,099 (named beyond 5%); matmul bf16 alone 329 TFLOP/s, 53% below the "
        "other GPU's 698 (named beyond 10%)"
    )
    assert copy1.vs_words == "-56% vs the others"
    (link,) = b.link_outliers  # one pair, named as a link with both ends, no "hub"
    assert link == (
        "GPU 0 -> GPU 1 (NV18) copy engine one way 28.4 GB/s, 92% below the other pair on its "
        f"path, 365 GB/s (named beyond 5%); its ends: GPU 0 ({uuid(0)}, bus 0000:18:00.0, "
        f"NVLinks 18 of 18 up); GPU 1 ({uuid(1)}, bus 0000:19:00.0, NVLinks 18 of 18 up)"
    )
    both = [x for x in b.links if x.test == "ce_both_ways"]
    assert len(both) == 1 and both[0].class_median is None  # one pair: nothing to hold it against


def test_two_slow_gpus_of_three_do_not_hide_each_other():
    """With the GPU itself in the median, two slow GPUs of three are the median."""
    hw = hardware(n=3)
    b = box(steady([1490.0, 900.0, 905.0]), steady([700.0, 700.0, 700.0]), hw=hw)
    assert [r.name for r in b.rows if r.below] == ["GPU 1", "GPU 2"]


def test_a_box_without_a_slow_gpu_names_none():
    b = box(steady([1490, 1492, 1488, 1491]), steady([700, 705, 690, 698]))
    assert b.outliers == [] and b.link_outliers == []
    assert [r.verdict for r in b.rows] == ["PASS"] * N


@pytest.mark.parametrize(
    ("factor", "named"), [(1 - COPY_MARGIN + 0.01, False), (1 - COPY_MARGIN - 0.01, True)]
)
def test_a_copy_is_named_only_beyond_its_margin(factor, named):
    b = box(steady([1490, 1490 * factor, 1490, 1490]), steady([700] * N))
    assert b.rows[1].figures["local_gbps"].below is named
    assert bool(b.outliers) is named


MATMUL_MARGIN = MatmulCeilingParams().outlier_pct / 100  # the runs here record none


def test_a_matmul_is_named_only_beyond_its_margin():
    b = box(steady([1490] * N), steady([700, 700 * (1 - MATMUL_MARGIN + 0.02), 700, 700]))
    assert b.outliers == []  # 8% below: the low end of healthy silicon at the power cap
    b = box(steady([1490] * N), steady([700, 700 * (1 - MATMUL_MARGIN - 0.02), 700, 700]))
    assert [r.name for r in b.rows if r.below] == ["GPU 1"]


def test_the_matmul_margin_is_the_one_its_runs_flagged_at():
    """Page 1 said "10% for a matmul ceiling" beside a Method and silicon section that flagged
    at the runs' outlier_pct (then 5%): one margin, the recorded one where a run recorded it."""
    low = [700, 700 * 0.92, 700, 700]  # 8% below
    assert box(steady([1490] * N), steady(low)).outliers == []
    b = box(steady([1490] * N), steady(low), search={"outlier_pct": 5.0})
    assert [r.name for r in b.rows if r.below] == ["GPU 1"]
    assert b.margins == "5% for a copy, 5% for a matmul ceiling"
    assert box(steady([1490] * N), steady([700] * N)).margins.endswith(
        f"{MATMUL_MARGIN:.0%} for a matmul ceiling"
    )


def test_one_repeat_is_a_screening_no_pass_or_fail_but_the_slow_gpu_is_named():
    b = box(steady([1490] * N), steady([700, 705, 350, 698]), repeats=1)
    assert b.screening and b.repeats == 1
    assert {f.standing.verdict for r in b.rows for f in r.figures.values()} <= {
        "UNDECIDED",
        "NOT COMPARABLE",
    }
    assert b.notes[0].startswith("Screening: 1 repeat per figure, so no PASS or FAIL")
    assert [r.name for r in b.rows if r.below] == ["GPU 2"]


def test_another_model_or_another_shape_is_not_comparable_and_says_why():
    b = box(steady([1490] * N), steady([700] * N), hw=hardware(name="NVIDIA A100-SXM4-80GB"))
    f = b.rows[0].figures["tflops_bf16"]
    assert f.standing.verdict == "NOT COMPARABLE" and b.rows[0].verdict == "NOT COMPARABLE"
    assert "NVIDIA H100 80GB HBM3 there, NVIDIA A100-SXM4-80GB here" in f.standing.reason
    assert any(n.startswith("Not judged against a model's reference (HBM copy, ") for n in b.notes)
    b = box(steady([1490] * N), steady([700] * N), shape=[8192, 8192, 8192])
    f = b.rows[0].figures["tflops_bf16"]
    assert f.standing.reason == "shape 4096x4096x16384 there, 8192x8192x8192 here"
    assert b.rows[0].figures["local_gbps"].standing.verdict == "PASS"


H200 = "NVIDIA H200"
SEARCH = {"m_sizes": [4096, 8192], "n_sizes": [4096, 8192], "k_sizes": [8192, 16384]}


def h200_box(alone: float, search: dict) -> analysis.box.Box:
    """An H200 box whose matmul search's winner changes from repeat to repeat (as it did on one
    H200 on 2026-11-29: shapes within 2% trade places)."""
    shapes = [[4096, 4096, 8192], [8192, 4096, 16384], [4096, 4096, 8192]]
    runs = [
        run("matmul_ceiling", r, mm_data([alone * (1 + 0.002 * r)] * N, shapes[r], H200, search))
        for r in range(3)
    ]
    results = results_model(runs, repeats=3)
    benches = analysis.build_benchmarks(results, recipe_model("matmul_ceiling"))
    return judge_box(benches, hardware(name=H200), smoke=False)


def test_a_reference_of_a_search_judges_whichever_shape_won_it():
    b = h200_box(676.0, SEARCH)
    f = b.rows[0].figures["tflops_bf16"]
    assert f.standing.verdict == "PASS" and f.standing.reference.id == "h200-bf16-2026-11-29"
    slow = h200_box(560.0, SEARCH).rows[0].figures["tflops_bf16"]
    assert slow.standing.verdict == "FAIL"
    other = h200_box(676.0, {**SEARCH, "k_sizes": [4096]}).rows[0].figures["tflops_bf16"]
    assert other.standing.verdict == "NOT COMPARABLE"
    assert other.standing.reason == (
        "search m 4096/8192, n 4096/8192, k 8192/16384 there, m 4096/8192, n 4096/8192, k 4096 here"
    )


def test_a_gpus_lifetime_ecc_errors_show_in_its_row_and_the_checklist():
    """An H200 whose preflight warned "2 uncorrected ECC error(s) over its lifetime" read "ECC on,
    0 uncorrected" in page 1's row and checklist (2026-11-29): the lifetime count is said too."""
    hw = hardware()
    worn = hw.gpus[2].ecc.model_copy(update={"aggregate_uncorrected": 2})
    hw.gpus[2] = hw.gpus[2].model_copy(update={"ecc": worn})
    b = box(steady([1490] * N), steady([700] * N), hw=hw)
    assert b.rows[2].ecc == "on, 0 uncorrected since boot, 2 over its lifetime"
    assert b.rows[0].ecc == "on, 0 uncorrected since boot"
    eccs = [g.ecc for g in hw.gpus]
    assert uncorrected_words(eccs) == "0 uncorrected since boot, 2 over their lifetimes"


def test_a_pair_is_held_against_the_pairs_of_its_own_path():
    slow = {(0, 3): 300.0}  # GPU 0 -> GPU 3: a lane down's worth and more
    b = box(steady([1490] * N), steady([700] * N), pair=lambda a, c: slow.get((a, c), 370.0))
    (one,) = b.link_outliers  # one sentence for the GPU the named pairs meet at
    assert one == (
        f"GPU 0 ({uuid(0)}, bus 0000:18:00.0, NVLinks 18 of 18 up) is in 2 pair figures more "
        "than 5% below the other pairs on the same path: GPU 0 -> GPU 3 (NV18) copy engine one "
        "way 300 GB/s, 19% below the median of the 11 other pairs on its path, 370 GB/s; GPU 0 "
        "<-> GPU 3 (NV18) copy engine both ways 600 GB/s, 19% below the median of the 5 other "
        f"pairs on its path, 740 GB/s; the other end: GPU 3 ({uuid(3)}, bus 0000:1b:00.0, "
        "NVLinks 18 of 18 up)"
    )
    assert b.rows[0].weakest_pair == 300 and b.rows[0].weakest_pair_named
    assert b.outliers == []  # the GPUs themselves are fine
    # PCIe: pairs across the CPUs (SYS) are slower by design, never held against PIX pairs
    hw = hardware(words="PIX")
    hw.topology.matrix[0][3] = hw.topology.matrix[3][0] = "SYS"
    hw.topology.matrix[1][2] = hw.topology.matrix[2][1] = "SYS"
    slow = {(0, 3): 20.0, (3, 0): 20.0, (1, 2): 20.4, (2, 1): 20.4}
    b = box(steady([1490] * N), steady([700] * N), hw=hw, pair=lambda a, c: slow.get((a, c), 25.0))
    assert b.link_outliers == []
    assert {x.path_class for x in b.links} == {"PIX", "SYS"}


def test_a_gpu_whose_every_pair_is_slow_is_named_once_with_its_pairs():
    """A lane down on an NVSwitch box slows every pair of one GPU: one sentence names it."""
    hw = hardware(n=8, links_down=2)
    b = box(
        steady([1490] * 8),
        steady([700] * 8),
        hw=hw,
        pair=lambda a, c: 330.0 if 3 in (a, c) else 370.0,
    )
    (one,) = b.link_outliers
    assert one.startswith(
        f"GPU 3 ({uuid(3)}, bus 0000:1b:00.0, NVLinks 16 of 18 up) is in 21 pair figures more "
        "than 5% below the other pairs on the same path: GPU 0 -> GPU 3 (NV18) copy engine one "
        "way 330 GB/s, 11% below the median of the 55 other pairs on its path, 370 GB/s; "
    )
    assert one.count(" GB/s, 11% below the median of the ") == 21  # 7 + 7 one way, 7 both
    assert b.rows[3].weakest_pair_named and b.rows[3].nvlinks == "16 of 18 up"
    assert b.outliers == []  # its own copies and matmuls are the box's


def test_an_nvlink_down_shows_in_the_row():
    b = box(steady([1490] * N), steady([700] * N), hw=hardware(links_down=1))
    assert b.rows[3].nvlinks == "17 of 18 up" and b.rows[0].nvlinks == "18 of 18 up"


def test_the_gpus_that_ran_and_those_that_did_not():
    hw = hardware(n=4)
    tel = {
        "available": True,
        "gpus": [{"index": i, "uuid": uuid(i), "samples": {}} for i in range(4)],
    }
    two = results_model([{"world_size": 2, "telemetry": tel}])
    assert gpus_ran(hw, two) == (
        f"2 of the box's 4 GPUs ran: GPU 0 ({uuid(0)}), GPU 1 ({uuid(1)}) (by the UUIDs the "
        "runs' telemetry names). Not measured: "
        f"GPU 2 ({uuid(2)}), GPU 3 ({uuid(3)}); nothing on this page speaks for them "
        "(recipes/acceptance.yaml runs every GPU)."
    )
    four = results_model([{"world_size": 4, "telemetry": tel}])
    assert gpus_ran(hw, four) is None  # every GPU ran: the identity line says so
    assert ("GPU UUIDs, every one ran", ", ".join(uuid(i) for i in range(4))) in identity(
        hw, None, four
    )
    assert ("GPU UUIDs", ", ".join(uuid(i) for i in range(4))) in identity(hw, None, two)
    no_telemetry = results_model([{"world_size": 3}])
    assert gpus_ran(hw, no_telemetry).endswith(
        "(counted by the processes started: no run's telemetry named its GPUs). Not measured: "
        f"GPU 3 ({uuid(3)}); nothing on this page speaks for it (recipes/acceptance.yaml runs "
        "every GPU)."
    )
    assert gpus_ran(Hardware(), two) is None  # the CPU: no GPU to name


LLAMA = ROOT / "reports" / "examples" / "h200x2-fsdp-llama"


@pytest.mark.slow
@pytest.mark.skipif(not LLAMA.is_dir(), reason="the Llama example is not here")
def test_a_training_report_on_a_larger_box_says_which_gpus_ran(tmp_path):
    """The Llama example's two GPUs, on a box of four (two GPUs added to its hardware.json):
    page 1 names the two that ran, by UUID from the runs' telemetry, and the two that did not."""
    b = tmp_path / "llama"
    shutil.copytree(LLAMA, b)
    hw = json.loads((b / "hardware.json").read_text())
    ran = [g["uuid"] for g in hw["gpus"]]
    for i in (2, 3):
        extra = copy.deepcopy(hw["gpus"][0])
        extra.update(index=i, uuid=f"GPU-not-measured-{i}", pci_bus_id=f"0000:00:0{6 + i}.0")
        hw["gpus"].append(extra)
    (b / "hardware.json").write_text(json.dumps(hw, indent=1))
    write_manifest(b)
    html = render_html(Bundle.load(b))
    page1 = html[: html.index("Against the same-model reference")]
    text = re.sub(r"\s+", " ", html_text.unescape(re.sub(r"<[^>]+>", "", page1)))
    assert (
        f"GPUs measured: 2 of the box's 4 GPUs ran: GPU 0 ({ran[0]}), GPU 1 ({ran[1]}) (by the "
        "UUIDs the runs' telemetry names). Not "
        "measured: GPU 2 (GPU-not-measured-2), GPU 3 (GPU-not-measured-3); nothing on this page "
        "speaks for them" in text
    )
    assert "Every GPU of the box" not in html  # no per-GPU checks in a training bundle
    # the title names the box; right under it, what of it ran (the report review, 13)
    title = re.search(r'<h1 class="machine">[^<]*</h1>\s*<p class="ran-of-box">(.*?)</p>', html)
    assert title and "4x NVIDIA H200" in title.group(0)
    assert re.sub(r"<[^>]+>", "", title.group(1)).startswith("2 of its 4 GPUs ran: the figures")


@pytest.mark.slow
def test_the_busy_clock_says_what_it_is_beside_the_table():
    """The one-H100 acceptance example: "1,320 MHz busy" stood in the clocks cell with no word
    of what it was (the report review); it is the mean SM clock while the matmul runs kept the
    GPU busy, and the table's key says so."""
    html = render_html(Bundle.load(ROOT / "reports/examples/h100x1-acceptance-container"))
    text = re.sub(r"\s+", " ", html_text.unescape(re.sub(r"<[^>]+>", "", html)))
    assert "SM max 1,980 MHz; 1,320 MHz mean in matmul" in text
    assert (
        "Clocks: the SM clock's rated maximum (NVML's), and its mean over the samples in which "
        "the matmul runs kept the GPU busy (at the power limit a GPU runs below its maximum: "
        "normal)." in text  # nothing of "its peers": it has none
    )
    assert re.search(r"0 of 18 up\s*one GPU: no peer", text)  # beside PASS 0 read as broken
    assert "MHz busy" not in text


@pytest.mark.slow
def test_a_one_gpu_bundle_says_its_p2p_variant_moved_nothing():
    """The one-H100 acceptance example ran its matmul and copies as variant "p2p", the recipe's
    name, on one GPU: the variants' list says that setting had nothing to act on (the review)."""
    html = render_html(Bundle.load(ROOT / "reports/examples/h100x1-acceptance-container"))
    text = re.sub(r"\s+", " ", html_text.unescape(re.sub(r"<[^>]+>", "", html)))
    assert (
        "Each run used one GPU: nothing crossed a link between GPUs, so whether peer-to-peer "
        "was allowed made no difference here; the variant names are the recipe's." in text
    )
    two = render_html(Bundle.load(LLAMA))
    assert "made no difference here" not in two


def test_the_sections_name_only_the_runs_the_bundle_holds():
    """A buyer's reading of the decode-and-copy example: "From the copy-bandwidth and
    matmul-ceiling runs of this bundle" over a bundle without a matmul run."""
    html = render_html(Bundle.load(ROOT / "reports/examples/h200x2-decode-dp-copy-container"))
    text = re.sub(r"\s+", " ", html_text.unescape(re.sub(r"<[^>]+>", "", html)))
    assert text.count("From the copy-bandwidth runs of this bundle") == 2  # silicon, per-GPU
    assert "matmul-ceiling runs" not in text
    b = box(steady([1490, 1492, 1488, 1491]), steady([700, 705, 690, 698]))
    assert b.sources == "copy-bandwidth and matmul-ceiling"
