"""Preflight: is this machine fit to measure, before any benchmark spends its time?

Pure functions over the inventory (collected just before the runs, so its live fields -
processes, temperature, throttle reasons, ECC counters, PCIe link state - are current).
Each finding is {"level": "error"|"warn", "check": name, "message": one line}; the options
decide the level: `strict` makes every warning fatal, `allow` names checks that never are.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kit.io.errors import KitError
from kit.model.hardware import Ecc, Gpu, Hardware, Pcie, RemappedRows, RetiredPages
from kit.recipe import Recipe
from kit.shared.p2p import p2p_off
from kit.shared.throttle import SLOWDOWN_MASK, decode_reasons

CHECKS = (
    "gpu-count",
    "gpu-busy",
    "shm-size",
    "pcie-link",
    "ecc",
    "gpu-temperature",
    "gpu-throttle",
)

# Throttle reasons that slow a benchmark down. GpuIdle, application/display clock settings and
# SyncBoost are normal states, not faults.
SLOWDOWN_REASONS = set(decode_reasons(SLOWDOWN_MASK))

GIB = 2**30
MIB = 2**20


@dataclass(frozen=True)
class PreflightOptions:
    """What is fatal. `allow` entries are names from CHECKS."""

    strict: bool = False
    allow: frozenset[str] = field(default_factory=frozenset)
    max_temperature_c: float = 80.0  # an idle GPU this hot is cooled badly or has a busy neighbour
    min_shm_bytes: int = 1 * GIB  # NVIDIA's advice for containers running NCCL/PyTorch
    fatal_shm_bytes: int = 256 * MIB  # below this NCCL's SHM transport fails to map its buffers
    busy_utilization_pct: int = 10

    def __post_init__(self) -> None:
        unknown = sorted(set(self.allow) - set(CHECKS))
        if unknown:
            raise KitError(
                f"preflight: unknown check(s) in allow: {', '.join(unknown)} "
                f"(allowed: {', '.join(CHECKS)})",
                exit_code=2,
            )


def check_allowances(allow: frozenset[str] | tuple[str, ...], device: str, nodes: bool) -> None:
    """--allow names checks this run has: every check is a check of this machine's GPUs
    (run_checks), so a CPU run, or one on other nodes, has none, and an allowance would mean
    nothing (refused like any option that cannot apply)."""
    if not allow:
        return
    given = ",".join(allow)
    if device != "cuda":
        raise KitError(
            f"--allow {given}: a {device} run has no preflight checks (they are GPU checks)",
            exit_code=2,
        )
    if nodes:
        raise KitError(
            f"--allow {given}: a run on --nodes has no preflight checks on this machine",
            exit_code=2,
        )


class PreflightError(KitError):
    """Fatal preflight findings: the run was refused before it started."""

    exit_code = 1


def _finding(level: str, check: str, message: str) -> dict[str, str]:
    return {"level": level, "check": check, "message": message}


def _fmt_bytes(n: int) -> str:
    return f"{n / GIB:.1f} GiB" if n >= GIB else f"{n / MIB:.0f} MiB"


def check_gpu_count(inv: Hardware, gpus_needed: int, gpu_ids: list[int] | None) -> list:
    have = len(inv.gpus)
    out = []
    if have < gpus_needed:
        why = f" ({inv.nvml_error})" if not inv.gpus and inv.nvml_error else ""
        out.append(
            _finding(
                "error",
                "gpu-count",
                f"the recipe needs {gpus_needed} GPU(s), this machine has {have}{why}",
            )
        )
    missing = sorted({i for i in gpu_ids or [] if i >= have or i < 0})
    if missing:
        out.append(
            _finding(
                "error",
                "gpu-count",
                f"a variant asks for GPU id(s) {missing}, this machine has ids 0-{have - 1}"
                if have
                else f"a variant asks for GPU id(s) {missing}, this machine has no GPU",
            )
        )
    return out


def check_gpu_busy(g: Gpu, busy_pct: int) -> list:
    procs = g.processes or []
    label = f"GPU {g.index}"
    if procs:
        shown = ", ".join(
            f"pid {p.pid}"
            + (f" ({_fmt_bytes(p.used_memory_bytes)})" if p.used_memory_bytes else "")
            for p in procs[:3]
        )
        more = f" and {len(procs) - 3} more" if len(procs) > 3 else ""
        return [
            _finding(
                "error",
                "gpu-busy",
                f"{label} already runs {len(procs)} process(es): {shown}{more}; "
                "a busy GPU slows every rank",
            )
        ]
    util = g.utilization.gpu if g.utilization else None
    if util is not None and util >= busy_pct:
        return [
            _finding(
                "warn",
                "gpu-busy",
                f"{label} is {util}% busy with no process visible here "
                "(another container or VM may be using it)",
            )
        ]
    return []


def check_shm(
    shm_bytes: int | None, needs_shm: bool, options: PreflightOptions, where: str
) -> list:
    if not needs_shm or shm_bytes is None or shm_bytes >= options.min_shm_bytes:
        return []
    level = "error" if shm_bytes < options.fatal_shm_bytes else "warn"
    return [
        _finding(
            level,
            "shm-size",
            f"{where} is {_fmt_bytes(shm_bytes)}; the no-P2P variant sends through NCCL's SHM "
            f"transport, which wants at least {_fmt_bytes(options.min_shm_bytes)} "
            "(docker: --shm-size=1g or --ipc=host)",
        )
    ]


def check_pcie(g: Gpu) -> list:
    """A link trained below its maximum. Width is always a fault; generation only under load:
    idle GPUs drop to Gen1 to save power and come back up when they work."""
    p = g.pcie or Pcie()
    label = f"GPU {g.index}"
    out = []
    wc, wm = p.width_current, p.width_max
    if wc and wm and wc < wm:
        out.append(
            _finding(
                "warn",
                "pcie-link",
                f"{label} PCIe link runs x{wc} of x{wm}: reseat the card or check the slot/riser",
            )
        )
    gc, gm = p.gen_current, p.gen_max
    idle = "GpuIdle" in (g.throttle_reasons or [])
    if gc and gm and gc < gm and not idle:
        out.append(
            _finding(
                "warn",
                "pcie-link",
                f"{label} PCIe link runs Gen{gc} of Gen{gm} while not idle "
                "(a downtrained link: check BIOS PCIe settings, riser, slot)",
            )
        )
    return out


def check_ecc(g: Gpu) -> list:
    label = f"GPU {g.index}"
    out = []
    ecc = g.ecc or Ecc()
    if (ecc.volatile_uncorrected or 0) > 0:
        out.append(
            _finding(
                "error",
                "ecc",
                f"{label} has {ecc.volatile_uncorrected} uncorrected ECC error(s) since boot",
            )
        )
    elif (ecc.aggregate_uncorrected or 0) > 0:
        out.append(
            _finding(
                "warn",
                "ecc",
                f"{label} has {ecc.aggregate_uncorrected} uncorrected ECC error(s) "
                "over its lifetime",
            )
        )
    rows = g.remapped_rows or RemappedRows()
    if rows.failure:
        out.append(_finding("error", "ecc", f"{label} row remapping failed: the GPU needs service"))
    elif rows.pending:
        out.append(
            _finding(
                "warn", "ecc", f"{label} has a row remapping pending: reset the GPU to apply it"
            )
        )
    pages = g.retired_pages or RetiredPages()
    if pages.pending:
        out.append(
            _finding(
                "warn", "ecc", f"{label} has a page retirement pending: reset the GPU to apply it"
            )
        )
    if pages.dbe:
        out.append(
            _finding(
                "warn",
                "ecc",
                f"{label} has {pages.dbe} page(s) retired for double-bit ECC errors",
            )
        )
    return out


def check_thermal(g: Gpu, options: PreflightOptions) -> list:
    label = f"GPU {g.index}"
    out = []
    temp = g.temperature_c
    if temp is not None and temp >= options.max_temperature_c:
        slow = g.temperature_slowdown_c
        extra = f", it slows down at {slow} C" if slow else ""
        out.append(
            _finding(
                "warn",
                "gpu-temperature",
                f"{label} is already at {temp} C before the run "
                f"(limit {options.max_temperature_c:g} C{extra})",
            )
        )
    reasons = sorted(set(g.throttle_reasons or []) & SLOWDOWN_REASONS)
    if reasons:
        out.append(
            _finding(
                "warn",
                "gpu-throttle",
                f"{label} clocks are held down by {', '.join(reasons)} before the run",
            )
        )
    return out


def run_checks(
    inv: Hardware,
    *,
    gpus_needed: int,
    gpu_ids: list[int] | None = None,
    needs_shm: bool = False,
    shm_bytes: int | None = None,
    shm_where: str | None = None,
    device: str = "cuda",
    options: PreflightOptions | None = None,
) -> list[dict[str, str]]:
    """All findings for a planned run, with levels set by `options`.

    gpus_needed: processes per run. gpu_ids: every GPU id any variant pins (None: the first
    `gpus_needed`). needs_shm: a no-P2P variant is planned. shm_bytes: the /dev/shm the runs
    will see (the container's, for docker); default the host's from the inventory.
    """
    options = options or PreflightOptions()
    if device != "cuda":
        return []
    findings = check_gpu_count(inv, gpus_needed, gpu_ids)
    used = sorted(set(gpu_ids or range(min(gpus_needed, len(inv.gpus)))))
    for g in inv.gpus:
        if g.index not in used:
            continue
        findings += check_gpu_busy(g, options.busy_utilization_pct)
        findings += check_pcie(g)
        findings += check_ecc(g)
        findings += check_thermal(g, options)
    if shm_bytes is None:
        shm_bytes = inv.host.shm_bytes if inv.host else None
        shm_where = shm_where or "/dev/shm on this host"
    findings += check_shm(shm_bytes, needs_shm, options, shm_where or "/dev/shm")
    return apply_options(findings, options)


def apply_options(findings: list[dict[str, str]], options: PreflightOptions) -> list:
    """strict: warnings become errors. allow: those checks are only warnings."""
    out = []
    for f in findings:
        level = f["level"]
        if options.strict:
            level = "error"
        if f["check"] in options.allow:
            level = "warn"
        out.append({**f, "level": level})
    return out


def raise_if_fatal(findings: list[dict[str, str]]) -> None:
    """Refuse the run on any error-level finding, with one line naming each and the way out."""
    errors = [f for f in findings if f["level"] == "error"]
    if not errors:
        return
    checks = sorted({f["check"] for f in errors})
    detail = "; ".join(f"{f['check']}: {f['message']}" for f in errors[:3])
    more = f" (+{len(errors) - 3} more)" if len(errors) > 3 else ""
    raise PreflightError(
        f"preflight refused the run: {detail}{more}. To run anyway: --allow {','.join(checks)}"
    )


def check_recipe(
    recipe: Recipe, device: str, hardware: Hardware, options: PreflightOptions
) -> list[dict[str, Any]]:
    """The checks a recipe needs on this machine: its GPUs, and SHM when a variant turns P2P off.

    `hardware`: this machine's inventory (kit.inventory.measure()), the one the engine writes
    as hardware.json."""
    variants = recipe.resolved_variants()
    ids = {i for v in variants for i in (v.gpu_ids or [])}
    if any(not v.gpu_ids for v in variants):
        ids |= set(range(recipe.gpus))
    return run_checks(
        hardware,
        gpus_needed=recipe.gpus,
        gpu_ids=sorted(ids),
        needs_shm=any(p2p_off(v.env) for v in variants),
        device=device,
        options=options,
    )
