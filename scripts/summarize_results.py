"""Print the markdown tables of reports/RESULTS.md from the committed bundles and measurements.

Every figure in RESULTS.md comes from this script's output, so a reader can recompute it:

    python scripts/summarize_results.py > /tmp/tables.md
"""

from __future__ import annotations

import importlib.util
import json
import sys
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kit.model import load_bundle  # noqa: E402
from kit.refs.nccl_tests import parse, size_words  # noqa: E402
from kit.report.analysis import bundle_benchmarks, size_table  # noqa: E402
from kit.report.analysis.verdicts import silent, withheld_because  # noqa: E402
from kit.stats import paired_ratio, summarize  # noqa: E402
from kit.workloads.registry import headline_metric  # noqa: E402

EXAMPLES = ROOT / "reports" / "examples"
MEASURED = ROOT / "reports" / "measurements"


def nccl_tests(path: Path) -> dict[int, tuple[float, float]]:
    """all_reduce_perf output -> {bytes: (time us, busbw GB/s)}, out of place: the column
    RESULTS.md's tables and prose were made against (kit.refs.nccl_tests reads it). The report
    and collectives_check hold the kit's all-reduce against the in-place column its spec names
    (what torch's all_reduce times); these tables have not been redone that way."""
    return parse(path.read_text(), path.name).column("out-of-place")


def kit_allreduce(bundle: Path, variant: str, bench: str | None) -> dict[int, tuple[float, float]]:
    """The bundle's all-reduce curve, as its report draws it (kit.report.analysis.size_table):
    {bytes: (time us, busbw GB/s)}; `bench` picks one benchmark where the bundle ran several."""
    benches = bundle_benchmarks(load_bundle(bundle))
    return size_table(next(b for b in benches if bench in (None, b.name)), variant)


def allreduce_table(
    bundle: str, measured: str, gpus: int, bench: str | None = None, ref: str = "nccl-tests"
) -> None:
    label = f"`{bundle}`" + (f", benchmark `{bench}`" if bench else "")
    print(f"\n### All-reduce, kit vs {ref}, {gpus}x H200 ({label})\n")
    print(
        "| size | variant | kit time (us) | nccl-tests time (us) | kit busbw (GB/s) | nccl-tests busbw (GB/s) | busbw ratio |"
    )
    print("|---|---|---|---|---|---|---|")
    worst = {}
    for variant in ("p2p", "no-p2p"):
        kit = kit_allreduce(EXAMPLES / bundle, variant, bench)
        reference = nccl_tests(MEASURED / measured / f"{ref}-{variant}-{gpus}gpu.txt")
        for size in sorted(kit):
            if size not in reference:
                continue
            (kt, kb), (rt, rb) = kit[size], reference[size]
            ratio = kb / rb if rb else float("nan")
            if size >= 1 << 20:
                worst[variant] = min(worst.get(variant, 9.0), ratio)
            if size in (8, 1 << 10, 1 << 20, 1 << 25, 1 << 28, 1 << 30) or (
                size >= 1 << 20 and abs(ratio - 1) > 0.03
            ):
                print(
                    f"| {size_words(size)} | {variant} | {kt:.2f} | {rt:.2f} | {kb:.2f} | {rb:.2f} | "
                    f"{ratio:.3f} (time x{kt / rt:.2f}) |"
                )
    print("\nLowest busbw ratio kit/nccl-tests at 1 MiB and up: "
          + ", ".join(f"{v} {r:.3f}" for v, r in worst.items()))  # fmt: skip


def headline_table(bundles: list[str], title: str = "Training workloads") -> None:
    """One row a benchmark and variant on its workload's headline metric (the report's)."""
    print(f"\n### {title} (median over repeats; each interval says what it is)\n")
    print(
        "| bundle | runtime | date | benchmark | variant | metric | median | interval | n | P2P effect (paired) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name in bundles:
        results = json.loads((EXAMPLES / name / "results.json").read_text())
        data = load_bundle(EXAMPLES / name)
        pinned, how = data.environment.pin()  # the report's one rule
        where = f"{results.get('runtime', 'host')}, {'pinned' if pinned else how or 'not pinned'}"
        date = results["created_at"][:10]
        blocks = {b.name: b for b in bundle_benchmarks(data)}
        benches = sorted({r["benchmark"] for r in results["runs"]})
        for bench in benches:
            by_variant: dict[str, list[float]] = {}
            unit = ""
            metric = "throughput"
            for r in results["runs"]:
                if r["benchmark"] == bench and r["status"] == "ok":
                    metric = headline_metric(r["kind"])
                    m = r["metrics"][metric]
                    by_variant.setdefault(r["variant"], []).append(m["value"])
                    unit = m["unit"]
            effect = ""
            if len(by_variant.get("p2p", [])) == len(by_variant.get("no-p2p", [])) > 1:
                effect = paired_ratio(by_variant["p2p"], by_variant["no-p2p"]).sentence()
                variants = {v.name: v for v in blocks[bench].variants}
                # the report's rule: runs that move nothing between GPUs get no P2P verdict
                if why := silent(blocks[bench], variants["p2p"], variants["no-p2p"]):
                    effect = f"no P2P verdict ({why.split(':')[0]})"
                # and the report's other rule: noisy or failed runs make the ratio no finding
                elif why := withheld_because(
                    blocks[bench], variants["p2p"], variants["no-p2p"], metric
                ):
                    effect = f"verdict withheld ({why}); the paired ratio: {effect}"
            for variant, values in by_variant.items():
                s = summarize(values)
                print(f"| {name} | {where} | {date} | {bench} | {variant} | {metric} ({unit}) | {s.median:,.1f} | "
                      f"{s.ci_low:,.1f} to {s.ci_high:,.1f} ({s.label}) | {s.n} | {effect if variant == 'p2p' else ''} |")  # fmt: skip


def collectives_table(bundles: list[str]) -> None:
    """Each collective and variant against nccl-tests run in the same call (the bundle's own
    nccl-tests/ folder), judged by scripts/device/collectives_check.py: one rule for both."""
    spec = importlib.util.spec_from_file_location(
        "collectives_check", ROOT / "scripts" / "device" / "collectives_check.py"
    )
    check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(check)
    print(
        "\n### Collectives, kit vs nccl-tests in the same call (the bundle's nccl-tests/ folder)\n"
    )
    print(
        f"Judged from {size_words(check.FROM_BYTES)} up: every size at least {check.FLOOR}x "
        f"nccl-tests' busbw, the headline within {1 - check.PEAK_SHARE:.0%} of the sweep's highest "
        "(scripts/device/collectives_check.py).\n"
    )
    print("| bundle | collective | variant | headline busbw (GB/s) | lowest ratio | at | judged |")
    print("|---|---|---|---|---|---|---|")
    for name in bundles:
        _, summary = check.compare(EXAMPLES / name)
        for key, row in summary.items():
            kind, variant = key.split("/")
            print(f"| {name} | {kind} | {variant} | {row['headline_gbps']:,.1f} | "
                  f"{row['lowest_ratio']:.3f} | {size_words(row['lowest_at_bytes'])} | "
                  f"{'PASS' if row['pass'] else 'FAIL'} |")  # fmt: skip


def mfu_table(bundles: list[str]) -> None:
    print("\n### Model FLOPs utilisation (P2P on)\n")
    print("| bundle | benchmark | tokens/s | MFU | formula |")
    print("|---|---|---|---|---|")
    for name in bundles:
        for r in json.loads((EXAMPLES / name / "results.json").read_text())["runs"]:
            if r["variant"] == "p2p" and r["status"] == "ok" and r["metrics"].get("mfu"):
                print(f"| {name} | {r['run_id']} | {r['metrics']['throughput']['value']:,.0f} | "
                      f"{r['metrics']['mfu']['value'] * 100:.1f}% | {r['data'].get('flops_formula', '')} |")  # fmt: skip


def overhead_table(bundles: list[str]) -> None:
    print("\n### Kit overhead: bundle wall time against what the workers measured\n")
    print(
        "| bundle | runs | kit reproduce wall (s) | sum of run launches (s) | sum of timed windows (s) |"
    )
    print("|---|---|---|---|---|")
    for name in bundles:
        res = json.loads((EXAMPLES / name / "results.json").read_text())
        wall = (
            datetime.fromisoformat(res["finished_at"]) - datetime.fromisoformat(res["created_at"])
        ).total_seconds()
        launches = sum(r.get("launch", {}).get("wall_s", 0) for r in res["runs"])
        windows = sum(r["data"].get("window_s", 0) or 0 for r in res["runs"])
        print(f"| {name} | {len(res['runs'])} | {wall:.0f} | {launches:.0f} | {windows:.1f} |")


if __name__ == "__main__":
    # same session as each bundle: nccl-tests one process per GPU (MPI), except the first session's
    # single-process -g 2 run (threads)
    allreduce_table("h200x2-allreduce-timing", "2026-11-21-h200x2", 2, bench="auto")
    allreduce_table("h200x2-allreduce-timing", "2026-11-21-h200x2", 2, bench="graph")
    allreduce_table("allreduce-h200x2-first", "2026-11-21-h200x2", 2, ref="nccl-tests-threads")
    allreduce_table("h200x4-allreduce", "2026-11-21-h200x4", 4)
    # the kit's Docker container first (2026-11-28), then the host runtime (2026-11-21: history)
    collectives = [
        "h200x2-collectives-container-allreduce-all-gather",
        "h200x2-collectives-container-reduce-scatter-alltoall",
    ]
    pinned = [
        "h200x2-allreduce-container",
        "h200x2-allreduce-container-machine-i",
        "h200x2-allreduce-container-rerun-machine-j",
        *collectives,
        "h200x2-silicon-container",
        "h200x2-silicon-container-rerun",
    ]
    headline_table(
        pinned, "The kit's Docker container, 2x H200: all-reduce, collectives and silicon"
    )
    collectives_table(collectives)
    training = ["h200x2-gpt2-ddp-container", "h200x2-gpt2-ddp-container-machine-k",
                "h200x2-fsdp-llama-container", "h200x2-fsdp-llama-container-rerun",
                "h200x2-resnet50-container", "h200x2-resnet18-container",
                "h200x2-decode-tp2-one-shot-container", "h200x2-decode-dp-copy-container",
                "h200x2-decode-dp-container", "h200x2-decode-tp2-container", "h200x2-gpt2-ddp-host-20261128",
                "h200x2-gpt2-ddp", "h200x2-fsdp-llama", "h200x2-resnet-ddp", "h200x4-fsdp-llama"]  # fmt: skip
    headline_table(training)
    mfu_table(["h200x2-fsdp-llama-container", "h200x2-fsdp-llama-container-rerun",
               "h200x2-fsdp-llama", "h200x2-fsdp-llama-tuned", "h200x4-fsdp-llama"])  # fmt: skip
    overhead_table(["h200x2-allreduce", "h200x2-gpt2-ddp", "h200x2-fsdp-llama", "h200x2-resnet-ddp",
                    "h200x4-allreduce", "h200x4-fsdp-llama"])  # fmt: skip
