"""`kit inspect`: the inventory, printed for a person (plain text) or for a program (--json).

The text has one layout whatever the terminal: it is wrapped at 80 columns, never squeezed to
the console's width, because `kit inspect > machine.txt` (no terminal at all) is how it gets
attached to a ticket. One block per GPU, then the topology matrix in `nvidia-smi topo -m` words
(8 GPUs fit in 80 columns), the links, NUMA, peer access and placement. Every part is built as
plain text first, so it can be tested character for character; rich only colours the link words
on a terminal.
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.text import Text

from kit import inventory
from kit.io import outputs, terminal
from kit.io.errors import InputError
from kit.io.safe import read_bytes
from kit.model.hardware import Driver, Ecc, Gpu, Hardware, Host, NvLink, Pcie

WIDTH = 80  # the text is laid out for this width, whatever the terminal says
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


def _fields(pairs: list[tuple[str, str]], indent: int = 2) -> list[str]:
    """`key  value` lines; a long value wraps under itself, breaking only at spaces."""
    width = max(len(k) for k, _ in pairs)
    lines = []
    for key, value in pairs:
        head = " " * indent + key.ljust(width + 2)
        lines += textwrap.wrap(
            value,
            WIDTH,
            initial_indent=head,
            subsequent_indent=" " * len(head),
            break_long_words=False,
            break_on_hyphens=False,
        ) or [head.rstrip()]
    return lines


def _numa_words(numa: Any) -> str:
    if numa is None:
        return "N/A"
    return ",".join(map(str, numa)) if isinstance(numa, list) else str(numa)


def topology_text(inv: Hardware) -> str:
    """The GPU matrix in nvidia-smi topo -m words, each GPU's NUMA node, and a legend.

    The CPU affinity lists (as long as a machine makes them) are in the NUMA section instead of
    in the matrix, so 8 GPUs fit in 80 columns.
    """
    if not inv.gpus or inv.topology is None:
        return "No GPUs: no topology to show."
    labels, matrix = inv.topology.labels, inv.topology.matrix
    rows = [["", *labels, "NUMA"]]
    for g, label, row in zip(inv.gpus, labels, matrix, strict=True):
        rows.append([label, *row, _numa_words(g.numa_node)])
    lines = _columns(rows)
    legend = inv.topology.legend
    width = max(len(k) for k in legend) if legend else 0
    lines += ["", "Legend:"]
    for k, v in legend.items():
        lines += textwrap.wrap(
            v, WIDTH, initial_indent=f"  {k.ljust(width)}  ", subsequent_indent=" " * (width + 4)
        )
    return "\n".join(lines)


def peer_access_text(inv: Hardware) -> str:
    """CUDA's peer-access answers as a matrix of yes/no (or why there are none)."""
    peer = inv.peer_access
    if peer is None:
        why = inv.peer_access_note or "no CUDA"
        return textwrap.fill(f"Peer access (CUDA): not measured ({why}).", WIDTH)
    labels = inv.topology.labels if inv.topology else []
    rows = [["", *labels]]
    for label, row in zip(labels, peer.matrix, strict=True):
        rows.append([label, *("X" if v is None else "yes" if v else "no" for v in row)])
    return "\n".join([*textwrap.wrap(f"Peer access ({peer.source}):", WIDTH), *_columns(rows)])


def _gib(n: int | None) -> str:
    return "?" if not n else f"{n / 2**30:,.0f} GiB"


def _pcie(p: Pcie | None) -> str:
    if p is None or p.gen_max is None:
        return "?"
    text = f"Gen{p.gen_current} x{p.width_current} (max Gen{p.gen_max} x{p.width_max})"
    if p.gen_gpu_max and p.gen_max and p.gen_gpu_max > p.gen_max:
        text += f", GPU can Gen{p.gen_gpu_max}"
    return text


def _nvlink(g: Gpu) -> str:
    links: list[NvLink] = g.nvlinks or []
    if not links:
        return "none"
    active = [n for n in links if n.active]
    first = active[0] if active else links[0]
    parts = [f"{len(active)}/{len(links)} up"]
    if first.version:
        parts.append(f"v{first.version}")
    if first.speed_gbs:
        parts.append(f"{first.speed_gbs:g} GB/s each")
    remotes = sorted({n.remote or "?" for n in active})
    if remotes:
        parts.append("to " + ", ".join(remotes))
    return ", ".join(parts)


def _ecc(ecc: Ecc | None) -> str:
    mode = ecc.mode_current if ecc else None
    if ecc is None or mode is None:
        return "not reported"
    if not mode:
        return "off"
    counts = [
        f"{n} {what}"
        for n, what in (
            (ecc.volatile_uncorrected, "uncorrected since boot"),
            (ecc.aggregate_uncorrected, "uncorrected ever"),
        )
        if n is not None
    ]
    return "on" + (f", {', '.join(counts)}" if counts else "")


def _power(g: Gpu) -> str:
    cap, default = g.power_limit_w, g.power_default_limit_w
    if not cap:
        return "?"
    text = f"{cap:g} W"
    if default and default != cap:
        text += f" (default {default:g} W)"
    return text


def gpu_text(g: Gpu) -> str:
    """One GPU as a block: its name whole on the first line, then one fact a line."""
    clocks = g.clocks_max_mhz or {}
    pairs = [
        ("UUID", str(g.uuid)),
        ("Bus id", str(g.pci_bus_id)),
        ("Memory", _gib(g.memory_total_bytes)),
        ("PCIe", _pcie(g.pcie)),
        ("NVLink", _nvlink(g)),
        ("NUMA node", _numa_words(g.numa_node)),
        ("Power cap", _power(g)),
        ("Max clocks", f"SM {clocks.get('sm')} MHz, memory {clocks.get('mem')} MHz"),
        ("Temperature", "?" if g.temperature_c is None else f"{g.temperature_c} C"),
        ("ECC", _ecc(g.ecc)),
    ]
    if g.gpu_numa_node_id is not None:
        pairs.insert(6, ("GPU NUMA id", str(g.gpu_numa_node_id)))
    if g.compute_capability:
        pairs.insert(3, ("Compute", f"capability {g.compute_capability}"))
    return "\n".join([f"GPU {g.index}: {g.name}", *_fields(pairs)])


def host_text(inv: Hardware) -> str:
    h = inv.host or Host()
    container = h.container
    shm = h.shm_bytes
    pairs = [
        ("CPU", str(h.cpu_model)),
        (
            "Cores",
            f"{h.sockets} socket(s), {h.physical_cores} cores, "
            f"{h.logical_cpus} threads (this process may use {h.allowed_cpus})",
        ),
        ("Memory", _gib(h.mem_total_bytes)),
        ("/dev/shm", "?" if shm is None else f"{shm / 2**20:,.0f} MiB"),
        ("OS", f"{h.os}, kernel {h.kernel}, {h.arch}"),
        (
            "Container",
            f"{container.runtime} ({', '.join(container.evidence)})"
            if container and container.detected
            else "none detected",
        ),
        ("Hypervisor", "; ".join(vm) if (vm := h.virtual_machine()) else "none detected"),
    ]
    return "\n".join(["Host", *_fields(pairs)])


def numa_text(inv: Hardware) -> str:
    """Each NUMA node's CPUs and the GPUs attached to it."""
    nodes = inv.host.numa_nodes if inv.host else []
    if not nodes:
        return "NUMA: not reported"
    pairs = []
    for n in nodes:
        near = [f"GPU{g.index}" for g in inv.gpus if str(g.numa_node) == str(n.id)]
        text = f"CPUs {n.cpus}"
        if n.mem_total_bytes:
            text += f", {_gib(n.mem_total_bytes)}"
        if inv.gpus:
            text += f"; GPUs: {', '.join(near) or 'none'}"
        pairs.append((f"node {n.id}", text))
    return "\n".join(["NUMA", *_fields(pairs)])


def links_text(inv: Hardware) -> str:
    """NVLink per GPU, one line each (the matrix says which pairs, this says how many links)."""
    if not any(g.nvlinks for g in inv.gpus):
        return "NVLink: none on any GPU"
    pairs = [(f"GPU{g.index}", _nvlink(g)) for g in inv.gpus]
    return "\n".join(["NVLink", *_fields(pairs)])


def placement_text(inv: Hardware) -> str:
    sets = inventory.suggest_gpu_sets(inv, 2)
    if len(sets) < 2:
        return textwrap.fill(
            "Placement: every GPU pair has the same link; placement variants would not differ."
            if sets
            else "Placement: fewer than 2 GPUs.",
            WIDTH,
        )
    lines = ["Placement variants (GPU pairs that differ in topology):"]
    for s in sets:
        lines.append(f"  gpu_ids: {s['gpu_ids']}  {s['link']:<5} {s['why']}")
    return "\n".join(lines)


def inspect_text(inv: Hardware) -> str:
    """The whole `kit inspect` text: summary, host, GPUs, topology, links, NUMA, peer access."""
    parts = [textwrap.fill(inv.summary or "", WIDTH), host_text(inv)]
    if not inv.gpus:
        why = inv.nvml_error or "NVML reports none"
        return "\n\n".join([*parts, textwrap.fill(f"No GPUs: {why}", WIDTH), numa_text(inv)])
    driver = inv.driver or Driver()
    parts.append(
        f"Driver {driver.version}, CUDA driver {driver.cuda_driver_version}, "
        f"NVML {driver.nvml_version}"
    )
    parts += [gpu_text(g) for g in inv.gpus]
    parts += [
        "Topology (nvidia-smi topo -m words)\n" + topology_text(inv),
        links_text(inv),
        numa_text(inv),
        peer_access_text(inv),
        placement_text(inv),
    ]
    return "\n\n".join(parts)


def render(inv: Hardware, console: Console) -> None:
    """Print the inventory for a person; colour only where the console is a terminal."""
    text = Text(inspect_text(inv))
    for pattern, style in LINK_STYLES.items():
        text.highlight_regex(pattern, style)
    # soft_wrap: the lines are already at most 80 columns; rich must not re-wrap them
    console.print(text, soft_wrap=True, highlight=False)


MAX_SNAPSHOT_BYTES = 64 << 20  # a large machine's snapshot is a few hundred KiB


def load_snapshot(path: Path) -> dict[str, Any]:
    """A recorded snapshot: a regular file (never a device or a FIFO, which would be read
    without end or block), of at most MAX_SNAPSHOT_BYTES, holding JSON."""
    try:
        raw = read_bytes(path, limit=MAX_SNAPSHOT_BYTES)
    except InputError as exc:
        raise InputError(f"--from-snapshot {exc}") from None
    try:
        data = json.loads(raw.decode("utf-8"))
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
    if snapshot_out:  # before the work: never a link, a device, a FIFO or a file in a bundle
        outputs.check_file(snapshot_out, "--snapshot")
    snap = load_snapshot(from_snapshot) if from_snapshot else inventory.collect_snapshot()
    if snapshot_out:
        outputs.write_text(snapshot_out, json.dumps(snap, indent=1) + "\n", "--snapshot")
    inv = inventory.build_inventory(snap)
    if json_out:
        out = console.file if console else sys.stdout
        out.write(json.dumps(inv, indent=2) + "\n")
        return 0
    render(Hardware.model_validate(inv), console or terminal.console(stderr=False))
    return 0
