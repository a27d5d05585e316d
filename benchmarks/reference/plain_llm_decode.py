"""Reference for the kit's llm_decode worker: transformers' own fast decode path, no kit.

The Llama-3.1-8B architecture (random weights, bf16, built on the GPU) as transformers'
LlamaForCausalLM, a StaticCache of prompt + new tokens, the prompt prefilled in one forward, then
greedy decode steps through `model.forward` compiled with torch.compile(mode="reduce-overhead",
fullgraph=True) (CUDA graphs), the recipe transformers documents for fast static-cache
generation. One process, one GPU: the counterpart of the kit's data-parallel benchmark
(decode-dp) on each of its GPUs. Per batch size: one untimed generation, then `--trials` timed
ones; each timed with the host clock, one synchronize at each end of the prefill and of the
decode loop (none per step):

    prefill tokens/s = batch x prompt / prefill seconds
    decode tokens/s  = batch x new tokens / decode seconds      (the median trial)

Time it with the kit in one session on the same GPU:

    python benchmarks/reference/plain_llm_decode.py
    kit reproduce recipes/llm_decode.yaml

and compare decode tokens/s per GPU at each batch (the kit's decode-dp figure over its GPUs).
Prints one line `REFERENCE {json}`. On a CPU (a smoke test of this script): add
--cpu --layers 2 --hidden 64 --intermediate 128 --heads 4 --kv-heads 2 --vocab 256 --prompt 16
--new 8 --batches 1 2 (eager: no compile on the CPU).
"""

from __future__ import annotations

import argparse
import inspect
import json
import statistics
import time

import torch
from transformers import LlamaConfig, LlamaForCausalLM, StaticCache


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def cache_kwarg(model) -> str:
    """transformers 5.2x names the cache argument `cache`; earlier ones `past_key_values`."""
    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


def generation(model, step, prompt, new, device) -> tuple[float, float]:
    """One generation with a fresh static cache: (prefill seconds, decode seconds)."""
    batch, plen = prompt.shape
    kw = {cache_kwarg(model): StaticCache(config=model.config, max_cache_len=plen + new)}
    sync(device)
    t0 = time.perf_counter()
    positions = torch.arange(plen, device=device)
    logits = model(prompt, cache_position=positions, use_cache=True, **kw).logits
    token = logits[:, -1].argmax(-1, keepdim=True)
    sync(device)
    t1 = time.perf_counter()
    pos = torch.tensor([plen], device=device)
    for _ in range(new):
        out = step(token, position_ids=pos[None].expand(batch, 1), cache_position=pos,
                   use_cache=True, **kw)  # fmt: skip
        token = out.logits[:, -1].argmax(-1, keepdim=True)
        pos = pos + 1
    sync(device)
    return t1 - t0, time.perf_counter() - t1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 8, 32, 128])
    ap.add_argument("--prompt", type=int, default=512)
    ap.add_argument("--new", type=int, default=128)
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--layers", type=int, default=32)
    ap.add_argument("--hidden", type=int, default=4096)
    ap.add_argument("--intermediate", type=int, default=14336)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--vocab", type=int, default=128256)
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--cpu", action="store_true", help="run on the CPU, eager, a smoke test")
    a = ap.parse_args()
    device = torch.device("cpu" if a.cpu else "cuda")
    dtype = torch.float32 if a.cpu else torch.bfloat16
    config = LlamaConfig(
        vocab_size=a.vocab, hidden_size=a.hidden, intermediate_size=a.intermediate,
        num_hidden_layers=a.layers, num_attention_heads=a.heads, num_key_value_heads=a.kv_heads,
        rope_theta=500000.0, max_position_embeddings=131072, rms_norm_eps=1e-5,
        tie_word_embeddings=False, attn_implementation="sdpa",
        bos_token_id=0, eos_token_id=1,
    )  # fmt: skip
    torch.manual_seed(0)
    torch.set_default_dtype(dtype)
    with torch.device(device):
        model = LlamaForCausalLM(config).eval()
    torch.set_default_dtype(torch.float32)
    compiled = not a.cpu and not a.no_compile
    step = (
        torch.compile(model.forward, mode="reduce-overhead", fullgraph=True)
        if compiled
        else model.forward
    )
    rows = []
    with torch.inference_mode():
        for batch in a.batches:
            prompt = torch.randint(0, a.vocab, (batch, a.prompt), device=device)
            generation(model, step, prompt, a.new, device)  # warm-up (and compile)
            times = [generation(model, step, prompt, a.new, device) for _ in range(a.trials)]
            pre = statistics.median(t[0] for t in times)
            dec = statistics.median(t[1] for t in times)
            rows.append({
                "batch": batch,
                "prefill_tokens_per_s": batch * a.prompt / pre,
                "decode_tokens_per_s": batch * a.new / dec,
                "decode_s": [t[1] for t in times],
            })  # fmt: skip
    record = {
        "reference": "transformers StaticCache"
        + (" + torch.compile(reduce-overhead)" if compiled else ", eager"),
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "dtype": str(dtype).removeprefix("torch."),
        "prompt": a.prompt,
        "new_tokens": a.new,
        "batches": rows,
        "torch": torch.__version__,
    }
    print("REFERENCE " + json.dumps(record), flush=True)


if __name__ == "__main__":
    main()
