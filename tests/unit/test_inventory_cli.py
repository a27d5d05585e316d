"""kit inspect: the readable rendering and --json, on recorded snapshots and on this machine."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from kit.inventory import build_inventory
from kit.inventory.cli import inspect_command, topology_text
from kit.io.errors import InputError
from kit.model import Hardware

FIXTURES = Path(__file__).parent.parent / "fixtures" / "nvml"


def run(width: int = 160, **kw) -> str:
    buf = io.StringIO()
    console = Console(file=buf, width=width, color_system=None, force_terminal=False)
    assert inspect_command(console=console, **kw) == 0
    return buf.getvalue()


@pytest.mark.parametrize(
    "name",
    ["h200x2_nvswitch", "h100x8_dgx", "rtx3090x8_pcie_2socket", "rtx3090ti_x2_nvlink_bridge"],
)
def test_rendering_shows_the_exact_matrix(name: str) -> None:
    path = FIXTURES / f"{name}.json"
    out = run(from_snapshot=path)
    inv = build_inventory(json.loads(path.read_text()))
    assert topology_text(Hardware.model_validate(inv)) in out
    assert out.splitlines()[0] == inv["summary"]
    for g in inv["gpus"]:
        assert g["uuid"] in out


def test_rendering_pcie_box_suggests_placement_and_shows_peer_access() -> None:
    out = run(from_snapshot=FIXTURES / "rtx3090x8_pcie_2socket.json")
    assert "gpu_ids: [0, 4]  SYS" in out
    assert "Gen1 x16 (max Gen3 x16), GPU can Gen4" in out
    assert "GPU0  X     no    no" in out


@pytest.mark.parametrize("name", ["h100x8_dgx", "rtx3090x8_pcie_2socket"])
def test_eight_gpus_piped_at_80_columns_read_whole(name: str) -> None:
    """`kit inspect > machine.txt`: no terminal, 80 columns; nothing squeezed or cut."""
    path = FIXTURES / f"{name}.json"
    out = run(width=80, from_snapshot=path)
    lines = out.splitlines()
    too_long = [ln for ln in lines if len(ln) > 80]
    assert too_long == []
    inv = build_inventory(json.loads(path.read_text()))
    assert len(inv["gpus"]) == 8
    for g in inv["gpus"]:
        assert f"GPU {g['index']}: {g['name']}" in lines  # the name whole, on its own line
        assert f"  Bus id       {g['pci_bus_id']}" in lines
    matrix = lines.index("Topology (nvidia-smi topo -m words)") + 1
    assert lines[matrix].split() == [*inv["topology"]["labels"], "NUMA"]
    assert "\x1b[" not in out  # no colour codes in a file
    # the same text whatever width the console claims: the layout does not follow the terminal
    assert run(width=40, from_snapshot=path) == out == run(width=200, from_snapshot=path)


def test_json_output_is_the_inventory() -> None:
    path = FIXTURES / "h200x2_nvswitch.json"
    out = run(from_snapshot=path, json_out=True)
    assert json.loads(out) == build_inventory(json.loads(path.read_text()))


def test_snapshot_can_be_written_and_replayed(tmp_path: Path) -> None:
    target = tmp_path / "snap.json"
    run(from_snapshot=FIXTURES / "h100x8_dgx.json", snapshot_out=target, json_out=True)
    assert json.loads(target.read_text()) == json.loads((FIXTURES / "h100x8_dgx.json").read_text())


def test_bad_snapshot_is_a_one_line_input_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(InputError, match=r"bad.json: not JSON"):
        run(from_snapshot=bad)
    bad.write_text('{"gpus": []}')
    with pytest.raises(InputError, match=r"not an NVML snapshot"):
        run(from_snapshot=bad)
    with pytest.raises(InputError, match=r"--from-snapshot .*missing.json: no such file"):
        run(from_snapshot=tmp_path / "missing.json")


def test_inspect_on_this_machine(tmp_path: Path) -> None:
    """The real collection, no fixture: without a GPU it says so and still shows the host."""
    out = run(snapshot_out=tmp_path / "me.json")
    snap = json.loads((tmp_path / "me.json").read_text())
    assert "Host" in out and "CPU" in out
    if not snap["nvml"]["gpus"]:
        assert "No GPUs: " in out
    data = json.loads(run(json_out=True))
    assert data["schema"] == 1 and data["host"]["logical_cpus"] >= 1
