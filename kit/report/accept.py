"""`kit accept BUNDLE --against REF`: acceptance verdicts of a bundle against a reference.

REF is one of
- a published figure's id (`kit refs published` lists them): its workload's benchmarks are
  judged on its metric, per GPU where the figure is per GPU;
- another bundle directory: each benchmark of the same name, the same variant, judged on the
  headline metric against that bundle's median;
- a number with its unit ("330GB/s", "14000tokens/s"): every benchmark whose judged metric has
  that unit (a bare number is a usage error).

One rule for every reference (kit.stats.acceptance.mismatches): a published figure or a bundle judges
a run only on the same GPU model and count, the same task, on GPUs, in the same metric (a
median-step figure never judges a whole-window one); a published figure's `requires` conditions
(NVLS, fabric) must match too. Otherwise the decision is NOT COMPARABLE, naming the reasons, and
nothing is judged, unless `judge_anyway` (`--judge-anyway`): then the verdict is decided all the
same and says "judged despite: ...".

Tolerance: a fraction for every metric ("0.05") or per metric ("busbw_largest=0.03"); defaults:
0 against a published floor or a number, 0.05 against a published figure or a bundle. The
verdicts are kit.stats.acceptance's (PASS only when the interval's lower end clears the threshold).
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kit import __version__
from kit.bundle.intake import receive
from kit.io.errors import InputError
from kit.model import Hardware, Results
from kit.refs.published import Figure, by_id, differences, figures, run_conditions, unmet
from kit.report import analysis
from kit.report.analysis.verdicts import run_basis
from kit.stats.acceptance import (
    NOT_COMPARABLE,
    RULE,
    Basis,
    decide,
    device_mismatch,
    mismatches,
    overall,
)

SCHEMA = 1
DEFAULT_TOLERANCE = 0.05
NUMBER = re.compile(
    r"^\s*((?:[0-9]{1,3}(?:[_,][0-9]{3})+|[0-9]+)(?:\.[0-9]+)?) ?([A-Za-z/%]+)?\s*$", re.ASCII
)
"""330GB/s, 14,000tokens/s, 14_000 tokens/s: separators only between groups of three digits, the
unit one word as the metric catalog writes it (not "GB / s", no other space than one ASCII one)."""


@dataclass
class Against:
    """What the bundle is judged against."""

    what: str  # "figure" | "bundle" | "number"
    label: str
    figure: Figure | None = None
    bundle: Path | None = None
    value: float | None = None
    unit: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"what": self.what, "label": self.label}
        if self.figure is not None:
            out["figure"] = self.figure.to_dict()
        if self.bundle is not None:
            out["bundle"] = str(self.bundle)
            out.update(self.detail)
        if self.value is not None:
            out.update({"value": self.value, "unit": self.unit})
        return out


def parse_against(text: str) -> Against:
    """A published figure's id, a bundle directory, or a number with its unit."""
    if any(f.id == text for f in figures()):
        f = by_id(text)
        return Against("figure", f.title, figure=f)
    path = Path(text)
    if path.is_dir():
        if not (path / "results.json").is_file():
            raise InputError(f"--against {text}: a directory, but not a kit bundle")
        return Against("bundle", path.name, bundle=path)
    m = NUMBER.match(text)
    if m:
        value = float(m.group(1).replace(",", "").replace("_", ""))
        unit = (m.group(2) or "").strip()
        if not unit:
            raise InputError(
                f"--against {text!r}: a number needs its unit (330GB/s, 14000tokens/s), so that "
                "it judges only the metric it names"
            )
        if value <= 0:
            raise InputError(f"--against {text!r}: a reference must be more than 0")
        return Against("number", text.strip(), value=value, unit=unit)
    raise InputError(
        f"--against {text!r}: not a published figure's id (kit refs published), a bundle "
        "directory, or a number with its unit such as 330GB/s"
    )


def parse_tolerances(items: list[str]) -> tuple[float | None, dict[str, float]]:
    """(for every metric, per metric) from "0.05" and "metric=0.03" items; a malformed item
    ("=0.1", "a=0.1=0.2") or one given twice is a usage error, never half-read."""
    every, per = None, {}
    for item in items:
        name, eq, raw = item.partition("=")
        if not eq:
            name, raw = "", item
        if (eq and not name) or "=" in raw or any(c.isspace() for c in item):  # as written: 0.05
            raise InputError(f"--tolerance {item!r}: a fraction (0.05) or METRIC=FRACTION")
        try:
            if "_" in raw or not raw.isascii():  # float() reads 0.0_5 and full-width ０.０５
                raise ValueError(raw)
            value = float(raw)
        except ValueError:
            raise InputError(
                f"--tolerance {item!r}: a fraction (0.05) or METRIC=FRACTION"
            ) from None
        if not 0 <= value < 1:
            raise InputError(f"--tolerance {item!r}: the fraction must be in [0, 1)")
        if (name in per) if name else (every is not None):
            what = f"for {name}" if name else "for every metric"
            raise InputError(f"--tolerance {item!r}: a tolerance {what} was already given")
        if name:
            per[name] = value
        else:
            every = value
    return every, per


def _variant(bench: analysis.Benchmark, wanted: str | None) -> analysis.VariantBlock | None:
    if wanted:
        return next((v for v in bench.variants if v.name == wanted), None)
    return next((v for v in bench.variants if v.p2p_off is False), None) or (
        bench.variants[0] if bench.variants else None
    )


def _benches(
    bundle_dir: Path, signers: tuple[Path | None, bool, bool] = (None, False, False)
) -> tuple[list[analysis.Benchmark], Results, Hardware, str]:
    """The bundle read once: sealed, complete and, with an allowed-signers file, signed by a
    listed signer (kit.bundle.intake; `signers` is the file, whether unsigned is accepted and whether
    a broken signature is read anyway; the last item returned is then the line saying so)."""
    data = receive(Path(bundle_dir), "accept only an untouched bundle", *signers)
    hardware = data.hardware or Hardware()
    return analysis.bundle_benchmarks(data), data.results, hardware, data.broken_signature


def not_comparable(
    bench: str,
    block: analysis.VariantBlock,
    label: str,
    figure: Figure,
    unmet: list[str],
    differ: list[str],
) -> dict[str, Any]:
    """The decision where the figure does not apply: which conditions differ, in its own words
    how far it compares, and how to judge it all the same; no threshold, no interval."""
    reason = (
        f"{figure.title} is no reference for this run: {'; '.join(unmet)} "
        f"(its own note: {figure.comparability}); `--judge-anyway` judges it all the same"
    )
    return {
        "benchmark": bench,
        "variant": block.name,
        "label": label,
        "gpus": block.gpus,
        "per_gpu": figure.per_gpu,
        "source": figure.cited,
        "differences": differ,
        "unmet": unmet,
        "judged_despite": [],
        "verdict": NOT_COMPARABLE,
        "metric": figure.metric,
        "reference": figure.value,
        "unit": figure.unit,
        "reason": reason,
        "sentence": f"{NOT_COMPARABLE}: {reason}",
    }


def _merge(first: list[str], second: list[str]) -> list[str]:
    """Both lists of reasons, each said once (the GPU count appears in both)."""
    return first + [w for w in second if w not in first]


def _bundle_not_comparable(
    bench: str,
    block: analysis.VariantBlock,
    row: analysis.MetricRow,
    label: str,
    there: Basis,
    here: Basis,
    why: list[str],
    value: float,
    there_words: str | None = None,
) -> dict[str, Any]:
    """The decision where a reference bundle (or a figure given for GPUs) ran on another GPU
    model, count, task or device: nothing judged, the reason named, and how to judge it all
    the same."""
    reason = (
        f"{label} ({there_words or there.words}) is no reference for this run ({here.words}): "
        f"{'; '.join(why)}; `--judge-anyway` judges it all the same"
    )
    return {
        "benchmark": bench,
        "variant": block.name,
        "label": row.label,
        "gpus": block.gpus,
        "per_gpu": False,
        "source": label,
        "differences": why,
        "unmet": why,
        "judged_despite": [],
        "verdict": NOT_COMPARABLE,
        "metric": row.name,
        "reference": value,
        "unit": row.unit,
        "reason": reason,
        "sentence": f"{NOT_COMPARABLE}: {reason}",
    }


def _no_counterpart(
    bench: analysis.Benchmark,
    block: analysis.VariantBlock,
    row: analysis.MetricRow,
    label: str,
    name: str,
    ran: list[str],
) -> dict[str, Any]:
    """The decision where the reference bundle measured no `name` for this benchmark and
    variant (another task): NOT COMPARABLE with the reason, as for another GPU model; there is
    no figure to judge, so --judge-anyway cannot judge it either."""
    task = bench.name if bench.name == bench.kind else f"{bench.name} ({bench.kind})"
    reason = (
        f"{label} is no reference for this run: it has no {name} of {task} {block.name} "
        f"(it ran {', '.join(ran) or 'nothing that finished'})"
    )
    return {
        "benchmark": bench.name,
        "variant": block.name,
        "label": row.label,
        "gpus": block.gpus,
        "per_gpu": False,
        "source": label,
        "differences": [],
        "unmet": [],
        "judged_despite": [],
        "verdict": NOT_COMPARABLE,
        "metric": name,
        "reference": None,
        "unit": row.unit,
        "reason": reason,
        "sentence": f"{NOT_COMPARABLE}: {reason}",
    }


def accept(
    bundle_dir: Path,
    against: str,
    tolerances: list[str] | None = None,
    metric: str | None = None,
    variant: str | None = None,
    allowed_signers: Path | None = None,
    allow_unsigned: bool = False,
    judge_anyway: bool = False,
    read_broken: bool = False,
) -> dict[str, Any]:
    """The acceptance document: one decision per judged benchmark, and the overall verdict.
    With `allowed_signers`, the bundle and a reference bundle must be signed by a listed signer.
    `judge_anyway`: judge against a published figure whose required conditions differ."""
    ref = parse_against(against)
    every, per_metric = parse_tolerances(tolerances or [])
    signers = (allowed_signers, allow_unsigned, read_broken)
    benches, results, hardware, broken = _benches(bundle_dir, signers)
    if judge_anyway and ref.what == "number" and results.device == "cuda":
        raise InputError(
            "--judge-anyway: a number on the command line carries no conditions to judge "
            "despite on a GPU run; give it only with a published figure, a bundle, or a CPU run"
        )
    broken_signatures = [broken] if broken else []
    known = {m for b in benches for m in b.metrics}
    unknown = sorted(set(per_metric) - known)
    if unknown:
        raise InputError(
            f"--tolerance {unknown[0]}=...: no benchmark in {bundle_dir} has that metric "
            f"(it has {', '.join(sorted(known)) or 'none'})"
        )
    ref_hw = Hardware()
    ref_benches = {}
    if ref.bundle:
        other_benches, ref_results, ref_hw, ref_broken = _benches(ref.bundle, signers)
        broken_signatures += [ref_broken] if ref_broken else []
        ref_benches = {b.name: b for b in other_benches}
    decisions = []
    skipped = []
    for bench in benches:
        block = _variant(bench, variant)
        if block is None:
            skipped.append(f"{bench.name}: no variant {variant!r}")
            continue
        if ref.figure and ref.figure.kind != bench.kind:
            continue
        name = ref.figure.metric if ref.figure else (metric or analysis.verdict_metric(bench))
        row = (bench.metrics.get(name) or {}).get(block.name)
        if row is None or row.summary is None:
            skipped.append(f"{bench.name} {block.name}: no finished run has {name}")
            continue
        gpus = block.gpus
        values = list(row.values)
        # the scale is matched only against another bundle (kit.stats.acceptance.Basis.scale)
        here = run_basis(bench, block, hardware, name, results.smoke if ref.bundle else None)
        per_gpu, differ, source, despite = False, [], "", []
        if ref.figure is not None:
            fig = ref.figure
            value, unit = fig.value, fig.unit
            default = 0.0 if fig.floor else DEFAULT_TOLERANCE
            per_gpu = fig.per_gpu
            mine = run_conditions(block.ok, hardware)
            differ = differences(fig, mine)
            source = fig.cited
            there = Basis(fig.gpu, fig.gpus, fig.kind, "GPU", fig.metric, fig.always_differs)
            despite = _merge(mismatches(there, here), unmet(fig, mine))
            if despite and not judge_anyway:
                decisions.append(not_comparable(bench.name, block, row.label, fig, despite, differ))
                continue
        elif ref.bundle is not None:
            other = ref_benches.get(bench.name)
            oblock = _variant(other, block.name) if other else None
            orow = (other.metrics.get(name) or {}).get(oblock.name) if oblock else None
            if orow is None or not orow.values:  # another task, variant or metric there
                ran = sorted({f"{b.name} ({b.kind})" for b in ref_benches.values()})
                decisions.append(_no_counterpart(bench, block, row, ref.label, name, ran))
                continue
            value, unit, default = statistics.median(orow.values), row.unit, DEFAULT_TOLERANCE
            if other.params != bench.params:
                differ.append("the workload's parameters differ")
            source = f"median of {len(orow.values)} run(s) of {ref.label}"
            there = run_basis(other, oblock, ref_hw, name, ref_results.smoke)
            despite = mismatches(there, here)
            if despite and not judge_anyway:
                decisions.append(
                    _bundle_not_comparable(
                        bench.name, block, row, ref.label, there, here, despite, value
                    )
                )
                continue
        else:
            if ref.unit and ref.unit.replace(" ", "") != row.unit.replace(" ", ""):
                continue
            value, unit, default = float(ref.value), row.unit, 0.0
            source = "the figure given on the command line"
            # a figure to buy GPUs by: a run on the CPU measured no GPU (kit.stats.acceptance)
            despite = [w for w in [device_mismatch("GPU", here.device)] if w]
            if despite and not judge_anyway:
                there = Basis(None, None, None, "GPU", None)
                decisions.append(
                    _bundle_not_comparable(
                        bench.name,
                        block,
                        row,
                        against,
                        there,
                        here,
                        despite,
                        value,
                        there_words="a figure to judge GPUs by",
                    )
                )
                continue
        if per_gpu and gpus:
            values = [v / gpus for v in values]
        tol = per_metric.get(name, every if every is not None else default)
        shown = f"{unit} per GPU" if per_gpu else unit
        d = decide(values, value, tol, row.higher_is_better, name, shown)
        doc = d.to_dict()
        if despite:  # --judge-anyway: the verdict stands, and says what it was judged despite
            doc["reason"] = f"judged despite: {'; '.join(despite)}; {doc['reason']}"
        decisions.append(
            {
                "benchmark": bench.name,
                "variant": block.name,
                "label": row.label,
                "gpus": gpus,
                "per_gpu": per_gpu,
                "source": source,
                "differences": differ,
                "unmet": despite,
                "judged_despite": despite,
                **doc,
                "sentence": f"{doc['verdict']}: {doc['reason']}",
            }
        )
    if not decisions:
        why = "; ".join(skipped) or "no benchmark measures what the reference names"
        raise InputError(f"nothing in {bundle_dir} to judge against {against}: {why}")
    return {
        "schema": SCHEMA,
        "kit_version": __version__,
        "bundle": {
            "path": str(bundle_dir),
            "recipe": results.recipe,
            "created_at": results.created_at,
            "status": results.status,
        },
        "against": ref.to_dict(),
        "rule": RULE,
        "verdict": overall(d["verdict"] for d in decisions),
        "decisions": decisions,
        "skipped": skipped,
        # bundles read with --read-broken-signature: a page showing this document says so
        "broken_signatures": broken_signatures,
    }
