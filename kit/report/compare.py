"""`kit compare`: bundles side by side, in one HTML and PDF document.

What a reader needs to decide between machines: what each machine is (named by its hardware,
"2x H200 NV18", and a label the user gives), whether the software and the recipe were the same,
and for each workload the median with its interval on each machine, the ratio to a chosen
baseline, per GPU and the scaling efficiency when the GPU counts differ, memory effects of
sharding named as such, the cost per 1M units of work at a given price, and the P2P effect on
each machine (the rows: kit.report.compare_rows).

Every bundle must match its manifest: a comparison of edited numbers would be worthless. The
comparison reads the bundles and writes only into its own output directory.
"""

from __future__ import annotations

import io
from datetime import datetime
from pathlib import Path
from typing import Any

from kit.bundle import MANIFEST, now_iso, sha256_file
from kit.bundle.signature import signature_status
from kit.env.diff import VERSION_KEYS
from kit.io import outputs
from kit.report.analysis.model import Benchmark
from kit.report.choice import choice
from kit.report.compare_figures import headline_figures, sweep_figures
from kit.report.compare_notes import (
    environment_checks,
    environment_rows,
    hardware_rows,
    pin_of_machine,
    reproductions,
    warnings_for,
)
from kit.report.compare_rows import (
    MetricRow,
    machine_prices,
    p2p_effects,
    unlike,
    workload_rows,
)
from kit.report.decode import tp_speedups
from kit.report.facts.price import Price, check_priced_device, parse_price
from kit.report.machines import (
    Machine,
    load_machines,
    parse_labels,
    pick_baseline,
    same_machine,
)
from kit.report.pdf import pdf_wanted
from kit.report.provenance import short
from kit.report.render import Figure, jinja_env, write_pdf
from kit.report.sections import axes_of
from kit.shared.jsonio import dumps

__all__ = [
    "MetricRow",
    "comparison",
    "load_machines",
    "p2p_effects",
    "parse_labels",
    "pick_baseline",
    "unlike",
    "warnings_for",
    "workload_rows",
    "write_comparison",
]

TEMPLATE = "compare.html.j2"


def comparison(
    machines: list[Machine],
    base: int,
    price_per_gpu_hour: Price | float | None = None,
    allowed_signers: Path | None = None,
    prices: dict[int, Price] | None = None,
) -> dict[str, Any]:
    """Everything the page shows, as plain data (also written as compare.json).

    Each machine's signature is checked (kit.bundle.signature): who signed it with `allowed_signers`,
    else only that the signature matches the manifest."""
    price = parse_price(price_per_gpu_hour)
    each = machine_prices(len(machines), price, prices)
    rows = workload_rows(machines, base, price, prices)
    warnings = warnings_for(machines, base)
    for w in warnings:
        if w["level"] == "scale":
            w["text"] += scale_words(rows)
    return {
        "created_at": now_iso(),
        "baseline": base + 1,
        "price_per_gpu_hour": price.amount if price else None,
        "price": price.to_dict() if price else None,
        "price_words": price.words if price else "",
        # bundles read with --read-broken-signature: every page carries these lines
        "broken_signatures": [m.data.broken_signature for m in machines if m.data.broken_signature],
        "machines": [
            {
                "index": m.index,
                "label": m.label,
                "user_label": m.user_label,
                "hardware_label": m.hardware_label,
                "gpus_total": m.gpus_total,
                "gpus_used": m.gpus_used(),
                "bundle": str(m.path),
                "signature": signature_status(m.path, allowed_signers).line(),
                "summary": m.summary,
                "recipe": m.results.recipe,
                "created_at": m.results.created_at,
                # which kit made it: a rerun by another kit loads other kit files, which the
                # environment differences name by their hash alone
                "kit": f"kit {m.results.kit_version}, {short(m.results.kit_commit)}",
                "device": m.results.device,
                "runtime": m.results.runtime,
                "engine": axes_of(m.environment, m.results)[1],
                "pinned": pin_of_machine(m)[0],
                "pinning": pin_of_machine(m)[1],
                "environment_name": m.environment.shown_name() if m.environment else None,
                "smoke": m.results.smoke,
                "status": m.results.status,
                "manifest_sha256": sha256_file(m.path / MANIFEST),
                "price": each[i].to_dict() if each[i] else None,
                "price_words": each[i].words if each[i] else "not priced",
                # the machine's hour: its price per GPU-hour times the GPUs its runs used
                "machine_hour": each[i].amount * m.gpus_used() if each[i] else None,
            }
            for i, m in enumerate(machines)
        ],
        "priced_each": bool(prices),
        "warnings": warnings,
        "reproductions": reproductions(machines),
        "hardware": hardware_rows(machines),
        "environment": environment_rows(machines, base),
        # every difference inside the environments, loaded by the runs or not (kit.env.check)
        "environment_checks": environment_checks(machines, base),
        "choice": choice(rows, machines, base),
        "workloads": [r.__dict__ for r in rows],
        "p2p": p2p_effects(machines),
        "tp_speedups": tp_speedups_of(machines),
        "version_keys": list(VERSION_KEYS),
    }


def tp_speedups_of(machines: list[Machine]) -> list[str]:
    """Tensor parallel's speed-up for one sequence at batch 1 across the bundles of one hardware
    and device (the report review, 1): a TP=2 bundle against a data-parallel bundle of the same
    GPU model, count and links, each line naming the machines (kit.report.decode.tp_speedups)."""
    groups: dict[tuple[str, str], list[Machine]] = {}
    for m in machines:
        groups.setdefault((m.hardware_label, m.results.device), []).append(m)
    out = []
    for group in groups.values():
        of = {id(b): m for m in group for b in m.benches}
        where = {key: m.label for key, m in of.items()}

        def apart(a: Benchmark, b: Benchmark, of: dict[int, Machine] = of) -> bool:
            return not same_machine(of[id(a)].hardware, of[id(b)].hardware)

        out += tp_speedups([b for m in group for b in m.benches], where, apart)
    return out


def scale_words(rows: list[MetricRow]) -> str:
    """What the page does about a GPU-count difference, for the metrics it holds."""
    words = []
    if any(r.rate for r in rows):
        words.append(
            " Work per second is summed over the GPUs, so it is also given per GPU, with the "
            "scaling efficiency where the GPU models match."
        )
    if any(r.unit.endswith("B/s") for r in rows):
        words.append(" Bus bandwidth is already normalised for the GPU count (NCCL's busbw).")
    if any(r.notes for r in rows):
        words.append(" Memory per GPU differs because the model is sharded over more GPUs.")
    return "".join(words)


def render_html(data: dict[str, Any], figures: list[Figure]) -> str:
    """The comparison page, with the report's templates, filters and stylesheet."""
    return jinja_env().get_template(TEMPLATE).render(c=data, figures=figures)


def check_price(price: str | float | Price | None, source: str | None = None) -> Price | None:
    """The price per GPU-hour with its currency and source (kit.report.facts.price); one-line error
    for anything else."""
    return parse_price(price, source)


OUTPUT_NAMES = ("compare.html", "compare.pdf", "compare.json")


def write_comparison(
    paths: list[Path],
    baseline: str | int | None = None,
    out: Path | None = None,
    labels: dict[int, str] | None = None,
    price_per_gpu_hour: str | float | Price | None = None,
    allowed_signers: Path | None = None,
    allow_unsigned: bool = False,
    price_source: str | None = None,
    read_broken: bool = False,
    prices: dict[int, Price] | None = None,
) -> list[Path]:
    """Write compare.html, compare.pdf and compare.json into `out`; returns their paths.

    labels: {0-based position: text} (parse_labels reads `--label 2=vendor-x`). With
    `allowed_signers`, every bundle must be signed by a listed signer (unsigned ones too when
    `allow_unsigned`), else nothing is written."""
    price = check_price(price_per_gpu_hour, price_source)
    machine_prices(len(paths), price, prices)  # one for all or one each: before any work
    named = out is not None  # the folder you name goes in one that exists; reports/ is made
    out = out or Path("reports") / f"compare-{datetime.now().strftime('%Y%m%d-%H%M%S')}"
    outputs.check_dir(out, "--out", OUTPUT_NAMES, make_parents=not named)  # no bundle, no device
    machines = load_machines(paths, labels, allowed_signers, allow_unsigned, read_broken)
    for m, own in zip(machines, machine_prices(len(machines), price, prices), strict=True):
        option = "--price" if prices else "--price-per-gpu-hour"
        check_priced_device(own, m.results.device, m.path, option)  # before anything is written
    base = pick_baseline(baseline, machines)
    out.mkdir(parents=True, exist_ok=True)
    data = comparison(machines, base, price, allowed_signers, prices)
    rows = [MetricRow(**w) for w in data["workloads"]]
    figures = headline_figures(rows, machines) + sweep_figures(machines)
    html = render_html(data, figures)
    html_path, pdf_path, json_path = (out / name for name in OUTPUT_NAMES)
    outputs.write_text(html_path, html, "--out")
    # strict JSON, as every kit file: no NaN, no Infinity
    outputs.write_text(json_path, dumps(data), "--out")
    if not pdf_wanted():  # KIT_PDF=0: the page and the data alone, as asked
        return [html_path, json_path]
    pdf = io.BytesIO()
    write_pdf(html, pdf)
    outputs.write(pdf_path, pdf.getvalue(), "--out")
    return [html_path, pdf_path, json_path]
