"""Trust checks: everything that affects how far a bundle's numbers can be trusted."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kit.model import Environment, Hardware, Results, RunResult
from kit.model.hardware import Ecc, uncorrected_words
from kit.report.analysis.model import Benchmark, is_ok, p2p_disabled
from kit.report.analysis.training import DRIFT_THRESHOLD, drifting
from kit.report.facts.window import POWER_CAP_REASON
from kit.shared.nccl_log import contradiction
from kit.stats.spread import cv_words


def nccl_contradiction(run: RunResult) -> str | None:
    """One line when the NCCL transport recorded for the run contradicts its variant.

    Judged again from the recorded transports by the same rule the run was judged by, so a
    bundle edited by hand or made by an older kit cannot carry a stale verdict into the report.
    """
    counts = run.nccl.transports if run.nccl is not None else None
    if not counts:
        return None
    single_node = len(run.nodes or []) < 2
    why = contradiction(counts, p2p_disabled(run), single_node)
    return f"{run.run_id}: {why}" if why else None


def transports(bench: Benchmark) -> dict[str, list[str]]:
    """Per variant: the NCCL transports its finished runs used, from NCCL's own log."""
    out: dict[str, list[str]] = {}
    for v in bench.variants:
        seen: set[str] = set()
        for r in v.ok:
            seen.update(r.nccl.transports if r.nccl is not None else [])
        if seen:
            out[v.name] = sorted(str(x) for x in seen)
    return out


@dataclass
class Finding:
    level: str  # "error" (a number is missing or wrong) | "warn" (a number is less sure)
    title: str
    detail: str = ""


Found = list[Finding]


def findings(
    results: Results, benches: list[Benchmark], environment: Environment | None = None
) -> list[Finding]:
    """Everything that affects how far the numbers can be trusted, worst first: each check of
    CHECKS in turn. Pinned as environment.json's record says by the one rule
    (Environment.pin), else as results.json."""
    return [f for check in CHECKS for f in check(results, benches, environment)]


def _unfinished(results: Results, benches: list[Benchmark], env: Environment | None) -> Found:
    """Runs that did not finish, planned runs that never ran, a bundle left incomplete."""
    runs, out = results.runs, []
    failed = [r for r in runs if not is_ok(r)]
    if failed:
        names = ", ".join(f"{r.run_id} ({r.status})" for r in failed)
        title = f"{len(failed)} of {len(runs)} runs did not finish; they contribute no number"
        out.append(Finding("error", title, names))
    gone = results.planned_runs - len(runs)
    if gone > 0:
        title = f"{gone} planned run{'s' if gone > 1 else ''} never ran"
        out.append(Finding("error", title, f"the bundle's status is {results.status!r}"))
    elif results.status != "complete":
        out.append(Finding("error", f"the bundle is {results.status}, not complete"))
    return out


def _wrong(results: Results, benches: list[Benchmark], env: Environment | None) -> Found:
    """A collective that returned wrong elements."""
    return [
        Finding(
            "error",
            f"{b.label}: {b.wrong_total} wrong elements (#wrong > 0)",
            "the collective returned wrong results: its bandwidth is not trustworthy",
        )
        for b in benches
        if b.wrong_total
    ]


def _transport(results: Results, benches: list[Benchmark], env: Environment | None) -> Found:
    """The NCCL transport against the variant: contradicted, or never printed."""
    runs, out = [r for r in results.runs if is_ok(r)], []
    contradictions = [c for r in runs if (c := nccl_contradiction(r))]
    if contradictions:
        title = "the NCCL transport contradicts the variant"
        out.append(Finding("error", title, "; ".join(contradictions)))
    unproven = [
        r.run_id
        for r in runs
        if r.nccl is not None
        and str(r.nccl.verdict or "").startswith("NCCL printed no connection lines")
        and (r.world_size or 2) > 1  # one process: no peer to connect to
    ]
    if unproven:
        title = "the NCCL transport was not recorded: NCCL printed no connection lines"
        out.append(Finding("warn", title, ", ".join(unproven)))
    return out


def _scale(results: Results, benches: list[Benchmark], env: Environment | None) -> Found:
    """A smoke run, or a run on the CPU: numbers that do not measure the GPUs."""
    out = []
    if results.smoke:
        title = "smoke scale: sizes were shrunk to check the method"
        out.append(Finding("warn", title, "these numbers do not measure the hardware"))
    if results.device == "cpu":
        title = "ran on the CPU (gloo), not on GPUs"
        out.append(Finding("warn", title, "nothing here describes GPU or NVLink performance"))
    return out


def _unpinned(results: Results, benches: list[Benchmark], env: Environment | None) -> Found:
    """An image not pinned by digest, or the host's own packages."""
    pinned, how = env.pin() if env is not None else (results.pinned, None)
    if not pinned and env is not None and env.in_container() and how:
        base = (env.build_args or {}).get("BASE_IMAGE") or env.base_image
        return [
            Finding(
                "warn",
                f"image not pinned: {how} ({base or 'unknown'})",
                "another machine's image of that name may hold other files; name the base by "
                "digest (--base-image IMAGE@sha256:...) or carry the image itself (kit export, "
                "then --image-archive)",
            )
        ]
    if not pinned:
        return [
            Finding(
                "warn",
                "unpinned environment: the host's own Python packages",
                "another machine may not have the same versions; use the docker "
                "runtime for a pinned image",
            )
        ]
    return []


def _slowed(results: Results, benches: list[Benchmark], env: Environment | None) -> Found:
    """Runs slowed for a reason other than the power cap (the GPUs' normal operation, sized
    beside the figures instead)."""
    throttled: dict[str, list[str]] = {}
    for r in results.runs:
        tel = r.telemetry
        if is_ok(r) and tel is not None and tel.throttled:
            for reason in tel.throttle_reasons_seen or ["slowdown"]:
                throttled.setdefault(reason, []).append(r.run_id)
    slowed = {k: v for k, v in throttled.items() if k != POWER_CAP_REASON}
    if not slowed:
        return []
    n = len({x for ids in slowed.values() for x in ids})
    were = "run was" if n == 1 else "runs were"
    return [
        Finding(
            "warn",
            f"{n} {were} slowed while busy by a reason other than the power cap: "
            + ", ".join(f"{k} in {len(v)}" for k, v in slowed.items()),
            "thermal or hardware slowdown is not normal operation: these figures read "
            "below what the GPUs deliver; the power cap (SwPowerCap) is sized where the "
            "figures are",
        )
    ]


def _noisy(results: Results, benches: list[Benchmark], env: Environment | None) -> Found:
    """Figures whose runs spread more than their benchmark's CV threshold."""
    noisy = []
    for b in benches:
        mine = [
            f"{v} {row.label} {cv_words(row.summary.cv, b.cv_threshold, 1)}"
            for rows in b.metrics.values()
            for v, row in rows.items()
            if row.noisy and row.summary is not None and row.summary.cv is not None
        ]
        if mine:
            noisy.append(f"{b.label}: " + ", ".join(mine))
    if not noisy:
        return []
    over = " / ".join(sorted({f"{b.cv_threshold:.0%}" for b in benches}))
    return [
        Finding("warn", f"noisy results: coefficient of variation over {over}", "; ".join(noisy))
    ]


def _drift(results: Results, benches: list[Benchmark], env: Environment | None) -> Found:
    """Training windows whose step time still moved between their halves."""
    drift = [d for b in benches for d in drifting(b)]
    if not drift:
        return []
    return [
        Finding(
            "warn",
            "not at steady state: the step time changed by more than "
            f"{DRIFT_THRESHOLD:.0%} between the two halves of the timed window",
            "; ".join(drift) + ". More warm-up steps or a longer window would measure "
            "the settled pace.",
        )
    ]


def _preflight(results: Results, benches: list[Benchmark], env: Environment | None) -> Found:
    """What the preflight found, at its own level."""
    return [Finding(f.level, f"preflight {f.check}: {f.message}") for f in results.preflight]


CHECKS: tuple[Callable[[Results, list[Benchmark], Environment | None], Found], ...] = (
    _unfinished,
    _wrong,
    _transport,
    _scale,
    _unpinned,
    _slowed,
    _noisy,
    _drift,
    _preflight,
)
"""The trust checks in the order the report lists their findings: what is missing or wrong
(errors) first, then what makes a number less sure."""


def trust_facts(results: Results, hardware: Hardware) -> list[tuple[str, str]]:
    """The machine's state a buyer checks before trusting a figure: the preflight outcome,
    ECC, VBIOS, driver, and the kit that measured (version and commit)."""
    checks = results.preflight
    errors = sum(1 for f in checks if f.level == "error")
    multinode = bool(hardware.nodes) or results.runtime == "multinode"
    preflight = (
        "not run: multi-node, the driver's machine is not one of the nodes (skipped is not "
        "passed; each node's inventory is under Hardware)"
        if not checks and multinode
        else "passed, nothing flagged"
        if not checks
        else f"{len(checks)} finding{'s' if len(checks) > 1 else ''}"
        + (f", {errors} fatal" if errors else ", none fatal")
        + ": "
        + "; ".join(f"{f.check}: {f.message}" for f in checks)
    )
    gpus = hardware.gpus
    out = [("preflight", preflight)]
    if gpus:
        eccs = [g.ecc or Ecc() for g in gpus]
        modes = {e.mode_current for e in eccs}
        ecc = (
            "on"
            if modes == {1}
            else "off"
            if modes == {0}
            else "not recorded"
            if modes == {None}
            else "mixed"
        )
        if modes != {None}:
            ecc += f", {uncorrected_words(eccs)}"
        out.append(("ECC", ecc))
        vbios = sorted({g.vbios_version for g in gpus if g.vbios_version})
        out.append(("VBIOS", ", ".join(vbios) if vbios else "not recorded by this inventory"))
        if hardware.driver and hardware.driver.version:
            out.append(("driver", hardware.driver.version))
    out.append(("kit", f"{results.kit_version or '?'}, commit {commit_words(results)}"))
    return out


def commit_words(results: Results) -> str:
    """The kit's commit, or why there is none: a bundle whose results.json has no kit_commit
    field was made before kit recorded it; one with the field empty was made by a kit that was
    not a git checkout (a copied tree, an installed package)."""
    if results.kit_commit:
        return str(results.kit_commit)
    if "kit_commit" in results.model_fields_set:
        return "not recorded (the kit that ran was not a git checkout)"
    return "not recorded (bundle made before kit recorded it)"
