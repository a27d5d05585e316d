#!/usr/bin/env python3
"""Where a batch-1 decode step's time goes, in one device call on one GPU (issue: decode at the
memory bound). A study's one-off instrument; the kit's workload is kit/workloads/llm_decode.

For the Llama-3.1-8B shape in bf16 (random weights, kit.workloads.llm_decode.model), on GPU 0:
  ceiling   the copy ceiling: a 2 GiB device-to-device copy, bytes read + written over time
  gemv      F.linear at batch 1 for each weight shape of a layer and the LM head, alone (CUDA
            graph of 20 calls, so launch gaps count as in a step): GB/s of weights read
  steps     the kit's decode step at batch 1 (prompt 512, the static cache of 640 positions),
            each variant captured as one CUDA graph and replayed 200 times: ms per step, the
            GB/s of the bytes it must read (kit.workloads.llm_decode.worker.bytes_per_step),
            its share of the ceiling, and the kernels one replay launches (torch.profiler)
            variants: graph (eager kernels), compile (torch.compile default, as the kit's
            "compile"), autotune (torch.compile mode max-autotune-no-cudagraphs)
Writes $OUT/step_variants.json and prints one table. `--cpu` runs a tiny shape on the CPU
(eager only) to check the script itself.

    python3 reports/measurements/2026-11-28-decode-step/step_variants.py [--variants graph,compile]
"""

from __future__ import annotations

import argparse
import copy
import functools
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # triton_step, this study's kernels

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from kit.workloads.llm_decode.model import Generation, Llama, Shard, rotate  # noqa: E402
from kit.workloads.llm_decode.params import LlmDecodeParams  # noqa: E402
from kit.workloads.llm_decode.worker import bytes_per_step  # noqa: E402


def ceiling(device: torch.device) -> float:
    """GB/s of a 2 GiB device-to-device copy, read + written, best of 10."""
    n = 2 << 30
    src = torch.empty(n, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    best = float("inf")
    for _ in range(10):
        t0, t1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        t0.record()
        dst.copy_(src)
        t1.record()
        t1.synchronize()
        best = min(best, t0.elapsed_time(t1) / 1e3)
    return 2 * n / best / 1e9


def graphed(fn: Any, reps: int, reset: Any = None) -> torch.cuda.CUDAGraph:
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            if reset:
                reset()
            fn()
    torch.cuda.current_stream().wait_stream(side)
    if reset:
        reset()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(reps):
            fn()
    return graph


def timed(replay: Any, n: int, reset: Any = None) -> float:
    """Median seconds of one replay over n, after 3 untimed; `reset` runs before each, untimed."""
    for _ in range(3):
        if reset:
            reset()
        replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(n):
        if reset:
            reset()
        t0, t1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        t0.record()
        replay()
        t1.record()
        t1.synchronize()
        times.append(t0.elapsed_time(t1) / 1e3)
    return statistics.median(times)


def kernels(replay: Any) -> tuple[int, list[dict[str, Any]]]:
    """Kernels one replay launches, and the 12 that take the most device time in it."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        replay()
        torch.cuda.synchronize()
    events = [e for e in prof.events() if e.device_type.name == "CUDA"]
    by: dict[str, list[float]] = {}
    for e in events:
        by.setdefault(e.name[:90], []).append(e.device_time_total)
    top = sorted(by.items(), key=lambda kv: -sum(kv[1]))[:12]
    return len(events), [{"kernel": k, "n": len(v), "us": sum(v)} for k, v in top]


def gemv(model: Llama, device: torch.device, autotune: bool = False) -> list[dict[str, Any]]:
    """Each weight's batch-1 matmul alone; `autotune`: also torch.compile max-autotune's choice
    (Triton templates against cuBLAS) for the same call."""
    layer = model.layers[0]
    rows = []
    x = torch.randn(1, 1, model.p.hidden_size, device=device, dtype=model.dtype)
    for name, w in (
        ("wqkv", layer.wqkv),
        ("wo", layer.wo),
        ("wgu", layer.wgu),
        ("wdown", layer.wdown),
        ("head", model.head),
    ):
        inp = (
            torch.randn(1, 1, w.shape[1], device=device, dtype=model.dtype)
            if w.shape[1] != x.shape[-1]
            else x
        )
        g = graphed(lambda inp=inp, w=w: F.linear(inp, w), 20)
        s = timed(g.replay, 20) / 20
        nbytes = w.numel() * w.element_size()
        row = {
            "weight": name,
            "shape": list(w.shape),
            "MB": nbytes / 1e6,
            "us": s * 1e6,
            "GB_s": nbytes / s / 1e9,
        }
        if autotune:
            tuned = torch.compile(
                lambda inp, w: F.linear(inp, w), dynamic=False, mode="max-autotune-no-cudagraphs"
            )
            g = graphed(lambda inp=inp, w=w, tuned=tuned: tuned(inp, w), 20)
            s = timed(g.replay, 20) / 20
            row["autotuned_us"], row["autotuned_GB_s"] = s * 1e6, nbytes / s / 1e9
        rows.append(row)
    return rows


def tri_alone(model: Llama, p: LlmDecodeParams, device: torch.device) -> list[dict[str, Any]]:
    """Each Triton kernel of triton_step alone at batch 1 (a CUDA graph of 20, autotuned first),
    against what it replaces: us, GB/s of the weights (or the cache) it reads, its config."""
    import triton_step as ts

    gen = Generation(model, 1, p.prompt_len, p.decode_steps)
    gen.start(torch.randint(0, p.vocab_size, (1, p.prompt_len), device=device))
    gen.pos.fill_(p.prompt_len + p.decode_steps // 2)
    layer, kv, pos = model.layers[0], gen.cache.kv[0], gen.pos
    hq, hkv, dh, d, inter = p.num_heads, model.hkv, model.dh, p.hidden_size, p.intermediate_size
    group, eps = hq // hkv, p.rms_eps
    h = torch.randn(d, device=device, dtype=model.dtype)
    q = torch.randn(hq * dh, device=device, dtype=model.dtype)
    a = torch.empty_like(q)
    act = torch.randn(inter, device=device, dtype=model.dtype)
    maxlen = gen.cache.max_len
    assert model.rope is not None
    rope = model.rope

    def qkv() -> None:
        ts.qkv_kernel[lambda meta: ((hq + 2 * hkv) * (dh // 2) // meta["R"],)](
            h, layer.norm1, layer.wqkv, rope, pos, kv, q,
            d, dh // 2, hq, hkv, maxlen, rope.stride(0), eps,
        )  # fmt: skip

    def wo() -> None:
        ts.gemv_add_kernel[lambda meta: (d // meta["R"],)](a, layer.wo, h, d, hq * dh)

    def down() -> None:
        ts.gemv_add_kernel[lambda meta: (d // meta["R"],)](act, layer.wdown, h, d, inter)

    def gu() -> None:
        ts.gu_kernel[lambda meta: (inter // meta["R"],)](
            h, layer.norm2, layer.wgu, act, inter, d, eps
        )

    def attn(splits: int, bl: int = 64) -> Any:
        gp = 16
        part = torch.empty((hkv * splits * gp, dh), device=device, dtype=torch.float32)
        stat = torch.empty((hkv * splits * gp, 2), device=device, dtype=torch.float32)
        chunk = math.ceil(math.ceil(maxlen / splits) / bl) * bl

        def run() -> None:
            ts.attn_kernel[(hkv, splits)](
                q, kv, pos, a, part, stat, dh**-0.5, hkv, group, gp, dh, maxlen, splits, chunk, bl
            )
            if splits > 1:
                ts.combine_kernel[(hq,)](part, stat, a, group, gp, dh, splits)

        return run

    _, bias = model.step_tables(pos, gen.cache)

    def attn_bmm() -> None:
        keys, values = kv[0].view(hkv, -1, dh), kv[1].view(hkv, -1, dh)
        sc = torch.baddbmm(
            bias.expand(hkv, group, -1),
            q.view(hkv, group, dh),
            keys.transpose(1, 2),
            alpha=dh**-0.5,
        )
        a.copy_(torch.bmm(sc.softmax(-1, dtype=torch.float32).to(model.dtype), values).view(-1))

    filled = 2 * hkv * (int(pos) + 1) * dh * 2
    cases = [
        ("qkv (norm, RoPE, cache write)", qkv, layer.wqkv, ts.qkv_kernel),
        ("wo (+ residual)", wo, layer.wo, ts.gemv_add_kernel),
        ("gu (norm, SiLU * up)", gu, layer.wgu, ts.gu_kernel),
        ("down (+ residual)", down, layer.wdown, ts.gemv_add_kernel),
    ]
    rows = []
    for name, fn, w, kernel in cases:
        fn()  # autotune outside the graph
        torch.cuda.synchronize()
        config = str(getattr(kernel, "best_config", ""))
        g = graphed(fn, 20)
        s = timed(g.replay, 20) / 20
        nbytes = w.numel() * w.element_size()
        rows.append({"kernel": name, "us": s * 1e6, "GB_s": nbytes / s / 1e9, "config": config})
    for name, fn in [(f"attn splits {n}", attn(n)) for n in (1, 4, 8, 16, 32)] + [
        ("attn baddbmm/softmax/bmm", attn_bmm)
    ]:
        g = graphed(fn, 20)
        s = timed(g.replay, 20) / 20
        rows.append({"kernel": name, "us": s * 1e6, "GB_s": filled / s / 1e9, "config": ""})
    return rows


def pieces(model: Llama, gen: Generation, attention: str, write: str = "eager") -> Any:
    """The kit's decode step with its small kernels fused by torch.compile, piece by piece (the
    matmuls stay cuBLAS's): residual add + RMSNorm one kernel, RoPE + K/V packing one, K and V
    written to one combined cache by one index_copy_, softmax + cast one, SiLU * up one. With
    `attention` "sdpa": torch's scaled_dot_product_attention over the grouped queries instead of
    baddbmm / softmax / bmm. With `write` "compiled": the cache write inside RoPE's compiled
    region. Returns a step() like Generation.step (same state, same outputs)."""
    p, b = model.p, gen.tokens.shape[0]
    hq, hkv, dh = p.num_heads, model.hkv, model.dh
    group, eps, scale = hq // hkv, p.rms_eps, 1.0 / math.sqrt(dh)
    compiled = functools.partial(torch.compile, dynamic=False, fullgraph=True)
    kv = torch.stack([gen.cache.k, gen.cache.v], dim=1).contiguous()  # [L, 2, B, hkv, len, dh]

    @compiled
    def norm(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return F.rms_norm(x, (x.shape[-1],), w, eps)

    @compiled
    def add_norm(h: torch.Tensor, d: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, ...]:
        h = h + d
        return h, F.rms_norm(h, (h.shape[-1],), w, eps)

    def rope_kv_body(qkv: torch.Tensor, cs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        rotated = rotate(qkv[:, :, : hq + hkv], cs)
        q = rotated[:, :, :hq].reshape(b * hkv, group, dh)
        k = rotated[:, :, hq:].transpose(1, 2)
        v = qkv[:, :, hq + hkv :].transpose(1, 2)
        return q.contiguous(), torch.stack([k, v]).contiguous()

    rope_kv = compiled(rope_kv_body)

    @compiled
    def rope_write(
        qkv: torch.Tensor, cs: torch.Tensor, layer_kv: torch.Tensor, pos: torch.Tensor
    ) -> torch.Tensor:
        """rope_kv and the cache write in one compiled region (pieces2)."""
        q, new = rope_kv_body(qkv, cs)
        layer_kv.index_copy_(3, pos, new)
        return q

    @compiled
    def softmax(scores: torch.Tensor) -> torch.Tensor:
        return scores.softmax(-1, dtype=torch.float32).to(scores.dtype)

    @compiled
    def swiglu(gu: torch.Tensor) -> torch.Tensor:
        gate, up = gu.chunk(2, dim=-1)
        return F.silu(gate) * up

    def attend(q: torch.Tensor, layer_kv: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        n = b * hkv
        k, v = layer_kv[0].view(n, -1, dh), layer_kv[1].view(n, -1, dh)
        if attention == "sdpa":
            a = F.scaled_dot_product_attention(
                q.view(b, hkv, group, dh),
                layer_kv[0],
                layer_kv[1],
                attn_mask=bias.view(1, 1, 1, -1).expand(b, hkv, group, -1),
            )
            return a.reshape(b, 1, hq * dh)
        scores = torch.baddbmm(bias.expand(n, group, -1), q, k.transpose(1, 2), alpha=scale)
        return torch.bmm(softmax(scores), v).reshape(b, 1, hq * dh)

    def decode() -> torch.Tensor:
        pos = gen.pos
        assert model.rope is not None
        cs = model.rope.index_select(1, pos).to(model.dtype)
        hidden = torch.full((), float("-inf"), device=model.device, dtype=model.dtype)
        bias = torch.where(gen.cache.positions <= pos, torch.zeros_like(hidden), hidden)
        h = F.embedding(gen.tokens, model.embed)
        x = norm(h, model.layers[0].norm1)
        delta: torch.Tensor | None = None
        for i, layer in enumerate(model.layers):
            if delta is not None:
                h, x = add_norm(h, delta, layer.norm1)
            qkv = F.linear(x, layer.wqkv).view(b, 1, hq + 2 * hkv, dh)
            if write == "compiled":
                q = rope_write(qkv, cs, kv[i], pos)
            else:
                q, new = rope_kv(qkv, cs)
                kv[i].index_copy_(3, pos, new)
            h, x = add_norm(h, F.linear(attend(q, kv[i], bias), layer.wo), layer.norm2)
            delta = F.linear(swiglu(F.linear(x, layer.wgu)), layer.wdown)
        assert delta is not None
        return F.linear(norm(h + delta, model.norm), model.head).float()[:, -1]

    def step() -> torch.Tensor:
        logits = decode()
        nxt = logits.argmax(-1, keepdim=True)
        gen.tokens.copy_(nxt)
        gen.out.index_copy_(1, gen.pos - (gen.prompt_len - 1), nxt)
        gen.pos.add_(1)
        return logits

    return step


def agreement(model: Llama, p: LlmDecodeParams, device: torch.device, mode: str) -> dict:
    """One step's logits, the variant against the kit's step from the same state: the largest
    |difference|, the largest |logit|, whether the next token agrees; and the yardstick, the
    kit's own step for the same sequence at batch 1 and in a batch of 2 (other cuBLAS kernels,
    other bf16 rounding: the spread two right answers show)."""
    prompt = torch.randint(0, p.vocab_size, (1, p.prompt_len), device=device)
    gen = Generation(model, 1, p.prompt_len, p.decode_steps)
    gen.start(prompt)
    step = variant(model, gen, mode)
    tokens = gen.tokens.clone()
    gen.pos.fill_(p.prompt_len)
    step()  # compiled, autotuned; the same position again below
    gen.pos.fill_(p.prompt_len)
    gen.tokens.copy_(tokens)
    theirs = step().clone()
    gen.pos.fill_(p.prompt_len)
    gen.tokens.copy_(tokens)  # the step wrote its next token there
    ours = model.decode(gen.tokens, gen.pos, gen.cache)
    wide = fp32(model)
    ref = Generation(wide, 1, p.prompt_len, p.decode_steps)
    ref.start(prompt)
    ref.pos.fill_(p.prompt_len)
    truth = wide.decode(tokens, ref.pos, ref.cache)
    del wide, ref
    return {
        "max_abs_diff": float((theirs - ours).abs().max()),
        "max_abs_logit": float(ours.abs().max()),
        "same_token": bool((theirs.argmax(-1) == ours.argmax(-1)).all()),
        "kit_vs_fp32_max_abs_diff": float((ours - truth).abs().max()),
        "variant_vs_fp32_max_abs_diff": float((theirs - truth).abs().max()),
        "fp32_same_token_kit": bool((truth.argmax(-1) == ours.argmax(-1)).all()),
        "fp32_same_token_variant": bool((truth.argmax(-1) == theirs.argmax(-1)).all()),
    }


def fp32(model: Llama) -> Llama:
    """The same bf16 weights held and computed in fp32: the reference both bf16 steps round
    away from (the prompt's prefill runs in fp32 too)."""
    wide = copy.copy(model)
    wide.dtype = torch.float32
    wide.embed, wide.norm, wide.head = model.embed.float(), model.norm.float(), model.head.float()
    wide.layers = []
    for layer in model.layers:
        twin = copy.copy(layer)
        for name in ("wqkv", "wo", "wgu", "wdown", "norm1", "norm2"):
            setattr(twin, name, getattr(layer, name).float())
        wide.layers.append(twin)
    return wide


def variant(model: Llama, gen: Generation, mode: str) -> Any:
    """The step function of a variant name."""
    if mode == "pieces":
        return pieces(model, gen, "bmm")
    if mode == "pieces_sdpa":
        return pieces(model, gen, "sdpa")
    if mode == "pieces2":
        return pieces(model, gen, "bmm", write="compiled")
    if mode == "kit_fused":  # the kit's step_mode fused, as landed from pieces2
        from kit.workloads.llm_decode.fused import fused_step

        return fused_step(gen, backend="inductor" if gen.tokens.is_cuda else "aot_eager")
    if mode.startswith("tri"):  # tri, tri_s1 (attention splits), tri/qkv+attn (those pieces)
        from triton_step import ALL, tri_step

        head, _, named = mode.partition("/")
        splits = int(head.partition("_s")[2] or 8)
        return tri_step(gen, frozenset(named.split("+")) if named else ALL, splits=splits)
    if mode == "compile":
        return torch.compile(gen.step, dynamic=False)
    if mode == "autotune":
        return torch.compile(gen.step, dynamic=False, mode="max-autotune-no-cudagraphs")
    return gen.step


def step_variant(
    model: Llama, p: LlmDecodeParams, spec: str, device: torch.device
) -> dict[str, Any]:
    """One variant at one batch ("pieces@8"; batch 1 without @)."""
    mode, _, batch_text = spec.partition("@")
    batch = int(batch_text or 1)
    gen = Generation(model, batch, p.prompt_len, p.decode_steps)
    prompt = torch.randint(0, p.vocab_size, (batch, p.prompt_len), device=device)
    gen.start(prompt)
    fn = gen.step
    # every replay decodes the same position (the graph would otherwise walk past the cache's
    # end); the reset is a kernel outside the graph and outside the timed window
    where = p.prompt_len + p.decode_steps // 2

    def reset() -> None:
        gen.pos.fill_(where)

    fn = variant(model, gen, mode)
    t0 = time.perf_counter()
    g = graphed(fn, 1, reset)
    prepared_s = time.perf_counter() - t0
    s = timed(g.replay, 200, reset)
    need = bytes_per_step(model, p, batch, gen.cache.max_len)["needed"]
    out: dict[str, Any] = {
        "mode": spec,
        "batch": batch,
        "tokens_s": batch / s,
        "ms": s * 1e3,
        "GB_s": need / s / 1e9,
        "bytes": need,
        "prepare_s": prepared_s,
    }
    reset()
    out["kernels"], out["top"] = kernels(g.replay)
    if mode.startswith(("pieces", "kit_fused", "tri")) and batch == 1:
        out["agreement"] = agreement(model, p, device, mode)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--variants", default="graph,pieces,pieces_sdpa,compile")
    ap.add_argument("--cpu", action="store_true", help="a tiny shape, eager, on the CPU")
    ap.add_argument("--autotune-gemv", action="store_true", help="max-autotune each matmul too")
    ap.add_argument("--tri-alone", action="store_true", help="triton_step's kernels alone")
    args = ap.parse_args()
    out = Path(os.environ.get("OUT", "/tmp/out"))
    out.mkdir(parents=True, exist_ok=True)
    if args.cpu:
        p = LlmDecodeParams(
            vocab_size=256,
            hidden_size=64,
            intermediate_size=128,
            num_layers=2,
            num_heads=4,
            num_kv_heads=2,
            prompt_len=8,
            decode_steps=4,
        )
        model = Llama(p, Shard(0, 1), torch.device("cpu"))
        gen = Generation(model, 1, p.prompt_len, p.decode_steps)
        gen.start(torch.randint(0, p.vocab_size, (1, p.prompt_len)))
        gen.step()
        for mode in ("pieces", "pieces_sdpa", "pieces2", "kit_fused"):
            tokens = gen.tokens.clone()
            gen.pos.fill_(p.prompt_len)
            theirs = variant(model, gen, mode)().clone()
            gen.pos.fill_(p.prompt_len)
            gen.tokens.copy_(tokens)
            ours = model.decode(gen.tokens, gen.pos, gen.cache)
            print(f"cpu: {mode} against the kit's step:", (theirs - ours).abs().max())
        print("cpu: agreement of pieces2:", agreement(model, p, torch.device("cpu"), "pieces2"))
        print("cpu: one step ran;", bytes_per_step(model, p, 1, gen.cache.max_len))
        return
    for name in ("cache_size_limit", "recompile_limit"):  # a closure per variant and batch
        if hasattr(torch._dynamo.config, name):
            setattr(torch._dynamo.config, name, 256)
    device = torch.device("cuda", 0)
    torch.cuda.set_device(device)
    p = LlmDecodeParams()
    model = Llama(p, Shard(0, 1), device)
    result: dict[str, Any] = {
        "gpu": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "ceiling_GB_s": ceiling(device),
        "gemv": gemv(model, device, args.autotune_gemv),
        "steps": [],
    }
    print(
        f"{result['gpu']}, torch {result['torch']}: copy ceiling {result['ceiling_GB_s']:.0f} GB/s"
    )
    if args.tri_alone:
        try:
            result["tri_alone"] = tri_alone(model, p, device)
        except Exception as exc:
            result["tri_alone"] = [{"kernel": "all", "error": f"{type(exc).__name__}: {exc}"[:600]}]
        for r in result["tri_alone"]:
            print("  alone", r)
    for r in result["gemv"]:
        print(
            f"  gemv {r['weight']:6s} {r['MB']:7.1f} MB {r['us']:7.1f} us {r['GB_s']:6.0f} GB/s "
            f"({r['GB_s'] / result['ceiling_GB_s']:.0%})"
            + (f", autotuned {r['autotuned_us']:.1f} us" if "autotuned_us" in r else "")
        )
    for mode in args.variants.split(","):
        try:
            r = step_variant(model, p, mode, device)
        except Exception as exc:  # one variant's failure is a finding, not the end of the call
            r = {"mode": mode, "error": f"{type(exc).__name__}: {exc}"[:300]}
        result["steps"].append(r)
        if "error" in r:
            print(f"  step {mode}: {r['error']}")
        else:
            print(
                f"  step {mode:8s} {r['ms']:.3f} ms {r['tokens_s']:8.0f} tokens/s "
                f"{r['GB_s']:6.0f} GB/s "
                f"({r['GB_s'] / result['ceiling_GB_s']:.0%} of the ceiling), "
                f"{r['kernels']} kernels, prepared in {r['prepare_s']:.0f} s"
                + (f", agreement {r['agreement']}" if "agreement" in r else "")
            )
            for k in r["top"]:
                print(f"      {k['us']:8.1f} us {k['n']:4d}x {k['kernel']}")
        (out / "step_variants.json").write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
