"""What the training workloads share on the driver's side: their metrics and method paragraph.

The worker side (timed steps, throughput, MFU) stays in kit/worker/training.py and flops.py.
"""

from __future__ import annotations

from dataclasses import fields

from kit.workloads.base import Phrase, SpecError, WorkloadSpec, metrics

PRECISION = Phrase(("precision",), recorded=True)
"""The precision the training loop records for every run (its Built's): what ran, not what was
asked."""

TRAINING_METRICS = metrics(
    "throughput", "throughput_window", "step_time_s", "peak_mem_gib", "mfu", "tokens_per_s"
)

TRAINING_METHOD = """\
<b>{{ a.label }}.</b> {% if a.step_note %}Step times: {{ a.step_note }}.{% endif %}
{% if a.warmup %}The first {{ a.warmup|join(" or ") }} steps are warm-up and dropped{% else %}Warm-up steps: not recorded{% endif %}{% if a.steps %}; {{ a.steps|join(" or ") }} steps in all, the rest form the timed window{% endif %}.
Every step time is kept: the step-time plot draws them all, the warm-up's too, and no number
below counts the warm-up.
<b>Throughput</b> (the headline) is the work of one step on all GPUs (tokens, images or samples)
divided by the <b>median step time</b> of the timed window; "throughput over the whole window" is
the work of all timed steps over the window's length, printed beside it. Per-GPU throughput is the
headline over the number of GPUs.
{% if a.synced_per_step %}<b>How this bundle was timed:</b> it was recorded before the kit timed
steps with CUDA events. Its step times are host-clock readings taken after a device synchronize at
every step boundary (its results record this as each run's step_times_note), which drains the launch
queue at each step: a launch-bound step reads slower than it runs (ResNet-50 DDP on one H200: 3%).
Bundles recorded since time steps with CUDA events and no synchronize inside the window.{% endif %}
{% if a.window_s %}Timed window: {{ a.window_s }}{% if a.window_rules %} ({{ a.window_rules|join("; ") }}){% endif %}.
{% if not a.window_rules %}This bundle set no minimum window; full-scale recipes now time at least 30 s,
so that clocks and power settle.{% endif %}{% endif %}
{% if a.gc_frozen %}Python's garbage collector is run and its objects frozen (gc.freeze) before the
timed window, so the collections inside it scan only objects made there{% if a.gc_window %} (in all,
{{ a.gc_window }} a window){% endif %}; a full collection of the whole heap holds the GIL
for a quarter of a second on the Llama-8B shape, and the GPU waits for it.
{% else %}These runs were recorded before the kit froze Python's garbage collector for the timed
window: any full collection of the whole heap fell inside the window and is part of its step times.
{% endif %}When the GPUs sit at their power cap (NVML reports SwPowerCap in most of the window's samples),
the headline is the throughput over the whole window, not the median step{% if a.whole_window %}: these
runs did, so this bundle's headline is the throughput over the whole window{% endif %}.
A run is flagged as not at steady state when the median step time of the
second half of its timed window differs from the first half's by more than {{ (me.drift * 100)|round|int }}%.
{% if a.flops_formula %}Model FLOPs{% if " per " not in a.flops_formula %} per token{% endif %}: {{ a.flops_formula }}; utilisation (MFU) = model FLOPs
per step over the median step time, over the GPUs' dense peak for the run's precision{% if a.peak %} ({{ a.peak }}){% endif %}.{% endif %}
{% if a.energy == ["counter"] %}Energy per unit of work is the difference of NVML's total-energy counter
(nvmlDeviceGetTotalEnergyConsumption) of every GPU, read at each run's timed window edges
{%- elif a.energy %}Energy per unit of work integrates GPU board power sampled every ~0.25 s over each
run's timed window{% if "counter" not in a.energy %}: this bundle recorded no energy counter, and
NVML's power reading is a one-second average, so on a window of a few seconds this reads low
(sampled power over 1.7 s read 0.70 of the counter on an H100){% else %}, or the energy counter
where a run recorded it{% endif %}{% else %}Energy is measured on GPUs only{% endif %} (CPU,
memory, fans and power-supply losses excluded). Sampled power is drawn in the telemetry plots.
Weights: {{ a.weights or "not recorded" }}. Data: {{ a.data or "not recorded" }}.
Models are built from their architecture configs with random weights and fed synthetic data,
unless the run names a local path: hardware throughput does not depend on the weights' values,
and nothing is downloaded at run time."""


LOOP_FIELDS = ("seed", "warmup_steps", "steps", "min_window_s", "data_batches")
"""What the one training loop (kit/worker/training.py) and its checks (TrainingParams.check_loop)
read from every training workload's params: a params class without them fails here, when its
spec is first loaded (the registry sets the workload aside with the line), not in every run."""


def training_spec(
    kind: str, label: str, description: str, params: type, ran: tuple[Phrase, ...]
) -> WorkloadSpec:
    """The spec of one training workload: judged by throughput, drawn as bars and step traces.
    `ran`: its phrases of the "what ran" line (the precision the loop recorded among them)."""
    missing = [f for f in LOOP_FIELDS if f not in {x.name for x in fields(params)}]
    if missing:
        raise SpecError(
            f"kit/workloads/{kind}/params.py: {params.__name__} lacks {', '.join(missing)}, "
            "which the training loop (kit/worker/training.py) reads"
        )
    return WorkloadSpec(
        kind=kind,
        label=label,
        description=description,
        params=params,
        headline="throughput",
        figures="training",
        method=TRAINING_METHOD,
        metrics=TRAINING_METRICS,
        ran=ran,
        smoke_model=True,
    )
