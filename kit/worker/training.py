"""The one training loop every training workload plugs into, and how its numbers are made.

A workload's worker.py gives a `build(ctx, params) -> Built` (its model, data, step function,
work and FLOPs per step, and the facts it records) and `run = runner(ParamsClass, build)`;
`train` seeds, builds, times the warm-up and measured steps and summarizes, the same for all, as
torchtitan's train specs plug a model into one trainer.

Method: a step's time is the time between CUDA events recorded at its boundaries, with no host
synchronize inside the window (kit.workloads.timing.StepTimer; the wall clock on the CPU); every step time and every loss is kept, warm-up steps included, and the warm-up
steps are left out of every figure. A minimum window (min_window_s) is met by a step count every
rank agrees on before the window opens, planned from the fastest warm-up step; a window that
still falls short is extended after a synchronize, and its window_rule says so. Python's garbage
collector is frozen for the window (FrozenHeap): what it still spends there is gc_window_s.
A step's time is the slowest rank's (a step is done when its last rank is). Throughput is
reported two ways: global units per step over the median step time (robust to a stray slow step)
and total units over the whole timed window (what the HF Trainer's *_per_second reports).

Model FLOPs utilisation (MFU) = achieved model FLOPs per second per GPU / the GPU's peak:

    mfu = flops_per_step / median_step_time / (peak_flops_per_gpu * world_size)

where flops_per_step is the whole job's model FLOPs for one optimizer step (each worker documents
its formula). Recomputation (activation checkpointing) is not model work and is not counted.
The peak is the datasheet's dense figure for the precision the matmuls run in (PEAK_FLOPS);
MFU is null on the CPU and on a GPU this table does not know.

Standard library and torch only: this runs inside the container.
"""

from __future__ import annotations

import math
import resource
import statistics
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from kit.shared.gpu_specs import peak_flops  # one table of datasheet peaks, shared with the report
from kit.shared.metrics import record
from kit.worker.common import Context, FrozenHeap
from kit.worker.energy import EnergyCounter, gathered
from kit.workloads.timing import StepTimer

GIB = 1 << 30


@dataclass
class Built:
    """What a training workload's builder hands the loop.

    work: the unit of work ("samples", "tokens", "images"); work_per_step and flops_per_step
    are the whole job's per optimizer step (flops None where unknown); facts: what the result's
    data records about the build (model, weights, data, parallelism, optimizer, formulas);
    describe: the log line's words; finish(metrics, data): figures only this workload derives
    from the summary (tokens per second, hardware FLOPs utilisation)."""

    step: Callable[[Any], torch.Tensor]
    batches: list[Any]
    work: str
    work_per_step: float
    flops_per_step: float | None
    precision: str
    facts: dict[str, Any]
    describe: str
    finish: Callable[[dict[str, Any], dict[str, Any]], None] | None = None


Builder = Callable[[Context, Any], Built]

DDP_PARALLELISM = "DistributedDataParallel (gradient_as_bucket_view)"  # the facts' words for ddp()


def ddp(ctx: Context, model: torch.nn.Module) -> DistributedDataParallel:
    """The model in DDP as every DDP workload wraps it: gradients are views into the all-reduce
    buckets (no copy between them), on the rank's own GPU (no device ids on the CPU)."""
    return DistributedDataParallel(
        model,
        device_ids=[ctx.device.index] if ctx.is_cuda else None,
        gradient_as_bucket_view=True,
    )


def optimizer_step(
    loss: torch.Tensor,
    opt: torch.optim.Optimizer,
    params: Iterable[torch.nn.Parameter] = (),
    max_grad_norm: float = 0.0,
) -> torch.Tensor:
    """A step's backward, clipping (max_grad_norm > 0: the params' gradient norm), optimizer step
    and gradient release, the same in every training workload; the loss detached, for the loop."""
    loss.backward()
    if max_grad_norm > 0:
        torch.nn.utils.clip_grad_norm_(params, max_grad_norm)
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss.detach()


def autocast_step(
    ctx: Context,
    precision: str,
    loss_of: Callable[[Any], torch.Tensor],
    opt: torch.optim.Optimizer,
    params: Iterable[torch.nn.Parameter] = (),
    max_grad_norm: float = 0.0,
) -> tuple[Callable[[Any], torch.Tensor], str]:
    """The step of a workload whose weights stay fp32 (the DDP ones): the forward and loss
    (`loss_of(batch)`) under bf16 autocast when `precision` is "bf16", then optimizer_step; and
    the precision its Built records ("bf16", else "fp32"). `params`: a list, read every step."""
    bf16 = precision == "bf16"

    def step(batch: Any) -> torch.Tensor:
        with torch.autocast(ctx.device.type, dtype=torch.bfloat16, enabled=bf16):
            loss = loss_of(batch)
        return optimizer_step(loss, opt, params, max_grad_norm)

    return step, "bf16" if bf16 else "fp32"


def train(ctx: Context, p: Any, build: Builder) -> dict[str, Any]:
    """Seed, build (timed apart: init_s), run warm-up and measured steps, summarize."""
    seed_all(p.seed)
    t0 = time.perf_counter()
    b = build(ctx, p)
    ctx.synchronize()
    init_s = time.perf_counter() - t0
    ctx.log(f"{b.describe}, init {init_s:.1f} s")
    m = measure(ctx, b.step, b.batches, p.warmup_steps, p.steps, p.min_window_s)
    m.extra.update({"params": asdict(p), **b.facts, "init_s": init_s})
    metrics, data = summarize(ctx, m, b.work, b.work_per_step, b.flops_per_step, b.precision)
    if b.finish is not None:
        b.finish(metrics, data)
    return {"metrics": metrics, "data": data}


def runner(params: type, build: Builder) -> Callable[[Context, dict[str, Any]], dict[str, Any]]:
    """A worker module's run(ctx, params): the spec's parameters, then the one loop."""

    def run(ctx: Context, raw: dict[str, Any]) -> dict[str, Any]:
        return train(ctx, params(**raw), build)

    return run


def seed_all(seed: int) -> None:
    """Same seed on every rank: every rank builds the same random model (as a broadcast would)."""
    torch.manual_seed(seed)


def data_file(data_path: str) -> Path:
    """A recipe's data_path, refused unless it is a file on this machine."""
    path = Path(data_path)
    if not path.is_file():
        raise FileNotFoundError(f"data_path {data_path}: no such file on this machine")
    return path


def token_batches(
    ctx: Context, vocab: int, batch: int, seq: int, count: int, data_path: str, seed: int
) -> tuple[list[torch.Tensor], str]:
    """`count` batches of token ids on the device: random, or cut from a local token file.

    Synthetic tokens are uniform over the vocabulary, different on every rank; a small pool is
    cycled, so the loss falls as the model memorises it (a sign that training happened). A
    `data_path` is a torch file holding an integer tensor of token ids (any shape, flattened);
    rank r takes blocks r, r + world, ... of `seq` tokens.
    """
    if not data_path:
        gen = torch.Generator(device=ctx.device).manual_seed(seed * 1000 + ctx.rank)
        batches = [
            torch.randint(0, vocab, (batch, seq), device=ctx.device, generator=gen)
            for _ in range(count)
        ]
        return batches, "synthetic (uniform random token ids)"
    tokens = torch.load(data_file(data_path), map_location="cpu", weights_only=True)
    if not isinstance(tokens, torch.Tensor) or tokens.is_floating_point():
        raise ValueError(f"data_path {data_path}: expected a tensor of integer token ids")
    tokens = tokens.flatten().long()
    need = count * batch * ctx.world_size * seq
    if tokens.numel() < need:
        raise ValueError(
            f"data_path {data_path}: {tokens.numel()} tokens; this run needs {need}"
            f" ({count} batches x {batch} x {seq} tokens x {ctx.world_size} ranks)"
        )
    if int(tokens.max()) >= vocab or int(tokens.min()) < 0:
        raise ValueError(f"data_path {data_path}: token ids outside [0, {vocab})")
    blocks = tokens[:need].view(-1, seq)[ctx.rank :: ctx.world_size]
    batches = [blocks[i * batch : (i + 1) * batch].to(ctx.device) for i in range(count)]
    return batches, f"local file {data_path}"


@dataclass
class Measured:
    """The raw record of one training run on this rank (reduced across ranks later)."""

    warmup_times: list[float]
    step_times: list[float]
    window_s: float
    warmup_losses: list[torch.Tensor]
    losses: list[torch.Tensor]
    mem_before_gib: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def measure(
    ctx: Context,
    step: Callable[[Any], torch.Tensor],
    batches: list[Any],
    warmup_steps: int,
    steps: int,
    min_window_s: float = 0.0,
) -> Measured:
    """Run warm-up steps, then measured ones; `step(batch)` returns the detached loss.

    The timed window holds at least `steps` steps and lasts at least `min_window_s` seconds
    (full-scale recipes: 30 s, long enough for clocks and power to settle; a 0.2-7 s window
    is not steady state). On a GPU, NVML's energy counter of each rank's GPU is read at the
    window's edges (kit.worker.energy).

    Warm-up steps are timed too (kept in the record, left out of every figure). Losses stay on
    the device during the loop and are read after it, so the loop adds no host sync. Peak memory counts from the first warm-up step (the model build excluded).
    """
    mem_before = None
    if ctx.is_cuda:
        torch.cuda.synchronize(ctx.device)
        mem_before = torch.cuda.memory_allocated(ctx.device) / GIB
        torch.cuda.reset_peak_memory_stats(ctx.device)
    warm_timer, warmup_losses = StepTimer(ctx), []
    warm_timer.mark()
    for i in range(warmup_steps):
        warmup_losses.append(step(batches[i % len(batches)]))
        warm_timer.mark()
    warmup_times = warm_timer.times()  # waits for the device: the window starts idle
    planned = planned_steps(ctx, steps, min_window_s, warmup_times)
    counter = EnergyCounter.open(ctx.local_rank) if ctx.is_cuda else None
    with FrozenHeap() as heap:
        dist.barrier()  # every rank starts the measured window together
        ctx.synchronize()
        timer, losses = StepTimer(ctx), []
        energy_t0 = counter.read() if counter else None
        window_t0, mono_t0 = time.perf_counter(), time.monotonic()
        timer.mark()
        i, added = warmup_steps, 0
        todo = planned
        while todo:
            for _ in range(todo):
                losses.append(step(batches[i % len(batches)]))
                timer.mark()
                i += 1
            # Every rank must run the same number of steps (each step's collectives pair up
            # across ranks: one rank stopping early leaves the others waiting forever), so the
            # rule is judged on one clock for all: the shortest rank's window, after the device
            # finished
            todo = 0
            if min_window_s > 0:
                ctx.synchronize()  # where the window ends anyway, unless it falls short
                elapsed = _reduce(ctx, [time.perf_counter() - window_t0], dist.ReduceOp.MIN)[0]
                if elapsed < min_window_s:  # the same on every rank: one elapsed, one step count
                    todo = max(1, math.ceil((min_window_s - elapsed) / (elapsed / len(losses))))
                    added += todo
        step_times = timer.times()  # the one synchronize of a window that was long enough
        energy_t1 = counter.read() if counter else None
        window_s = time.perf_counter() - window_t0
    # telemetry's clock (t_s = monotonic - telemetry's t0_monotonic_s): this rank's window on it
    extra: dict[str, Any] = {
        "window_monotonic_s": [mono_t0, time.monotonic()],
        "gc_window_s": heap.seconds,
        "gc_collections": heap.collections,
        "gc_note": FrozenHeap.NOTE,
    }
    if counter is not None:
        extra["energy_counter"] = counter.record(energy_t0, energy_t1)
        counter.close()
    if min_window_s > 0:
        extra["window_rule"] = (
            f"at least {steps} steps and at least {min_window_s:g} s of timed steps: "
            f"{len(step_times)} steps ran"
            + (
                f" ({planned} planned from the fastest warm-up step, {added} added after a "
                "synchronize when the window fell short)"
                if added
                else ""
            )
        )
    return Measured(warmup_times, step_times, window_s, warmup_losses, losses, mem_before, extra)


def planned_steps(ctx: Context, steps: int, min_window_s: float, warmup_times: list[float]) -> int:
    """How many steps the timed window runs: at least `steps`, and enough to last `min_window_s`
    at the fastest warm-up step's pace. Decided before the window opens and the same on every
    rank (the largest of the ranks' counts), so no host synchronize falls inside a window
    planned long enough; one that falls short is extended (measure)."""
    if min_window_s <= 0 or not warmup_times or min(warmup_times) <= 0:
        return steps
    need = max(steps, math.ceil(min_window_s / min(warmup_times)))
    return int(_reduce(ctx, [float(need)], dist.ReduceOp.MAX)[0])


def _reduce(
    ctx: Context, values: list[float] | list[torch.Tensor], op: dist.ReduceOp
) -> list[float]:
    """Reduce a list of numbers (or of 0-d tensors on the device) across ranks, element-wise."""
    if values and isinstance(values[0], torch.Tensor):
        t = torch.stack([v.detach().to(ctx.device, torch.float64) for v in values])
    else:
        t = torch.tensor(values, dtype=torch.float64, device=ctx.device)
    dist.all_reduce(t, op=op)
    return t.tolist()


def summarize(
    ctx: Context,
    m: Measured,
    unit: str,
    units_per_step: float,
    flops_per_step: float | None,
    precision: str,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Metrics and raw data for a result, from every rank's record.

    unit: "samples", "tokens" or "images"; units_per_step and flops_per_step are global (the
    whole job's per optimizer step). precision picks the peak for MFU ("bf16" or "fp32").
    """
    n = ctx.world_size
    energy = m.extra.pop("energy_counter", None)
    if energy is not None:
        records: list[Any] = [None] * n
        dist.all_gather_object(records, energy)
        m.extra["energy_counter"] = gathered(records)
    m.extra["gc_window_s"] = _reduce(ctx, [m.extra["gc_window_s"]], dist.ReduceOp.MAX)[0]
    # the slowest rank's time of each step: a step is done when its last rank is
    all_times = _reduce(ctx, m.warmup_times + m.step_times, dist.ReduceOp.MAX)
    warmup_times, step_times = all_times[: len(m.warmup_times)], all_times[len(m.warmup_times) :]
    window_s = _reduce(ctx, [m.window_s], dist.ReduceOp.MAX)[0]
    losses = _reduce(ctx, m.losses, dist.ReduceOp.SUM)
    warm = _reduce(ctx, m.warmup_losses, dist.ReduceOp.SUM) if m.warmup_losses else []
    losses, warm = [x / n for x in losses], [x / n for x in warm]
    median = statistics.median(step_times)
    rss_gib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / GIB  # Linux: KiB
    host_rss = _reduce(ctx, [rss_gib], dist.ReduceOp.MAX)[0]
    peak_mem = reserved = None
    if ctx.is_cuda:
        peak_mem, reserved = _reduce(
            ctx,
            [
                torch.cuda.max_memory_allocated(ctx.device) / GIB,
                torch.cuda.max_memory_reserved(ctx.device) / GIB,
            ],
            dist.ReduceOp.MAX,
        )
    gpu = torch.cuda.get_device_name(ctx.device) if ctx.is_cuda else None
    peak = peak_flops(gpu, precision) if ctx.is_cuda else None
    mfu = mfu_window = None
    if peak is not None and flops_per_step:
        mfu = flops_per_step / median / (peak[0] * n)
        mfu_window = flops_per_step * len(step_times) / window_s / (peak[0] * n)
    metrics: dict[str, Any] = {
        "throughput": record("throughput", units_per_step / median, unit),
        "throughput_window": record(
            "throughput_window", units_per_step * len(step_times) / window_s, unit
        ),
        "step_time_s": record("step_time_s", median),
    }
    if peak_mem is not None:
        metrics["peak_mem_gib"] = record("peak_mem_gib", peak_mem)
    if mfu is not None:
        metrics["mfu"] = record("mfu", mfu)
    data = {
        "unit": unit,
        f"{unit}_per_step": units_per_step,
        "warmup_steps": len(warmup_times),
        "steps": len(step_times),
        "step_times_s": warmup_times + step_times,
        "step_times_note": (
            "every step, the warmup_steps leading ones included (in no computed number; the "
            "step-time plot draws them); "
            "each the max over ranks; on a GPU the time between CUDA events recorded at the step "
            "boundaries (no host synchronize inside the window), on the CPU the wall clock"
        ),
        "warmup_s": sum(warmup_times),
        "window_s": window_s,
        "throughput_median": units_per_step / median,
        "throughput_window": units_per_step * len(step_times) / window_s,
        "loss": losses,
        "warmup_loss": warm,
        "loss_first": (warm or losses)[0],
        "loss_last": losses[-1],
        "loss_reduction": "mean over ranks",
        "peak_mem_gib": peak_mem,
        "peak_mem_reserved_gib": reserved,
        "mem_before_steps_gib": m.mem_before_gib,
        "peak_mem_note": (
            "torch.cuda.max_memory_allocated over warm-up and timed steps, max over ranks"
            if ctx.is_cuda
            else "no device memory on the CPU; host_peak_rss_gib is the process's peak RSS"
        ),
        "host_peak_rss_gib": host_rss,
        "gpu": gpu,
        "precision": precision,
        "flops_per_step": flops_per_step,
        "peak_flops_per_gpu": peak[0] if peak else None,
        "peak_flops_source": peak[1] if peak else None,
        "mfu": mfu,
        "mfu_window": mfu_window,
        "mfu_note": (
            "flops_per_step / median step time / (peak_flops_per_gpu x world_size)"
            if mfu is not None
            else "null: "
            + ("not on a GPU" if not ctx.is_cuda else f"no peak FLOP/s known for {gpu!r}")
        ),
        "matmul_precision": torch.get_float32_matmul_precision(),
        **m.extra,
    }
    ctx.log(
        f"{len(step_times)} steps, median {median * 1e3:.1f} ms, "
        f"{units_per_step / median:,.1f} {unit}/s, loss {data['loss_first']:.4f} -> "
        f"{data['loss_last']:.4f}" + (f", MFU {100 * mfu:.1f}%" if mfu is not None else "")
    )
    return metrics, data
