"""`kit report --ordered`: a quote's words read as count, model, memory and power rating."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kit.io.errors import InputError
from kit.report.facts.order import MAX_FILE, parse_order, read_order


@pytest.mark.parametrize(
    ("text", "key", "count", "memory", "power"),
    [
        ("4x H200 SXM 141GB 700W", "H200 SXM", 4, 141.0, 700.0),
        ("8 x H100 SXM 80 GB 700 W", "H100 SXM", 8, 80.0, 700.0),
        ("2× H200 NVL", "H200 NVL", 2, None, None),
        ("H100 PCIe 80GB", "H100 PCIe", None, 80.0, None),
    ],
)
def test_a_quote_is_read_as_count_model_memory_and_power(text, key, count, memory, power):
    order = parse_order(text)
    assert (order.spec.key, order.count, order.memory_gb, order.power_w) == (
        key,
        count,
        memory,
        power,
    )


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("4x 141GB 700W", "no GPU model is not a GPU of kit's datasheet table (GH200, "),
        ("4x MI300X", "MI300X is not a GPU of kit's datasheet table"),
        ("0x H200", "a count of 0 GPUs"),
        ("", "give the order in a quote's words"),
        ("H200\x1b[2J", "at most 200 printable characters"),
        ("H200 " * 60, "at most 200 printable characters"),
    ],
)
def test_an_order_kit_cannot_read_is_one_line(text, words):
    with pytest.raises(InputError) as e:
        parse_order(text)
    assert words in str(e.value) and "\n" not in str(e.value)


def test_memory_is_checked_against_the_datasheet_without_an_order():
    """The report review, 2: with no order, page 1 checked the memory against itself only (every
    GPU alike). An H200 sold as 141 GB reads 140.4 GiB: as sold; one that reads 120 GiB is not,
    and a model whose datasheet names no one figure (A100: 40 or 80 GB) is held to itself."""
    from kit.model import load_bundle
    from kit.report.analysis.ordered import as_ordered
    from tests.conftest import ROOT

    data = load_bundle(ROOT / "reports" / "examples" / "h200x2-fsdp-llama")

    def memory_line(mem: float, name: str = "NVIDIA H200") -> dict:
        gpus = [g.model_copy(update={"memory_total_gib": mem, "name": name})
                for g in data.hardware.gpus]  # fmt: skip
        hardware = data.hardware.model_copy(update={"gpus": gpus})
        return next(x for x in as_ordered(hardware, data.results) if x["item"] == "memory")

    line = memory_line(140.4)
    assert line["ok"] is True
    assert line["evidence"] == "140.4 GiB on every GPU, 141 GB in the H200 SXM datasheet"
    line = memory_line(120.0)
    assert line["ok"] is False and line["mark"] == "NO"
    assert line["evidence"] == "120 GiB on every GPU, 141 GB in the H200 SXM datasheet"
    line = memory_line(39.4, "NVIDIA A100-SXM4-40GB")
    assert line["ok"] is True and line["evidence"] == "39.4 GiB on every GPU"


def test_an_order_is_read_from_a_file_with_its_comments_left_out(tmp_path):
    """The report review, 2: `--ordered @FILE`, the quote's words kept beside the purchase order."""
    f = tmp_path / "order.txt"
    f.write_text("# PO 4711, the vendor's quote of 2026-11-20\n4x H200 SXM\n  141GB 700W\n\n")
    order = read_order(f"@{f}")
    assert order.text == "4x H200 SXM 141GB 700W" and order.spec.key == "H200 SXM"
    assert (order.count, order.memory_gb, order.power_w) == (4, 141.0, 700.0)
    assert order.source == str(f)
    link = tmp_path / "link.txt"
    link.symlink_to(f)  # the user's own link to their order is followed
    assert read_order(f"@{link}").spec.key == "H200 SXM"
    assert read_order("2x H200 NVL").source == ""  # words, as before


def test_an_order_file_kit_cannot_read_is_one_line(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # never opened: it would block
    big = tmp_path / "big.txt"
    big.write_text("# " + "x" * MAX_FILE + "\nH200\n")
    binary = tmp_path / "binary"
    binary.write_bytes(b"\xff\xfe H200")
    comments = tmp_path / "comments.txt"
    comments.write_text("# nothing but a comment\n")
    unknown = tmp_path / "unknown.txt"
    unknown.write_text("4x MI300X\n")
    # a /proc file's size reads 0: what is read is counted too (this process maps many files)
    assert os.stat("/proc/self/maps").st_size == 0
    assert len(Path("/proc/self/maps").read_bytes()) > MAX_FILE
    cases = [
        ("@", "name the file after @"),
        (f"@{tmp_path / 'missing.txt'}", "cannot read it (No such file or directory)"),
        (f"@{tmp_path}", "not a regular file"),
        (f"@{fifo}", "not a regular file"),
        (f"@{big}", f"an order's words fit in {MAX_FILE}"),
        ("@/proc/self/maps", f"more than {MAX_FILE} bytes"),
        (f"@{binary}", "cannot read it (not UTF-8 text)"),
        (f"@{comments}", "give the order in a quote's words"),
        (f"@{unknown}", "MI300X is not a GPU of kit's datasheet table"),
    ]
    for value, words in cases:
        with pytest.raises(InputError) as e:
            read_order(value)
        assert words in str(e.value) and "\n" not in str(e.value), (value, str(e.value))
        assert str(e.value).startswith(f"--ordered {value}"), str(e.value)


def test_the_measured_memory_and_nvlink_bandwidth_stand_against_the_datasheet():
    """The report review, 2: a bundle that measured its copies (recipes/silicon.yaml) has page 1's
    checklist say the weakest GPU's copy traffic and the weakest pair's copy against the
    datasheet, from the silicon section's own figures; a share, not a verdict. A bundle that
    measured none has no such line."""
    from kit.model import load_bundle
    from kit.report import analysis
    from kit.report.analysis.ordered import as_ordered
    from kit.workloads.copy_bandwidth.matrix import off_diagonal
    from tests.conftest import ROOT

    def lines(name: str) -> tuple[analysis.Silicon | None, list[dict]]:
        data = load_bundle(ROOT / "reports" / "examples" / name)
        benches = analysis.build_benchmarks(data.results, data.recipe)
        s = analysis.silicon(benches, data.hardware)
        return s, as_ordered(data.hardware, data.results, None, s)

    s, checks = lines("h200x2-silicon-container")
    by_item = {c["item"]: c for c in checks}
    traffic = min(h["local_traffic_gbps"] for h in s.host)
    memory = by_item["memory bandwidth"]
    assert memory["ok"] is None and memory["mark"] == "measured"
    assert memory["evidence"] == (
        f"weakest GPU's copy traffic {traffic:,.0f} GB/s (read plus write: twice the copy's "
        f"rate), {traffic / 4800:.0%} of the datasheet's 4,800 GB/s"
    )  # a buyer set 4,216 against the 2,108 of the tables: the factor is said, and the unit
    pair = min(off_diagonal(next(m for m in s.matrices if m["key"] == "ce_one_way")["matrix"]))
    link = by_item["NVLink bandwidth"]
    assert link["mark"] == "measured" and link["evidence"] == (
        f"weakest pair's copy one way {pair:,.0f} GB/s, {pair / 450:.0%} of the datasheet's "
        "450 GB/s"
    )  # 18 links of 25 GB/s per direction
    s, checks = lines("h200x2-fsdp-llama")
    assert s is None and not {"memory bandwidth", "NVLink bandwidth"} & {c["item"] for c in checks}
