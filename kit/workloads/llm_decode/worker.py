"""LLM decode: prefill and token-by-token generation of the Llama-3.1-8B shape (worker side).

Per batch size B: a static KV cache of prompt_len + decode_steps positions, then `warmup`
untimed and `trials` timed generations, each a prefill of B random prompts of prompt_len tokens
and decode_steps greedy decode steps. Ranks form groups of `tp` (tp 1: every rank serves its own
copy of the model, data parallel, no traffic between GPUs; tp 2: each pair of ranks one model,
two all-reduces per layer per step). On a GPU the decode step is one CUDA graph per batch size
("fused", "graph" or "compile"; or eager), replayed back to back: the host only
queues replays and CUDA events, and reads nothing back until the generation ends.

Timing (CUDA events on a GPU, kit.workloads.timing.StepTimer; the wall clock on the CPU): an event
before the prefill, after it, and after every decode step. Each step's time is the slowest rank's.

    prefill tokens/s = B x prompt_len x groups / median prefill time
    decode tokens/s  = B x decode_steps x groups / median generation's decode time
    time per output token (TPOT) = a decode step's time: median and 90th percentile of all steps
    bytes a step must read = this rank's weights (the embedding: B rows) + K and V of every
        position already written (the mean over the generation's steps)
    read GB/s = bytes a step must read / mean step time; share = that / the datasheet HBM GB/s

The bytes a step reads and the largest batch that fits: kit.workloads.llm_decode.memory.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import torch
import torch.distributed as dist

from kit.shared.gpu_specs import spec_for
from kit.shared.metrics import record
from kit.shared.p2p import p2p_off
from kit.worker.common import Context, FrozenHeap
from kit.worker.energy import EnergyCounter, gathered
from kit.workloads.llm_decode.fused import fused_step
from kit.workloads.llm_decode.kernels import picked
from kit.workloads.llm_decode.memory import bytes_per_step, fits, largest_batch
from kit.workloads.llm_decode.model import Generation, Llama, Shard
from kit.workloads.llm_decode.params import LlmDecodeParams
from kit.workloads.timing import StepTimer

PROBE_STEPS = 8  # greedy tokens the correctness probe generates at batch 1
PROBE_LOGITS = 64  # first logits of the probe's prefill recorded


def shard_of(ctx: Context, tp: int) -> Shard:
    """This rank's place: consecutive ranks form a tensor-parallel group (every rank creates
    every group, as torch.distributed requires)."""
    if ctx.world_size % tp:
        raise ValueError(f"tp {tp} does not divide the {ctx.world_size} ranks of this run")
    if tp == 1:
        return Shard(0, 1)
    mine = None
    for first in range(0, ctx.world_size, tp):
        group = dist.new_group(list(range(first, first + tp)))
        if first <= ctx.rank < first + tp:
            mine = Shard(ctx.rank - first, tp, group)
    assert mine is not None
    return mine


def _reduce(ctx: Context, values: list[float], op: Any) -> list[float]:
    t = torch.tensor(values, dtype=torch.float64, device=ctx.device)
    dist.all_reduce(t, op=op)
    return t.tolist()


def _p90(xs: list[float]) -> float:
    return statistics.quantiles(xs, n=10, method="inclusive")[-1] if len(xs) > 1 else xs[0]


@dataclass(frozen=True)
class Replay:
    """A captured step's replay, holding the step it captured: the graph holds only device
    addresses, and the step's own tensors outside the graph's pool (the attention kernel's
    scratch, the one-shot's symmetric memory) must live as long as it replays. Freed, the scratch
    goes back to the caching allocator for other tensors while every replay still writes it, and
    the symmetric memory is unmapped (call c21, 2026-11-30: an illegal memory access at the first
    replay)."""

    graph: torch.cuda.CUDAGraph
    step: Callable[[], Any]

    def __call__(self) -> None:
        self.graph.replay()


def stepper(
    ctx: Context, gen: Generation, mode: str, notes: list[str]
) -> tuple[Callable[[], Any], str]:
    """The decode step as the timed loop calls it: on a GPU one CUDA graph of the step, captured
    after warm-up steps on a side stream ("fused": the step with its small kernels fused,
    kit.workloads.llm_decode.fused: Triton kernels at batch 1, torch.compile's pieces above;
    "graph": the eager step's kernels; "compile": the whole step compiled by torch.compile
    first); "eager", and the CPU, call the step itself. A
    compile that fails falls back to the eager step's graph, and the result's notes say so.
    Returns the step and the mode that ran ("graph" after such a fallback)."""
    if not ctx.is_cuda or mode == "eager":
        return gen.step, "eager"
    fn: Callable[[], Any] = gen.step
    if mode == "compile":
        fn = torch.compile(gen.step, dynamic=False)
    elif mode == "fused":
        fn = fused_step(gen)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    try:
        with torch.cuda.stream(side):
            for _ in range(3):
                fn()
    except Exception as exc:  # a compile failure: the eager step instead, said in the notes
        if mode == "graph":  # (never `fn is gen.step`: each gen.step is a new bound method)
            raise
        notes.append(
            f"torch.compile of the {mode} decode step failed ({type(exc).__name__}); eager step"
        )
        fn, mode = gen.step, "graph"
        with torch.cuda.stream(side):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    what = {
        "fused": " (fused: at batch 1 the Triton kernels where they can run, at the other batch"
        " sizes torch.compile's small kernels around cuBLAS's matmuls)",
        "compile": " (torch.compile'd step)",
    }
    notes.append("decode step captured as one CUDA graph per batch size" + what.get(mode, ""))
    # empty where batch 1 ran the compiled pieces (no Triton, or a head dim the kernels refuse)
    if mode == "fused" and gen.tokens.shape[0] == 1 and picked():
        notes.append(  # the same words for every run: the picks, which vary, are in its data
            "batch 1: five Triton kernels a layer (kit.workloads.llm_decode.kernels), block sizes"
            " autotuned at its first step (the run's picks: its data's kernel_picks)"
        )
        if gen.model.one_shot:
            notes.append(
                "batch 1: the tensor-parallel all-reduces by symmetric memory's one-shot kernel "
                "(torch.distributed._symmetric_memory: each GPU reads the others' partial sums "
                "over P2P); the larger batches' by NCCL"
            )
    return Replay(graph, fn), mode


def one_shot_allowed(ctx: Context, p: LlmDecodeParams) -> bool:
    """Whether batch 1's all-reduces may run as symmetric memory's one-shot (params all_reduce):
    on GPUs, in the fused step, with P2P allowed (the one-shot reads the other GPUs over P2P, so
    a variant without it measures NCCL's path, as it asks). Where not, the notes say why."""
    if p.all_reduce != "one-shot":
        return False
    why = None
    if not ctx.is_cuda:
        why = "the one-shot is a GPU kernel"
    elif p2p_off(os.environ):
        why = "this variant has P2P off, and the one-shot would read the other GPU over it"
    elif p.step_mode != "fused":
        why = f"only the fused step's batch-1 kernels use it, this run's step is {p.step_mode}"
    if why:
        name = {"nccl": "NCCL"}.get(ctx.backend, ctx.backend)
        ctx.notes.append(f"all_reduce one-shot asked; {name}'s all-reduce ran: {why}")
    return why is None


def generate(
    ctx: Context, gen: Generation, step: Callable[[], Any], prompt: torch.Tensor, steps: int
) -> tuple[float, list[float]]:
    """One generation: the prefill's time and every decode step's (this rank's)."""
    prefill = StepTimer(ctx)
    prefill.mark()
    gen.start(prompt)
    prefill.mark()
    timer = StepTimer(ctx)
    timer.mark()
    for _ in range(steps):
        step()
        timer.mark()
    return prefill.times()[0], timer.times()


def batch_energy(
    ctx: Context, counter: EnergyCounter | None, start: float | None, tokens: int
) -> dict[str, Any]:
    """Every GPU's energy over one batch size's timed generations (NVML's total-energy counter
    read after a synchronize at their edges, each rank its own GPU) and the joules per output
    token: all GPUs' energy over the tokens every model copy generated (each generation's
    prefill included: an output token's cost with its share of the prompt). On the CPU, or
    where the counter cannot be read, `j_per_token` is None and `reason` says why."""
    if counter is None:
        record: dict[str, Any] = {"energy_j": None, "reason": "no GPU: no energy counter"}
    else:
        ctx.synchronize()
        record = counter.record(start, counter.read())
    records: list[Any] = [None] * ctx.world_size
    dist.all_gather_object(records, record)
    energy = gathered(records)
    energy["read_at"] = (
        "the edges of this batch size's timed generations, after a device synchronize, on each "
        "rank's GPU"
    )
    energy["j_per_token"] = energy["energy_j"] / tokens if energy["complete"] else None
    energy["tokens"] = tokens
    if not energy["complete"]:
        energy["reason"] = next((r["reason"] for r in records if r.get("reason")), None)
    return energy


def measure_batch(
    ctx: Context,
    model: Llama,
    p: LlmDecodeParams,
    batch: int,
    groups: int,
    notes: list[str],
    counter: EnergyCounter | None = None,
    what: str = "",
) -> dict[str, Any]:
    gen = Generation(model, batch, p.prompt_len, p.decode_steps)
    rng = torch.Generator(device=ctx.device).manual_seed(p.seed * 7919 + batch)
    prompt = torch.randint(0, p.vocab_size, (batch, p.prompt_len), device=ctx.device, generator=rng)
    gen.start(prompt)
    step, ran = stepper(ctx, gen, p.step_mode, notes)
    for _ in range(p.warmup):
        generate(ctx, gen, step, prompt, p.decode_steps)
    prefills, decodes, steps = [], [], []
    start: float | None = None
    with FrozenHeap():
        for trial in range(p.trials):
            dist.barrier()
            ctx.synchronize()
            if trial == 0 and counter is not None:
                start = counter.read()
            pre, times = generate(ctx, gen, step, prompt, p.decode_steps)
            prefills.append(pre)
            decodes.append(sum(times))
            steps += times
    energy = batch_energy(ctx, counter, start, batch * p.decode_steps * groups * p.trials)
    # the slowest rank's: prefill and decode per trial, and each step
    n = p.trials
    got = _reduce(ctx, prefills + decodes + steps, dist.ReduceOp.MAX)
    prefills, decodes, steps = got[:n], got[n : 2 * n], got[2 * n :]
    pre_s, dec_s = statistics.median(prefills), statistics.median(decodes)
    read = bytes_per_step(model, p, batch, gen.cache.max_len)
    mean_step = dec_s / p.decode_steps
    out = {
        "batch": batch,
        "prefill_s": prefills,
        "decode_s": decodes,
        "prefill_tokens_per_s": batch * p.prompt_len * groups / pre_s,
        "decode_tokens_per_s": batch * p.decode_steps * groups / dec_s,
        "tpot_median_s": statistics.median(steps),
        "tpot_p90_s": _p90(steps),
        "step_times_s": steps,
        "bytes_per_step": read,
        "read_gbps": read["needed"] / mean_step / 1e9,
        "tokens_sample": gen.out[0, :8].tolist(),
        "energy": energy,
        "step_mode": ran,
    }
    ctx.log(
        f"{what}batch {batch}: prefill {out['prefill_tokens_per_s']:,.0f} tokens/s, decode "
        f"{out['decode_tokens_per_s']:,.1f} tokens/s, TPOT {out['tpot_median_s'] * 1e3:.2f} ms "
        f"(p90 {out['tpot_p90_s'] * 1e3:.2f}), reads {out['read_gbps']:.1f} GB/s"
    )
    del gen, step
    if ctx.is_cuda:
        torch.cuda.empty_cache()
    return out


def local_step(ctx: Context, model: Llama, p: LlmDecodeParams) -> dict[str, Any]:
    """Tensor parallel's communication at batch 1, by difference: the same step, captured and
    timed the same way (measure_batch) with its all-reduces and the logits' all-gather left out
    (each rank computing its shard alone). The measured step less this one is what the
    collectives cost a token, as the step ran them (their own time and any wait they expose)."""
    model.local_only = True
    try:
        out = measure_batch(ctx, model, p, 1, 1, [], what="without its all-reduces, ")
    finally:
        model.local_only = False
    return {"tpot_median_s": out["tpot_median_s"], "tpot_p90_s": out["tpot_p90_s"]}


def probe(ctx: Context, model: Llama, p: LlmDecodeParams) -> dict[str, Any]:
    """Logits and greedy tokens of one fixed prompt at batch 1, eager: the same on any tp
    up to rounding (the tests hold a tensor-parallel run against a one-rank run)."""
    steps = min(PROBE_STEPS, p.decode_steps)
    gen = Generation(model, 1, p.prompt_len, steps)
    rng = torch.Generator().manual_seed(p.seed + 12345)
    prompt = torch.randint(0, p.vocab_size, (1, p.prompt_len), generator=rng).to(ctx.device)
    logits = gen.start(prompt)
    for _ in range(steps):
        gen.step()
    assert gen.logits is not None
    return {
        "prefill_logits": logits[0, :PROBE_LOGITS].tolist(),
        "last_logits": gen.logits[0, :PROBE_LOGITS].tolist(),
        "tokens": gen.out[0].tolist(),
    }


def run(ctx: Context, params: dict[str, Any]) -> dict[str, Any]:
    p = LlmDecodeParams(**params)
    shard = shard_of(ctx, p.tp)
    groups = ctx.world_size // p.tp
    torch.manual_seed(p.seed)
    t0 = time.perf_counter()
    model = Llama(p, shard, ctx.device)
    model.one_shot = one_shot_allowed(ctx, p)
    ctx.synchronize()
    build_s = time.perf_counter() - t0
    mode = p.step_mode if ctx.is_cuda else "eager"  # what the log line announces
    ctx.log(
        f"llm decode: {model.param_count() * p.tp / 1e9:.3f}B params, tp {p.tp} x {groups} "
        f"groups, {p.dtype}, prompt {p.prompt_len}, {p.decode_steps} decode steps, step {mode}, "
        f"build {build_s:.1f} s"
    )
    notes: list[str] = []
    mono_t0 = time.monotonic()
    counter = EnergyCounter.open(ctx.local_rank) if ctx.is_cuda else None
    batches = [measure_batch(ctx, model, p, b, groups, notes, counter) for b in p.batch_sizes]
    window = [mono_t0, time.monotonic()]
    one = next((x for x in batches if x["batch"] == 1), None)
    local = local_step(ctx, model, p) if p.tp > 1 and one is not None else None
    if counter is not None:
        counter.close()
    probed = probe(ctx, model, p)
    fit = None
    if ctx.is_cuda:

        def agreed(b: int) -> bool:  # every rank of the run agrees: the smallest answer
            return _reduce(ctx, [float(fits(ctx, model, p, b))], dist.ReduceOp.MIN)[0] > 0

        fit = largest_batch(p, agreed)
        fit["free_gib_after"] = torch.cuda.mem_get_info(ctx.device)[0] / 2**30
    gpu = torch.cuda.get_device_name(ctx.device) if ctx.is_cuda else None
    spec = spec_for(gpu)
    hbm = spec.hbm_gbs if spec and spec.hbm_gbs else None
    top = max(batches, key=lambda x: x["batch"])
    metrics = {
        "decode_tokens_per_s": record("decode_tokens_per_s", top["decode_tokens_per_s"]),
        "prefill_tokens_per_s": record("prefill_tokens_per_s", top["prefill_tokens_per_s"]),
    }
    if one is not None:
        metrics |= {
            "decode_tokens_per_s_b1": record("decode_tokens_per_s_b1", one["decode_tokens_per_s"]),
            "tpot_median_ms": record("tpot_median_ms", one["tpot_median_s"] * 1e3),
            "tpot_p90_ms": record("tpot_p90_ms", one["tpot_p90_s"] * 1e3),
            "decode_read_gbps_b1": record("decode_read_gbps_b1", one["read_gbps"]),
        }
        if hbm:
            metrics["hbm_share_b1"] = record("hbm_share_b1", one["read_gbps"] / hbm)
        if local is not None:
            alone = local["tpot_median_s"] * 1e3
            metrics["tpot_local_ms_b1"] = record("tpot_local_ms_b1", alone)
            comm = one["tpot_median_s"] * 1e3 - alone
            if comm > 0:  # a difference: at or below zero it is inside the steps' noise
                metrics["tp_comm_ms_b1"] = record("tp_comm_ms_b1", comm)
            else:
                ctx.notes.append(
                    f"tensor-parallel communication at batch 1 not measurable: the step without "
                    f"its all-reduces took {alone:.3f} ms, the step {one['tpot_median_s'] * 1e3:.3f}"
                )
        if one["energy"]["j_per_token"] is not None:
            metrics["j_per_token_b1"] = record("j_per_token_b1", one["energy"]["j_per_token"])
    if top["energy"]["j_per_token"] is not None:
        metrics["j_per_token"] = record("j_per_token", top["energy"]["j_per_token"])
    if fit is not None and not fit["capped"]:
        metrics["max_batch_fit"] = record("max_batch_fit", fit["largest_batch"])
    if fit is None:
        ctx.notes.append("largest batch that fits: measured on a GPU only")
    elif fit["capped"]:
        ctx.notes.append(f"largest batch that fits: at least fit_max_batch {p.fit_max_batch}")
    ctx.notes.extend(sorted(set(notes)))
    # the mode every batch size ran (a compile that failed at one fell back to graph there)
    ran = sorted({b["step_mode"] for b in batches})
    if ran != [p.step_mode]:
        where = "the CPU runs the eager step" if not ctx.is_cuda else f"ran {', '.join(ran)}"
        ctx.notes.append(f"step_mode {p.step_mode} asked; {where}")
    mode = ran[0] if len(ran) == 1 else "+".join(ran)
    picks = picked() or None
    data = {
        "params": asdict(p),
        "tp": p.tp,
        "groups": groups,
        "step_mode": mode,
        # the one-shot runs only in batch 1's Triton kernels (picks: they ran)
        "all_reduce_b1": "one-shot" if model.one_shot and picks else ctx.backend,
        "kernel_picks": picks,  # the Triton kernels' autotuned block sizes
        "headline_batch": top["batch"],
        "batches": batches,
        "probe": probed,
        "local_step_b1": local,
        "fit": fit,
        "gpu": gpu,
        "hbm_gbs": hbm,
        "hbm_source": spec.source if hbm and spec else None,
        "param_count": (model.param_count() - model.embed.numel()) * p.tp + model.embed.numel(),
        "weight_bytes_per_rank": model.weight_bytes(),
        "build_s": build_s,
        "window_monotonic_s": window,
        "timing": "CUDA events" if ctx.is_cuda else "host clock",
        "read_note": (
            "bytes a decode step must read on one GPU: its weights (the embedding: the batch's "
            "rows) plus K and V of the positions already written, the mean over the steps; "
            "kv_issued is what the static cache's full-length attention reads"
        ),
    }
    return {"metrics": metrics, "data": data}
