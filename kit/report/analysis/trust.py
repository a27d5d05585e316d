"""Trust checks: everything that affects how far a bundle's numbers can be trusted."""

from __future__ import annotations

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


def findings(
    results: Results, benches: list[Benchmark], environment: Environment | None = None
) -> list[Finding]:
    """Everything that affects how far the numbers can be trusted, worst first. Pinned as
    environment.json's record says by the one rule (Environment.pin), else as results.json."""
    out: list[Finding] = []
    runs = results.runs
    failed = [r for r in runs if not is_ok(r)]
    if failed:
        names = ", ".join(f"{r.run_id} ({r.status})" for r in failed)
        out.append(
            Finding(
                "error",
                f"{len(failed)} of {len(runs)} runs did not finish; they contribute no number",
                names,
            )
        )
    planned = results.planned_runs
    if planned > len(runs):
        gone = planned - len(runs)
        out.append(
            Finding(
                "error",
                f"{gone} planned run{'s' if gone > 1 else ''} never ran",
                f"the bundle's status is {results.status!r}",
            )
        )
    elif results.status != "complete":
        out.append(Finding("error", f"the bundle is {results.status}, not complete"))
    wrong = [(b.label, b.wrong_total) for b in benches if b.wrong_total]
    for label, n in wrong:
        out.append(
            Finding(
                "error",
                f"{label}: {n} wrong elements (#wrong > 0)",
                "the collective returned wrong results: its bandwidth is not trustworthy",
            )
        )
    contradictions = [c for r in runs if is_ok(r) and (c := nccl_contradiction(r))]
    if contradictions:
        out.append(
            Finding(
                "error", "the NCCL transport contradicts the variant", "; ".join(contradictions)
            )
        )
    unproven = [
        r.run_id
        for r in runs
        if is_ok(r)
        and r.nccl is not None
        and str(r.nccl.verdict or "").startswith("NCCL printed no connection lines")
        and (r.world_size or 2) > 1  # one process: no peer to connect to
    ]
    if unproven:
        out.append(
            Finding(
                "warn",
                "the NCCL transport was not recorded: NCCL printed no connection lines",
                ", ".join(unproven),
            )
        )
    if results.smoke:
        out.append(
            Finding(
                "warn",
                "smoke scale: sizes were shrunk to check the method",
                "these numbers do not measure the hardware",
            )
        )
    if results.device == "cpu":
        out.append(
            Finding(
                "warn",
                "ran on the CPU (gloo), not on GPUs",
                "nothing here describes GPU or NVLink performance",
            )
        )
    pinned, how = environment.pin() if environment is not None else (results.pinned, None)
    if not pinned and environment is not None and environment.in_container() and how:
        base = (environment.build_args or {}).get("BASE_IMAGE") or environment.base_image
        out.append(
            Finding(
                "warn",
                f"image not pinned: {how} ({base or 'unknown'})",
                "another machine's image of that name may hold other files; name the base by "
                "digest (--base-image IMAGE@sha256:...) or carry the image itself (kit export, "
                "then --image-archive)",
            )
        )
    elif not pinned:
        out.append(
            Finding(
                "warn",
                "unpinned environment: the host's own Python packages",
                "another machine may not have the same versions; use the docker "
                "runtime for a pinned image",
            )
        )
    throttled: dict[str, list[str]] = {}
    for r in runs:
        tel = r.telemetry
        if is_ok(r) and tel is not None and tel.throttled:
            for reason in tel.throttle_reasons_seen or ["slowdown"]:
                throttled.setdefault(reason, []).append(r.run_id)
    slowed = {k: v for k, v in throttled.items() if k != POWER_CAP_REASON}
    if slowed:  # a power cap is the GPUs' normal operation, sized beside the figures instead
        n = len({x for ids in slowed.values() for x in ids})
        were = "run was" if n == 1 else "runs were"
        out.append(
            Finding(
                "warn",
                f"{n} {were} slowed while busy by a reason other than the power cap: "
                + ", ".join(f"{k} in {len(v)}" for k, v in slowed.items()),
                "thermal or hardware slowdown is not normal operation: these figures read "
                "below what the GPUs deliver; the power cap (SwPowerCap) is sized where the "
                "figures are",
            )
        )
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
    if noisy:
        out.append(
            Finding(
                "warn",
                "noisy results: coefficient of variation over "
                + " / ".join(sorted({f"{b.cv_threshold:.0%}" for b in benches})),
                "; ".join(noisy),
            )
        )
    drift = [d for b in benches for d in drifting(b)]
    if drift:
        out.append(
            Finding(
                "warn",
                "not at steady state: the step time changed by more than "
                f"{DRIFT_THRESHOLD:.0%} between the two halves of the timed window",
                "; ".join(drift) + ". More warm-up steps or a longer window would measure "
                "the settled pace.",
            )
        )
    for f in results.preflight:
        out.append(Finding(f.level, f"preflight {f.check}: {f.message}"))
    return out


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
