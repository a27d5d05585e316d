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
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from kit.workloads.llm_decode.model import Generation, Llama, Shard  # noqa: E402
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


def graphed(fn: Any, reps: int) -> torch.cuda.CUDAGraph:
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(reps):
            fn()
    return graph


def timed(replay: Any, n: int) -> float:
    """Median seconds of one replay over n, after 3 untimed."""
    for _ in range(3):
        replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(n):
        t0, t1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        t0.record()
        replay()
        t1.record()
        t1.synchronize()
        times.append(t0.elapsed_time(t1) / 1e3)
    return statistics.median(times)


def kernels(replay: Any) -> int:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        replay()
        torch.cuda.synchronize()
    return sum(1 for e in prof.events() if e.device_type.name == "CUDA")


def gemv(model: Llama, device: torch.device) -> list[dict[str, Any]]:
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
        rows.append(
            {
                "weight": name,
                "shape": list(w.shape),
                "MB": nbytes / 1e6,
                "us": s * 1e6,
                "GB_s": nbytes / s / 1e9,
            }
        )
    return rows


def step_variant(
    model: Llama, p: LlmDecodeParams, mode: str, device: torch.device
) -> dict[str, Any]:
    gen = Generation(model, 1, p.prompt_len, p.decode_steps)
    prompt = torch.randint(0, p.vocab_size, (1, p.prompt_len), device=device)
    gen.start(prompt)
    fn = gen.step
    if mode == "compile":
        fn = torch.compile(gen.step, dynamic=False)
    elif mode == "autotune":
        fn = torch.compile(gen.step, dynamic=False, mode="max-autotune-no-cudagraphs")
    t0 = time.perf_counter()
    g = graphed(fn, 1)
    prepared_s = time.perf_counter() - t0
    # replays past the cache's end only re-read the last position's K/V slot: same bytes
    s = timed(g.replay, 200)
    need = bytes_per_step(model, p, 1, gen.cache.max_len)["needed"]
    return {
        "mode": mode,
        "ms": s * 1e3,
        "GB_s": need / s / 1e9,
        "bytes": need,
        "kernels": kernels(g.replay),
        "prepare_s": prepared_s,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--variants", default="graph,compile,autotune")
    ap.add_argument("--cpu", action="store_true", help="a tiny shape, eager, on the CPU")
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
        print("cpu: one step ran;", bytes_per_step(model, p, 1, gen.cache.max_len))
        return
    device = torch.device("cuda", 0)
    torch.cuda.set_device(device)
    p = LlmDecodeParams()
    model = Llama(p, Shard(0, 1), device)
    result: dict[str, Any] = {
        "gpu": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "ceiling_GB_s": ceiling(device),
        "gemv": gemv(model, device),
        "steps": [],
    }
    print(
        f"{result['gpu']}, torch {result['torch']}: copy ceiling {result['ceiling_GB_s']:.0f} GB/s"
    )
    for r in result["gemv"]:
        print(
            f"  gemv {r['weight']:6s} {r['MB']:7.1f} MB {r['us']:7.1f} us {r['GB_s']:6.0f} GB/s "
            f"({r['GB_s'] / result['ceiling_GB_s']:.0%})"
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
                f"  step {mode:8s} {r['ms']:.3f} ms {r['GB_s']:6.0f} GB/s "
                f"({r['GB_s'] / result['ceiling_GB_s']:.0%} of the ceiling), "
                f"{r['kernels']} kernels, prepared in {r['prepare_s']:.0f} s"
            )
        (out / "step_variants.json").write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
