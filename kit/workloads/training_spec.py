"""What the training workloads share on the driver's side: their metrics and method paragraph.

The worker side (timed steps, throughput, MFU) stays in kit/worker/training.py and flops.py.
"""

from __future__ import annotations

from kit.workloads.base import Metric, WorkloadSpec

TRAINING_METRICS = (
    Metric("throughput", "throughput", "items/s"),
    Metric("throughput_window", "throughput over the whole window", "items/s"),
    Metric("step_time_s", "step time (median)", "s", higher_is_better=False),
    Metric("peak_mem_gib", "peak GPU memory", "GiB", higher_is_better=False),
    Metric("mfu", "model FLOPs utilisation", "fraction"),
    Metric("tokens_per_s", "tokens per second", "tokens/s"),
)

TRAINING_METHOD = """\
<b>{{ a.label }}.</b> Clocks are read after synchronizing the device;
{% if a.warmup %}the first {{ a.warmup|join(" or ") }} steps are warm-up and dropped{% else %}warm-up steps: not recorded{% endif %}{% if a.steps %}, {{ a.steps|join(" or ") }} steps in all{% endif %};
every step time is kept (the step-time figure shows them all). Throughput is work per second over
the measured steps. A run is flagged as not at steady state when the median step time of the
second half of its measured steps differs from the first half's by more than {{ (me.drift * 100)|round|int }}%.
{% if a.flops_formula %}Model FLOPs: {{ a.flops_formula }}; utilisation (MFU) = achieved FLOP/s over the GPUs' peak.{% endif %}
Weights: {{ a.weights or "not recorded" }}. Data: {{ a.data or "not recorded" }}.
{% if a.params %}Parameters: {% for k, v in a.params.items() %}<code>{{ k }}={{ v }}</code>{{ ", " if not loop.last }}{% endfor %}.{% endif %}
Models are built from their architecture configs with random weights and fed synthetic data,
unless the run names a local path: hardware throughput does not depend on the weights' values,
and nothing is downloaded at run time."""


def training_spec(kind: str, label: str, description: str, params: type) -> WorkloadSpec:
    """The spec of one training workload: judged by throughput, drawn as bars and step traces."""
    return WorkloadSpec(
        kind=kind,
        label=label,
        description=description,
        params=params,
        worker=f"kit.workloads.{kind}.worker",
        headline="throughput",
        figures="training",
        method=TRAINING_METHOD,
        metrics=TRAINING_METRICS,
    )
