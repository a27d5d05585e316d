"""The report's machine sections, as plain data for the templates: hardware, nodes,
environment and the manifest. Every field optional: a CPU-only bundle has few."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kit.bundle import MANIFEST, REPORT_FILES, SIGNATURE, sha256_file
from kit.io.safe import scan
from kit.model import Environment, Hardware, Results, RunFiles, RunResult, Software
from kit.model.base import Open
from kit.model.hardware import Detection, Gpu, Host, Pcie
from kit.report.plots import human_bytes as _human_bytes
from kit.shared.engines import Engine


def human_bytes(n: Any) -> str:
    return _human_bytes(float(n)) if isinstance(n, (int, float)) else str(n)


def hardware_view(hw: Hardware) -> dict[str, Any]:
    """What the Hardware section shows; every field optional (a CPU-only bundle has few)."""
    host = hw.host or Host()
    rows = [_gpu_row(g) for g in hw.gpus]
    topo = hw.topology
    peer = hw.peer_access
    return {
        "slice": slice_words(hw),
        "gpus": rows,
        "driver": hw.driver,
        "nvml_error": hw.nvml_error,
        "topology": topo if topo and len(topo.matrix) > 1 else None,
        "p2p_status": (hw.nvml_p2p_status or {}).get("read"),
        "peer_access": peer if peer and peer.matrix else None,
        "peer_access_note": hw.peer_access_note,
        "labels": (topo and topo.labels) or [f"GPU{g.index}" for g in hw.gpus],
        "host": _host_rows(hw, host),
        "numa": _numa_rows(host, rows),
        "numa_note": numa_note(host),
    }


def _gpu_row(g: Gpu) -> dict[str, Any]:
    """One GPU's row of the Hardware table ("-" where the inventory did not read a field)."""
    pcie = g.pcie or Pcie()
    return {
        "index": g.index,
        "name": g.name,
        "memory": f"{g.memory_total_gib:g} GiB" if g.memory_total_gib else "-",
        "cc": g.compute_capability or "-",
        "pcie": f"Gen{pcie.gen_current} x{pcie.width_current}" if pcie.gen_current else "-",
        "pcie_max": f"Gen{pcie.gen_max} x{pcie.width_max}" if pcie.gen_max else "-",
        "numa": g.numa_node if g.numa_node is not None else "-",
        "cpus": g.cpu_affinity or "-",
        "nvlink": _nvlink_words(g),
        "power": f"{g.power_limit_w:g} W" if g.power_limit_w else "-",
        "clocks": (g.clocks_max_mhz or {}).get("sm"),
        "bus": g.pci_bus_id or "-",
        "vbios": g.vbios_version or "-",
        "persistence": g.persistence_mode,
    }


def _nvlink_words(g: Gpu) -> str:
    """A GPU's active NVLinks: how many, their version and speed, and what each leads to."""
    links = [n for n in g.nvlinks or [] if n.active]
    if not links:
        return "none"
    remotes: dict[str, int] = {}
    for n in links:
        remotes[str(n.remote)] = remotes.get(str(n.remote), 0) + 1
    speed = next((n.speed_gbs for n in links if n.speed_gbs), None)
    version = next((n.version for n in links if n.version), None)
    words = f"{len(links)} active" + (f", NVLink {version}" if version else "")
    words += f", {speed:g} GB/s each" if speed else ""
    return words + " to " + ", ".join(f"{k} ({v})" for k, v in remotes.items())


def _numa_rows(host: Host, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each NUMA node: its CPUs, memory and the GPUs the GPU rows place on it."""
    gpus_of: dict[Any, list[str]] = {}
    for g in rows:
        gpus_of.setdefault(g["numa"], []).append(f"GPU{g['index']}")
    return [
        {
            "id": n.id,
            "cpus": n.cpus or "-",
            "mem": human_bytes(n.mem_total_bytes) if n.mem_total_bytes else "-",
            "gpus": ", ".join(gpus_of.get(n.id, [])) or "-",
        }
        for n in host.numa_nodes
    ]


def _host_rows(hw: Hardware, host: Host) -> list[tuple[str, Any]]:
    """The host's (what, value) lines, those the inventory read only."""
    container = host.container
    in_container = (
        None
        if container is None or not container.model_fields_set
        else (container.runtime or "yes")
        if container.detected
        else "no"
    )
    return [
        (k, v)
        for k, v in (
            ("CPU", host.cpu_model),
            ("sockets", host.sockets),
            ("physical cores", host.physical_cores),
            ("logical CPUs", host.logical_cpus or host.cpu_count),
            ("CPUs this process may use", host.allowed_cpus),
            ("memory", human_bytes(host.mem_total_bytes) if host.mem_total_bytes else None),
            ("/dev/shm", human_bytes(host.shm_bytes) if host.shm_bytes else None),
            ("OS", host.os),
            ("kernel", host.kernel),
            ("architecture", host.arch),
            ("hostname", host.hostname),
            ("inventory taken in a container", in_container),
            ("collected at", hw.collected_at),
        )
        if v not in (None, "")
    ]


def slice_words(hw: Hardware) -> list[tuple[str, str]]:
    """What kind of machine the inventory saw, when it is not bare metal: a virtual machine (the
    hypervisor flag, the DMI vendor, or a CPU model the hypervisor masked), a container the kit
    did not start, a CPU slice; (short words for page 1, the evidence) each, from what
    hardware.json records, nothing guessed."""
    host = hw.host or Host()
    out = []
    if why := host.virtual_machine():
        out.append(("a virtual machine", "a virtual machine (" + "; ".join(why) + ")"))
    container = host.container or Detection()
    if container.detected:
        kind = container.runtime or "a"
        evidence = ", ".join(container.evidence) or "its marks"
        out.append(
            (
                f"inside a {kind} container that this report calls the host",
                f"the inventory was taken inside a {kind} container ({evidence}); runs on the host "
                'runtime ran in that same container, so "host" in this report means that '
                "container, not bare metal",
            )
        )
    allowed, logical = host.allowed_cpus, host.logical_cpus
    if allowed and logical and allowed != f"0-{int(logical) - 1}":
        out.append(("a CPU slice", f"this process could use CPUs {allowed} of {logical}"))
    return out


def numa_note(host: Host) -> str:
    """Why the NUMA nodes' memory may not add up to the host's: say it, do not leave it bare."""
    nodes = [n.mem_total_bytes for n in host.numa_nodes]
    total = host.mem_total_bytes
    if not nodes or not all(nodes) or not total:
        return ""
    attached = sum(nodes)
    if attached >= 0.9 * total:
        return "Memory per node is the node's MemTotal (installed memory, not free memory)."
    return (
        f"Memory per node is the node's MemTotal as the kernel reports it "
        f"(/sys/devices/system/node/*/meminfo), not free memory. The nodes hold "
        f"{human_bytes(attached)} of the host's {human_bytes(total)} (/proc/meminfo); the rest "
        "is reported under no NUMA node (seen in some virtual machines)."
    )


def _speed(mbps: int | None) -> str:
    if not isinstance(mbps, int):
        return "speed unknown"
    return f"{mbps / 1000:g} Gb/s" if mbps >= 1000 else f"{mbps} Mb/s"


def nodes_view(hw: Hardware, results: Results) -> dict[str, Any] | None:
    """Multi-node bundles: each node (daemon, name, GPUs, network) and how the nodes talked.
    Each node's record is the worker's nodeinfo (kit.model.Hardware.nodes)."""
    if not hw.nodes:
        return None
    rows = []
    for n in hw.nodes:
        gpus = n.gpus or []
        names = sorted({str(g.name) for g in gpus})
        links = [
            f"{i.name} {i.address or ''} {_speed(i.speed_mbps)}"
            f" MTU {i.mtu or '?'} ({i.state or '?'})".replace("  ", " ")
            for i in n.interfaces
            if i.kind != "bridge" and (i.address or i.state == "up")
        ]
        links += [
            f"{p.device} port {p.port}: {p.rate or '?'} ({p.state or '?'}, {p.link_layer or '?'})"
            for p in n.infiniband
        ]
        rows.append(
            {
                "node": n.node,
                "host": n.host or "-",
                "hostname": n.hostname or "-",
                "gpus": f"{len(gpus)} x {', '.join(names)}" if gpus else "none",
                "cpus": n.cpus or "-",
                "memory": human_bytes(n.mem_total_bytes) if n.mem_total_bytes else "-",
                "network": links or ["no interface recorded"],
            }
        )
    transports: dict[str, list[str]] = {}
    for r in results.runs:
        used = r.network.transport if r.network else []
        if used:
            mine = transports.setdefault(r.variant or "?", [])
            mine += [t for t in used if t not in mine]
    return {"rows": rows, "transports": transports}


def _listed(record: Open | None, apart: str) -> list[tuple[str, Any]]:
    """The fields a record holds (Open.written), as a table lists them: none empty, and not
    `apart` (the part the page shows on its own)."""
    fields = record.written() if record is not None else []
    return [(k, v) for k, v in fields if k != apart and v not in (None, "")]


def _recorded_pin(recorded: Any, pinned: bool, how: str | None) -> Any:
    """environment.json's `pinned` as the run recorded it; where the report's rule reads the
    environment otherwise (a bundle written before the rule: an image FROM a local base was
    recorded as pinned), both, so the table never contradicts the sentence above it."""
    if bool(recorded) == pinned:
        return recorded
    rule = "pinned" if pinned else f"not pinned ({how})" if how else "not pinned"
    return f"{recorded} as recorded; by the rule this report applies: {rule}"


def axes_of(env: Environment | None, results: Results) -> tuple[str, str]:
    """(placement, engine) of the runs: environment.json's (kit.model.Environment.axes reads an
    older file's from its runtime and launcher); without one, results.json's runtime and Slurm
    launcher."""
    if env is not None:
        return env.axes()
    slurm = getattr(results, "slurm", None)
    launcher = getattr(slurm, "launcher", None)
    stand_in = {"runtime": results.runtime, "pinned": results.pinned, "launcher": launcher}
    return Environment.model_validate(stand_in).axes()


def placement_words(results: Results) -> str | None:
    """How page 1 and the Environment section name a placement the runtime's name does not say
    ("Kubernetes, 2 pods"); None for the others."""
    k8s = getattr(results, "k8s", None)
    if k8s is None:
        return None
    return f"Kubernetes, {k8s.pods} pod{'s' if k8s.pods != 1 else ''}"


def environment_view(
    env: Environment | None,
    results: Results,
    software: Software | None = None,
    runs: dict[str, RunFiles] | None = None,
) -> dict[str, Any]:
    """environment.json's fields (each runtime records its own), the versions read inside it,
    and the versions each run saw."""
    container = env.container if env else None
    versions = _listed(container, "packages")
    pinned, pinning = env.pin() if env else (results.pinned, None)
    fingerprint = [
        (k, _recorded_pin(v, pinned, pinning) if k == "pinned" else v)
        for k, v in _listed(env, "container")
    ]
    runtime = (env.runtime if env else None) or results.runtime
    # versions seen by the runs themselves: they must agree with each other
    seen: dict[str, set[str]] = {}
    for r in results.runs:
        for k, v in r.versions.items():
            if v is not None:
                seen.setdefault(k, set()).add(str(v))
    disagree = {k: sorted(v) for k, v in seen.items() if len(v) > 1}
    placement, engine = axes_of(env, results)
    return {
        "fingerprint": fingerprint,
        "versions": versions,
        "packages": sorted(((container and container.packages) or {}).items()),
        "in_container": engine != Engine.NONE,
        "engine": engine,
        # page 1 and the Environment section: "in a podman container", "in an apptainer container"
        "in_engine": f"in {'an' if engine[:1] in tuple('aeiou') else 'a'} {engine} container",
        "placement": placement,
        "runtime": placement_words(results) or runtime,
        # pinned by the one rule (kit.model.environment.pin_of): an image FROM a local base is not
        "pinned": pinned,
        "pinning": pinning,
        # the pinning words stand beside it on page 1 and in the section: not said twice
        "shown_name": env.shown_name(why=False) if env else None,
        "disagree": disagree,
        # a rerun's verdict on its environment against the bundle's (kit.env.check)
        "check": results.environment_check,
        # software.json: what the image holds, counted (the file lists it)
        "software": software.summary() if software else None,
        "loaded": loaded_summary([rf.result for rf in (runs or {}).values()]),
    }


def loaded_summary(runs: list[RunResult | None]) -> str | None:
    """ "up to 112 shared libraries and 301 top-level modules per run"; None when no run
    recorded what it loaded (each run's own result.json holds the lists, not results.json)."""
    records = [r.loaded for r in runs if r is not None and r.loaded is not None]
    if not records:
        return None
    libs = max(len(r.libraries) for r in records)
    mods = max(len(r.modules) for r in records)
    return f"up to {libs} shared libraries and {mods} top-level modules per run"


def manifest_view(root: Path) -> list[tuple[str, str, int]]:
    """(path, sha256, bytes) of every bundle file the report does not itself produce."""
    out = []
    for rel in scan(root).files:  # regular files only: no link is followed
        if rel in (MANIFEST, SIGNATURE) or rel in REPORT_FILES:
            continue
        p = root / rel
        out.append((rel, sha256_file(p), p.lstat().st_size))
    return out
