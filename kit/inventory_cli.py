"""`kit inspect`: the inventory, printed for a person (rich) or for a program (--json).

The topology matrix is built as plain text first (`topology_text`), so it can be tested
character for character and reads like `nvidia-smi topo -m`; rich only colours it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from kit import inventory
from kit.errors import InputError

LINK_STYLES = {
    r"\bNV\d+\b": "bold green",
    r"\bPIX\b|\bPXB\b": "cyan",
    r"\bPHB\b|\bNODE\b": "yellow",
    r"\bSYS\b": "bold red",
}


def _columns(rows: list[list[str]], gap: int = 2) -> list[str]:
    widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
    return [
        "".join(cell.ljust(w + gap) for cell, w in zip(r, widths, strict=True)).rstrip()
        for r in rows
    ]


def topology_text(inv: dict[str, Any]) -> str:
    """The GPU matrix with CPU/NUMA affinity columns and a legend, like nvidia-smi topo -m."""
    gpus = inv.get("gpus") or []
    if not gpus:
        return "No GPUs: no topology to show."
    labels = inv["topology"]["labels"]
    matrix = inv["topology"]["matrix"]
    rows = [["", *labels, "CPU Affinity", "NUMA Affinity", "GPU NUMA ID"]]
    for g, label, row in zip(gpus, labels, matrix, strict=True):
        numa = g.get("numa_node")
        numa_text = (
            "N/A"
            if numa is None
            else ",".join(map(str, numa))
            if isinstance(numa, list)
            else str(numa)
        )
        gpu_numa = g.get("gpu_numa_node_id")
        rows.append(
            [
                label,
                *row,
                g.get("cpu_affinity") or "N/A",
                numa_text,
                "N/A" if gpu_numa is None else str(gpu_numa),
            ]
        )
    lines = _columns(rows)
    legend = inv["topology"].get("legend") or {}
    width = max(len(k) for k in legend) if legend else 0
    lines += ["", "Legend:"] + [f"  {k.ljust(width)}  {v}" for k, v in legend.items()]
    return "\n".join(lines)


def peer_access_text(inv: dict[str, Any]) -> str:
    """CUDA's peer-access answers as a matrix of yes/no (or why there are none)."""
    peer = inv.get("peer_access")
    if not peer:
        return f"Peer access (CUDA): not measured ({inv.get('peer_access_note') or 'no CUDA'})."
    labels = inv["topology"]["labels"]
    rows = [["", *labels]]
    for label, row in zip(labels, peer["matrix"], strict=True):
        rows.append([label, *("X" if v is None else "yes" if v else "no" for v in row)])
    return "\n".join([f"Peer access ({peer['source']}):", *_columns(rows)])


def _gib(n: int | None) -> str:
    return "?" if not n else f"{n / 2**30:,.0f} GiB"


def _pcie(p: dict[str, Any]) -> str:
    if not p or p.get("gen_max") is None:
        return "?"
    text = (
        f"Gen{p.get('gen_current')} x{p.get('width_current')} "
        f"(max Gen{p.get('gen_max')} x{p.get('width_max')})"
    )
    if p.get("gen_gpu_max") and p["gen_max"] and p["gen_gpu_max"] > p["gen_max"]:
        text += f", GPU can Gen{p['gen_gpu_max']}"
    return text


def _nvlink(g: dict[str, Any]) -> str:
    links = g.get("nvlinks") or []
    if not links:
        return "none"
    active = [n for n in links if n["active"]]
    first = active[0] if active else links[0]
    parts = [f"{len(active)}/{len(links)} up"]
    if first.get("version"):
        parts.append(f"v{first['version']}")
    if first.get("speed_gbs"):
        parts.append(f"{first['speed_gbs']:g} GB/s each")
    remotes = sorted({n["remote"] or "?" for n in active})
    if remotes:
        parts.append("to " + ", ".join(remotes))
    return ", ".join(parts)


def host_table(inv: dict[str, Any]) -> Table:
    h = inv.get("host") or {}
    t = Table(title="Host", show_header=False, title_justify="left", box=None, padding=(0, 2))
    numa = h.get("numa_nodes") or []
    container = h.get("container") or {}
    shm = h.get("shm_bytes")
    for key, value in (
        ("CPU", h.get("cpu_model")),
        (
            "Cores",
            f"{h.get('sockets')} socket(s), {h.get('physical_cores')} cores, "
            f"{h.get('logical_cpus')} threads (this process may use {h.get('allowed_cpus')})",
        ),
        ("NUMA", "; ".join(f"node {n['id']}: CPUs {n['cpus']}" for n in numa) or "?"),
        ("Memory", _gib(h.get("mem_total_bytes"))),
        ("/dev/shm", "?" if shm is None else f"{shm / 2**20:,.0f} MiB"),
        ("OS", f"{h.get('os')}, kernel {h.get('kernel')}, {h.get('arch')}"),
        (
            "Container",
            f"{container.get('runtime')} ({', '.join(container.get('evidence') or [])})"
            if container.get("detected")
            else "none detected",
        ),
    ):
        t.add_row(key, str(value))
    return t


def gpu_table(inv: dict[str, Any]) -> Table:
    t = Table(title="GPUs", title_justify="left", padding=(0, 1))
    for col in ("#", "Model", "Memory", "PCIe", "Power limit", "Max SM/mem MHz", "Temp", "NVLink"):
        t.add_column(col, overflow="fold", no_wrap=col == "Model")
    for g in inv.get("gpus") or []:
        clocks = g.get("clocks_max_mhz") or {}
        t.add_row(
            str(g["index"]),
            f"{g.get('name')}\n{g.get('uuid')}\n{g.get('pci_bus_id')}",
            _gib(g.get("memory_total_bytes")),
            _pcie(g.get("pcie") or {}),
            f"{g.get('power_limit_w') or '?':g} W" if g.get("power_limit_w") else "?",
            f"{clocks.get('sm')}/{clocks.get('mem')}",
            f"{g.get('temperature_c')} C",
            _nvlink(g),
        )
    return t


def placement_text(inv: dict[str, Any]) -> str:
    sets = inventory.suggest_gpu_sets(inv, 2)
    if len(sets) < 2:
        return (
            "Placement: every GPU pair has the same link; placement variants would not differ."
            if sets
            else "Placement: fewer than 2 GPUs."
        )
    lines = ["Placement variants (GPU pairs that differ in topology):"]
    for s in sets:
        lines.append(f"  gpu_ids: {s['gpu_ids']}  {s['link']:<5} {s['why']}")
    return "\n".join(lines)


def _styled(text: str) -> Text:
    out = Text(text)
    for pattern, style in LINK_STYLES.items():
        out.highlight_regex(pattern, style)
    return out


def render(inv: dict[str, Any], console: Console) -> None:
    """Print the inventory for a person: summary, host, GPUs, topology, peer access, placement."""
    console.print(Text(inv.get("summary") or "", style="bold"))
    console.print()
    console.print(host_table(inv))
    console.print()
    if not inv.get("gpus"):
        console.print(f"No GPUs: {inv.get('nvml_error') or 'NVML reports none'}")
        return
    driver = inv.get("driver") or {}
    console.print(
        f"Driver {driver.get('version')}, CUDA driver {driver.get('cuda_driver_version')}, "
        f"NVML {driver.get('nvml_version')}"
    )
    console.print(gpu_table(inv))
    console.print()
    console.print(Group(Text("Topology", style="italic"), _styled(topology_text(inv))))
    console.print()
    console.print(peer_access_text(inv), highlight=False)
    console.print()
    console.print(placement_text(inv), highlight=False)


def load_snapshot(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except OSError as exc:
        raise InputError(f"{path}: cannot read snapshot: {exc.strerror}") from exc
    except ValueError as exc:
        raise InputError(f"{path}: not JSON: {exc}") from exc
    if not isinstance(data, dict) or "nvml" not in data or "host" not in data:
        raise InputError(f"{path}: not an NVML snapshot (needs the keys 'nvml' and 'host')")
    return data


def inspect_command(
    json_out: bool = False,
    snapshot_out: Path | None = None,
    from_snapshot: Path | None = None,
    console: Console | None = None,
) -> int:
    """`kit inspect [--json] [--snapshot FILE] [--from-snapshot FILE]`; returns the exit code.

    --snapshot writes the raw NVML/OS answers (a test fixture for this machine's topology);
    --from-snapshot renders a recorded one instead of asking this machine.
    """
    snap = load_snapshot(from_snapshot) if from_snapshot else inventory.collect_snapshot()
    if snapshot_out:
        snapshot_out.write_text(json.dumps(snap, indent=1) + "\n")
    inv = inventory.build_inventory(snap)
    if json_out:
        out = console.file if console else sys.stdout
        out.write(json.dumps(inv, indent=2) + "\n")
        return 0
    render(inv, console or Console())
    return 0
