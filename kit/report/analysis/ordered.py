"""Page 1's first question: is this the machine that was ordered? The machine's identity and a
checklist, each line a tick or a cross with its evidence from hardware.json and the runs
(never assumed): GPU model and count, memory, power limit against the default, NVLinks up of
the datasheet's count, PCIe generation and width, ECC, no thermal or hardware slowdown while
busy, preflight; where the bundle measured its copies (recipes/silicon.yaml), the weakest GPU's
memory and the weakest pair's NVLink bandwidth against the datasheet, as shares ("measured", no
verdict). A line the inventory could not read is neither: "not recorded". Given the
order (`kit report --ordered`, kit.report.facts.order), its count, model, memory and power come first,
checked against it; without one, the machine is checked against itself only, and page 1 says so."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kit.model import Environment, Hardware, Results
from kit.model.hardware import Gpu, uncorrected_words
from kit.report.analysis.silicon import Silicon
from kit.report.facts.efficiency import link_share
from kit.report.facts.order import MEMORY_SLACK, Order
from kit.report.facts.window import POWER_CAP_REASON, used_gpus
from kit.shared.gpu_specs import GpuSpec, spec_for
from kit.workloads.copy_bandwidth.matrix import off_diagonal

IDLE_OR_CAP = {"GpuIdle", POWER_CAP_REASON, "ApplicationsClocksSetting", "SwPowerCap"}
"""Clock reasons that are normal operation (idle, the board's power limit, a set clock)."""


def _line(ok: bool | None, item: str, evidence: str, mark: str | None = None) -> dict[str, Any]:
    return {
        "ok": ok,
        "mark": mark or {True: "yes", False: "NO", None: "not recorded"}[ok],
        "item": item,
        "evidence": evidence,
    }


def _same(values: list[Any]) -> bool:
    return len(set(values)) == 1


def identity(
    hardware: Hardware, environment: Environment | None, results: Results | None = None
) -> list[tuple[str, str]]:
    """(what, value) lines naming this machine: model and form factor, count, memory, power
    limit against the default, GPU UUIDs (and, given the results, that every one ran), the
    image it ran."""
    gpus = hardware.gpus
    if not gpus:
        return [("GPUs", "none recorded")]
    names = sorted({g.name or "?" for g in gpus})
    spec = spec_for(names[0])
    model = ", ".join(names) + (f" ({spec.key} in kit's datasheet table)" if spec else "")
    mems = sorted({g.memory_total_gib for g in gpus if g.memory_total_gib})
    limits = sorted({g.power_limit_w for g in gpus if g.power_limit_w})
    defaults = sorted({g.power_default_limit_w for g in gpus if g.power_default_limit_w})
    out = [("GPUs", f"{len(gpus)}x {model}")]
    if mems:
        out.append(("memory", " / ".join(f"{m:g} GiB" for m in mems) + " per GPU"))
    if limits:
        dflt = f" (default {' / '.join(f'{d:,.0f} W' for d in defaults)})" if defaults else ""
        out.append(("power limit", " / ".join(f"{x:,.0f} W" for x in limits) + dflt))
    uuids = [g.uuid for g in gpus if g.uuid]
    if uuids:
        every = results is not None and every_gpu_ran(hardware, results)
        out.append(("GPU UUIDs" + (", every one ran" if every else ""), ", ".join(uuids)))
    serials = [g.serial for g in gpus if g.serial]
    if serials:  # what an asset register and an RMA name a board by (absent: not answered)
        missing = len(gpus) - len(serials)
        out.append(
            (
                "serial numbers",
                ", ".join(serials)
                + (f" ({missing} GPU{'s' if missing > 1 else ''} without one)" if missing else ""),
            )
        )
    image = None
    if environment is not None:
        image = environment.image_id or environment.image_tag or environment.image
    out.append(("image", str(image) if image else "none: the host's own environment"))
    return out


def against_order(gpus: list[Gpu], order: Order) -> list[dict[str, Any]]:
    """The order's lines: count, model, memory and power rating, each against what was ordered."""
    out = []
    if order.count is not None:
        out.append(
            _line(
                len(gpus) == order.count,
                "GPU count as ordered",
                f"{len(gpus)} GPU{'s' if len(gpus) != 1 else ''}, {order.count} ordered",
            )
        )
    keys = sorted({(s.key if (s := spec_for(g.name)) else g.name or "?") for g in gpus})
    out.append(
        _line(
            keys == [order.spec.key],
            "GPU model as ordered",
            f"{', '.join(keys)} (kit's datasheet table), {order.spec.key} ordered",
        )
    )
    if order.memory_gb is not None:
        mems = [g.memory_total_gib for g in gpus]
        out.append(_every_gpu("memory as ordered", mems, "not recorded", order.memory_gb, _memory))
    if order.power_w is not None:
        rated = [g.power_default_limit_w for g in gpus]
        missing = "default power limit not recorded"
        out.append(_every_gpu("power rating as ordered", rated, missing, order.power_w, _power))
    return out


_Held = Callable[[list[float], float], tuple[bool, str]]
"""Every GPU's figure and the ordered one -> (as ordered?, the evidence)."""


def _every_gpu(
    item: str, values: list[float | None], missing: str, ordered: float, held: _Held
) -> dict[str, Any]:
    """An order line that needs every GPU's figure: "not recorded" where one GPU lacks it."""
    if None in values:
        return _line(None, item, missing)
    ok, evidence = held([v for v in values if v is not None], ordered)
    return _line(ok, item, evidence)


def _memory(mems: list[float], ordered_gb: float) -> tuple[bool, str]:
    """As sold or not: the smallest GPU's usable GiB at least the GB sold, less MEMORY_SLACK."""
    low = min(mems)
    return low >= ordered_gb * (1 - MEMORY_SLACK), (
        f"{low:g} GiB usable on the smallest GPU, {ordered_gb:g} GB ordered "
        f"(kit allows {MEMORY_SLACK:.0%} under it for what the driver keeps)"
    )


def _power(rated: list[float], ordered_w: float) -> tuple[bool, str]:
    found = sorted(set(rated))
    return found == [ordered_w], (
        f"{' / '.join(f'{r:,.0f} W' for r in found)} default limit, {ordered_w:,.0f} W ordered"
    )


def as_ordered(
    hardware: Hardware,
    results: Results,
    order: Order | None = None,
    silicon: Silicon | None = None,
) -> list[dict[str, Any]]:
    """The checklist: one line per property a buyer checks, against the order where given; the
    bundle's own copy bandwidths against the datasheet where it measured them (`silicon`)."""
    gpus = hardware.gpus
    if not gpus:
        return [_line(None, "GPUs", "no GPU recorded in hardware.json")]
    mine = bandwidths(silicon, hardware) if silicon is not None else []
    if order is not None:
        return against_order(gpus, order) + _checks(gpus, results, ordered=True) + mine
    return _checks(gpus, results, ordered=False) + mine


def bandwidths(s: Silicon, hardware: Hardware) -> list[dict[str, Any]]:
    """The memory and NVLink bandwidth the bundle measured (recipes/silicon.yaml, acceptance.yaml)
    against the datasheet (the report review, 2), from the silicon section's own figures: the
    weakest GPU's device-local copy traffic (read plus write) against HBM bandwidth, the weakest
    pair's copy-engine copy one way against NVLink per direction. A share, not a verdict: no
    published floor says how far under its datasheet a healthy part's copy reads (the GPUs
    against each other and against shipped references are judged in the per-GPU table)."""
    out = []
    hbm = [h for h in s.host if h.get("hbm_share") is not None]
    if hbm:
        low = min(hbm, key=lambda h: h["local_traffic_gbps"])
        out.append(
            _line(
                None,
                "memory bandwidth",
                # one line of page 1's table: the silicon section says what copy traffic is
                f"weakest GPU's copy traffic {low['local_traffic_gbps']:,.0f} GB/s (read plus "
                "write: twice the copy's rate), "
                f"{low['hbm_share']:.0%} of the datasheet's {low['hbm_gbs']:,.0f} GB/s",
                mark="measured",
            )
        )
    ce = next((m for m in s.matrices if m["key"] == "ce_one_way"), None)
    pairs = off_diagonal(ce["matrix"]) if ce else []
    share = link_share(min(pairs), hardware, "nvlink") if pairs else None
    if share:
        out.append(
            _line(
                None,
                "NVLink bandwidth",
                f"weakest pair's copy one way {min(pairs):,.0f} GB/s, "
                f"{share['share']:.0%} of the datasheet's {share['figure_gbs']:,.0f} GB/s",
                mark="measured",
            )
        )
    return out


def _checks(gpus: list[Gpu], results: Results, ordered: bool) -> list[dict[str, Any]]:
    """The lines that need no order: the machine against itself and its datasheet (its model
    and count only where no order's lines say them), one function of LINES each."""
    spec = spec_for(gpus[0].name or "?")
    lines = LINES[1:] if ordered else LINES
    return [line(gpus, spec, results) for line in lines]


def _model_line(gpus: list[Gpu], spec: GpuSpec | None, results: Results) -> dict[str, Any]:
    names = [g.name or "?" for g in gpus]
    same = _same(names)
    count = f"{len(gpus)}x {names[0]}" if same else "mixed: " + ", ".join(names)
    return _line(same, "GPU model and count", count)


def _memory_line(gpus: list[Gpu], spec: GpuSpec | None, results: Results) -> dict[str, Any]:
    mems = [g.memory_total_gib for g in gpus]
    if None in mems:
        return _line(None, "memory", "not recorded")
    if not _same(mems):
        return _line(False, "memory", " / ".join(sorted({f"{m:g} GiB" for m in mems})))
    if spec is not None and spec.memory_gb and _same([g.name or "?" for g in gpus]):
        # against the datasheet, by the order's rule (the report review, 2); said short: a
        # longer line moved page 1's last lines to page 2
        ok, _ = _memory([m for m in mems if m is not None], spec.memory_gb)
        sold = f"{spec.memory_gb:g} GB in the {spec.key} datasheet"
        return _line(ok, "memory", f"{mems[0]:g} GiB on every GPU, {sold}")
    return _line(True, "memory", f"{mems[0]:g} GiB on every GPU")


def _power_line(gpus: list[Gpu], spec: GpuSpec | None, results: Results) -> dict[str, Any]:
    pairs = [(g.power_limit_w, g.power_default_limit_w) for g in gpus]
    if any(a is None or b is None for a, b in pairs):
        return _line(None, "power limit", "limit or default not recorded")
    low = [f"GPU {g.index} {a:,.0f} W" for g, (a, b) in zip(gpus, pairs, strict=True) if a < b]
    words = (
        f"{pairs[0][0]:,.0f} W of {pairs[0][1]:,.0f} W default on every GPU"
        if not low
        else "below the default: " + ", ".join(low)
    )
    return _line(not low, "power limit at its default", words)


def _nvlink_line(gpus: list[Gpu], spec: GpuSpec | None, results: Results) -> dict[str, Any]:
    if any(g.nvlinks is None for g in gpus) and all(g.nvlink_active is None for g in gpus):
        return _line(None, "NVLinks up", "NVLink not read by this inventory")
    up = [
        sum(1 for x in g.nvlinks or [] if x.active)
        if g.nvlinks is not None
        else g.nvlink_active or 0
        for g in gpus
    ]
    want = spec.nvlink_links if spec else None
    ok = all(u == want for u in up) if want else (None if not up else _same(up))
    expect = f" of {want} ({spec.key} datasheet)" if spec and want else ""
    if len(gpus) == 1 and up == [0]:
        # one GPU (a one-GPU instance or VM): no peer to link to, so no link is expected up
        lone = f"0{expect}: one GPU in this machine, no peer to link to"
        return _line(None, "NVLinks up", lone, mark="not applicable")
    counts = (
        f"{up[0]}{expect} on every GPU"
        if _same(up)
        else ", ".join(f"GPU {g.index} {u}" for g, u in zip(gpus, up, strict=True)) + expect
    )
    return _line(ok, "NVLinks up", counts)


def _pcie_line(gpus: list[Gpu], spec: GpuSpec | None, results: Results) -> dict[str, Any]:
    pcie = [g.pcie for g in gpus]
    if any(p is None or p.width_current is None or p.gen_max is None for p in pcie):
        return _line(None, "PCIe generation and width", "not recorded")
    narrow = [
        f"GPU {g.index} x{p.width_current} of x{p.width_max}"
        for g, p in zip(gpus, pcie, strict=True)
        if p.width_max and p.width_current < p.width_max
    ]
    gen = max(p.gen_max for p in pcie)
    old = spec is not None and gen < spec.pcie_gen
    words = (
        f"gen {gen} x{pcie[0].width_current} on every GPU (the link's maximum: in use it "
        "drops at idle)"
    )
    if narrow:
        words = "narrower than the slot: " + ", ".join(narrow)
    elif spec is not None and old:
        words = f"gen {gen}, below the {spec.key}'s gen {spec.pcie_gen}"
    return _line(not narrow and not old, "PCIe generation and width", words)


def _ecc_line(gpus: list[Gpu], spec: GpuSpec | None, results: Results) -> dict[str, Any]:
    ecc = [g.ecc for g in gpus]
    if any(e is None or e.mode_current is None for e in ecc):
        return _line(None, "ECC", "not recorded")
    on = all(e.mode_current == 1 for e in ecc)
    errs = sum(e.volatile_uncorrected or 0 for e in ecc)
    words = f"{'enabled' if on else 'OFF'} on every GPU, {uncorrected_words(ecc)}"
    return _line(on and not errs, "ECC on, no uncorrected errors", words)


def _slowdown_line(gpus: list[Gpu], spec: GpuSpec | None, results: Results) -> dict[str, Any]:
    item = "no thermal or hardware slowdown"
    seen = [r.telemetry for r in results.runs if r.telemetry is not None]
    if not seen:
        return _line(None, item, "no telemetry recorded")
    reasons: dict[str, int] = {}
    for tel in seen:
        for x in tel.throttle_reasons_seen or []:
            if x not in IDLE_OR_CAP:
                reasons[x] = reasons.get(x, 0) + 1
    words = (
        "none in any run's telemetry (a power cap is normal operation)"
        if not reasons
        else ", ".join(f"{k} in {n} runs" for k, n in reasons.items())
    )
    return _line(not reasons, item, words)


def _preflight_line(gpus: list[Gpu], spec: GpuSpec | None, results: Results) -> dict[str, Any]:
    bad = [f for f in results.preflight if f.level == "error"]
    words = (
        "passed" + (f", {len(results.preflight)} note(s)" if results.preflight else "")
        if not bad
        else "; ".join(f"{f.check}: {f.message}" for f in bad)
    )
    return _line(not bad, "preflight", words)


LINES: tuple[Callable[[list[Gpu], GpuSpec | None, Results], dict[str, Any]], ...] = (
    _model_line,  # first: an order's own lines say the model and count instead
    _memory_line,
    _power_line,
    _nvlink_line,
    _pcie_line,
    _ecc_line,
    _slowdown_line,
    _preflight_line,
)
"""The checklist's lines that need no order, in page 1's order."""


def measured(hardware: Hardware, results: Results) -> tuple[list[Gpu], list[Gpu], str] | None:
    """(the GPUs of the box the runs drove, those they did not, how that is known): a recipe of
    2 GPUs on a 4-GPU box judged GPUs 0 and 1 only. The GPUs a run drove are those its telemetry
    names as its own (kit.report.facts.window.used_gpus); a bundle whose runs recorded none is counted
    by its processes (the launch hands a run the first GPUs). None on the CPU, for several nodes
    (each node's GPUs are its own) and without a finished GPU run."""
    gpus = hardware.gpus
    runs = [r for r in results.runs if r.status == "ok" and r.device == "cuda"]
    if not gpus or not runs or any(r.nodes for r in runs):
        return None
    by_uuid = {g.uuid: g for g in gpus if g.uuid}
    used = {g.index: g for r in runs for t in used_gpus(r) if (g := by_uuid.get(t.get("uuid")))}
    basis = "by the UUIDs the runs' telemetry names"
    if not used:
        n = max(r.world_size or 0 for r in runs)
        used = {g.index: g for g in gpus[:n]}
        basis = "counted by the processes started: no run's telemetry named its GPUs"
    others = [g for g in gpus if g.index not in used]
    return sorted(used.values(), key=lambda g: g.index), others, basis


def gpus_ran(hardware: Hardware, results: Results) -> str | None:
    """Page 1's line when the runs left GPUs of the box unmeasured: which ran, by index and
    UUID, and which did not. None when every GPU ran (the identity line says so beside the
    UUIDs: `every_gpu_ran`) or nothing is known."""
    found = measured(hardware, results)
    if found is None or not found[1]:
        return None
    used, others, basis = found
    return (
        f"{len(used)} of the box's {len(hardware.gpus)} GPUs ran: "
        f"{', '.join(_gpu_words(g) for g in used)} ({basis}). Not measured: "
        f"{', '.join(_gpu_words(g) for g in others)}; nothing on this page speaks for "
        f"{'it' if len(others) == 1 else 'them'} (recipes/acceptance.yaml runs every GPU)."
    )


def ran_of_box(hardware: Hardware, results: Results) -> str | None:
    """The words under the title when the runs left GPUs of the box unmeasured ("2 of its 4
    GPUs ran"): the title names the machine, and this says what of it the page measured."""
    found = measured(hardware, results)
    if found is None or not found[1]:
        return None
    return f"{len(found[0])} of its {len(hardware.gpus)} GPUs ran"


def every_gpu_ran(hardware: Hardware, results: Results) -> bool:
    found = measured(hardware, results)
    return found is not None and not found[1]


def _gpu_words(g: Gpu) -> str:
    return f"GPU {g.index}" + (f" ({g.uuid})" if g.uuid else "")
