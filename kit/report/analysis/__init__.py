"""What the report and the comparison say, computed from a bundle's runs.

Pure functions over results.json's typed model (kit.model.Results and its RunResult runs; a
workload's own payload fields through RunData.extra) and hardware.json's (kit.model.Hardware), so every sentence
can be tested without rendering. By concern: model (the dataclasses), grouping (runs into
benchmarks, the one reader of results), verdicts, trust (findings), sweeps (message-size curves) and training (step
times, drift, telemetry). What a kind means (label, headline metric) comes from its workload's
spec, kit.workloads.registry; what its figure kind draws and adds, from kit.report.kinds.
"""

from kit.report.analysis.grouping import (
    benchmark_label,
    build_benchmarks,
    bundle_benchmarks,
    variant_subsets,
)
from kit.report.analysis.model import (
    CV_THRESHOLD,
    Benchmark,
    MetricRow,
    VariantBlock,
    Verdict,
    is_ok,
    p2p_disabled,
)
from kit.report.analysis.ran import alone, ran_line, run_notes
from kit.report.analysis.silicon import Silicon, add_copy_share, silicon
from kit.report.analysis.summary import (
    BenchSummary,
    VariantSummary,
    settings,
    summarize_bench,
    variant_definition,
    variant_defs,
)
from kit.report.analysis.sweeps import (
    allreduce_curves,
    nccl_choice,
    nccl_setup,
    raw_sizes,
    size_table,
    sweep_curves,
)
from kit.report.analysis.training import (
    DRIFT_MIN_STEPS,
    DRIFT_THRESHOLD,
    drifting,
    step_traces,
    telemetry_series,
    window_drift,
)
from kit.report.analysis.trust import (
    Finding,
    findings,
    nccl_contradiction,
    transports,
    trust_facts,
)
from kit.report.analysis.verdicts import (
    compare,
    expectations,
    headline,
    shared_verdict_metric,
    verdict_metric,
    verdicts,
)

__all__ = [
    "CV_THRESHOLD",
    "DRIFT_MIN_STEPS",
    "DRIFT_THRESHOLD",
    "BenchSummary",
    "Benchmark",
    "Finding",
    "MetricRow",
    "Silicon",
    "VariantBlock",
    "VariantSummary",
    "Verdict",
    "add_copy_share",
    "allreduce_curves",
    "alone",
    "benchmark_label",
    "build_benchmarks",
    "bundle_benchmarks",
    "compare",
    "drifting",
    "expectations",
    "findings",
    "headline",
    "is_ok",
    "nccl_choice",
    "nccl_contradiction",
    "nccl_setup",
    "p2p_disabled",
    "ran_line",
    "raw_sizes",
    "run_notes",
    "settings",
    "shared_verdict_metric",
    "silicon",
    "size_table",
    "step_traces",
    "summarize_bench",
    "sweep_curves",
    "telemetry_series",
    "transports",
    "trust_facts",
    "variant_definition",
    "variant_defs",
    "variant_subsets",
    "verdict_metric",
    "verdicts",
    "window_drift",
]
