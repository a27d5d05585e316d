"""Recorded machines: `kit inspect --snapshot X.recorded.json` next to `nvidia-smi topo -m > X.topo.txt`
from the same machine. Our matrix (from NVML) must equal nvidia-smi's GPU columns.

nvidia-smi's text is parsed here only, to check the kit against it; the kit never parses it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from kit.inventory import build_inventory

FIXTURES = Path(__file__).parent.parent / "fixtures" / "nvml"
RECORDED = sorted(FIXTURES.glob("*.recorded.json"))


def smi_gpu_matrix(text: str) -> list[list[str]]:
    """The GPU-to-GPU block of `nvidia-smi topo -m` (NIC columns and the legend dropped)."""
    lines = [re.sub(r"\x1b\[[0-9;]*m", "", line) for line in text.splitlines()]
    header = next(line for line in lines if re.match(r"^\s+GPU0\b", line))
    cols = header.split()
    gpu_cols = [i for i, c in enumerate(cols) if re.fullmatch(r"GPU\d+", c)]
    rows = []
    for line in lines:
        if re.match(r"GPU\d+\s", line):  # a row; the header line starts with whitespace
            cells = line.split()
            rows.append([cells[1 + i] for i in gpu_cols])
    return rows


def test_smi_parser_on_a_known_layout() -> None:
    text = (
        "\t\x1b[4mGPU0\tGPU1\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m\n"
        "GPU0\t X \tNV18\tSYS\t0-47\t0\t\tN/A\n"
        "GPU1\tNV18\t X \tSYS\t0-47\t0\t\tN/A\n"
        "NIC0\tSYS\tSYS\t X \t\t\t\t\n\nLegend:\n\n  X    = Self\n"
    )
    assert smi_gpu_matrix(text) == [["X", "NV18"], ["NV18", "X"]]


@pytest.mark.skipif(not RECORDED, reason="no *.recorded.json from a real GPU machine yet")
@pytest.mark.parametrize("path", RECORDED, ids=lambda p: p.name)
def test_matrix_matches_nvidia_smi(path: Path) -> None:
    smi = path.with_name(path.name.replace(".recorded.json", ".topo.txt"))
    if not smi.exists():
        pytest.skip(f"{smi.name} (nvidia-smi topo -m from the same machine) is missing")
    inv = build_inventory(json.loads(path.read_text()))
    assert inv["topology"]["matrix"] == smi_gpu_matrix(smi.read_text())
