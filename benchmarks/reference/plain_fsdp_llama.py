"""Reference for the kit's llama_lora_fsdp worker: a plain FSDP2 loop of the same shape, no kit.

Llama-3.1-8B architecture (random weights, bf16, built on the GPU), LoRA r 8 / alpha 16 / dropout
0.05 on all seven linear projections (peft), fully_shard per decoder layer then the root,
non-reentrant gradient checkpointing, AdamW, sequence 4096, micro batch 1, random tokens.
Timed with the host clock around `--steps` steps after `--warmup` steps, one synchronize at each
end (no per-step sync): tokens/s = steps x tokens per step / elapsed. Python's collector is frozen
for the timed steps (gc.freeze), as the kit's loop does, so neither side times a full collection
of the heap. Time it with the kit's
recipe in one session on the same GPUs:

    torchrun --standalone --nproc-per-node 2 benchmarks/reference/plain_fsdp_llama.py
    NCCL_P2P_DISABLE=1 torchrun --standalone --nproc-per-node 2 benchmarks/reference/plain_fsdp_llama.py
    kit reproduce recipes/fsdp_llama.yaml

Rank 0 prints one line `REFERENCE {json}`. On a CPU (a smoke test of this script): add
--cpu --layers 2 --hidden 64 --intermediate 128 --heads 4 --kv-heads 2 --vocab 1024 --seq 128.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import time

import torch
import torch.distributed as dist
from peft import LoraConfig, get_peft_model
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from transformers import LlamaConfig, LlamaForCausalLM


def measure() -> None:
    """Set up, time the steps, print the record (rank 0)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--seq", type=int, default=4096)
    ap.add_argument("--micro-batch", type=int, default=1)
    ap.add_argument("--layers", type=int, default=32)
    ap.add_argument("--hidden", type=int, default=4096)
    ap.add_argument("--intermediate", type=int, default=14336)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--vocab", type=int, default=128256)
    ap.add_argument("--no-checkpointing", action="store_true")
    ap.add_argument("--cpu", action="store_true", help="run on the CPU (gloo), a smoke test")
    args = ap.parse_args()

    if args.cpu:
        device = torch.device("cpu")
        dist.init_process_group("gloo")
    else:
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(device)
        dist.init_process_group("nccl", device_id=device)
    rank, world = dist.get_rank(), dist.get_world_size()
    config = LlamaConfig(
        vocab_size=args.vocab, hidden_size=args.hidden, intermediate_size=args.intermediate,
        num_hidden_layers=args.layers, num_attention_heads=args.heads,
        num_key_value_heads=args.kv_heads, rope_theta=500000.0, max_position_embeddings=131072,
        rms_norm_eps=1e-5, tie_word_embeddings=False, use_cache=False, attn_implementation="sdpa",
        bos_token_id=0, eos_token_id=0,
    )  # fmt: skip
    torch.manual_seed(0)
    t0 = time.perf_counter()
    torch.set_default_dtype(torch.bfloat16)
    with torch.device(device):
        model = LlamaForCausalLM(config)
    torch.set_default_dtype(torch.float32)
    if not args.no_checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.enable_input_require_grads()
    model = get_peft_model(
        model,
        LoraConfig(r=8, lora_alpha=16, lora_dropout=0.05, task_type="CAUSAL_LM",
                   target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                                   "down_proj"]),
    )  # fmt: skip
    mesh = init_device_mesh(device.type, (world,))
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for layer in model.base_model.model.model.layers:
        fully_shard(layer, mesh=mesh, mp_policy=mp)
    fully_shard(model, mesh=mesh, mp_policy=mp)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    tokens = torch.randint(0, args.vocab, (args.micro_batch, args.seq), device=device)
    init_s = time.perf_counter() - t0

    def step() -> torch.Tensor:
        loss = model(input_ids=tokens, labels=tokens).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.detach()

    for _ in range(args.warmup):
        step()
    if device.type == "cuda":
        torch.cuda.synchronize()
    gc.collect()
    gc.freeze()
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(args.steps):
        loss = step()
    if device.type == "cuda":
        torch.cuda.synchronize()
    elapsed = time.perf_counter() - t0
    gc.unfreeze()
    tokens_per_step = args.micro_batch * args.seq * world
    if rank == 0:
        record = {
            "workload": "llama LoRA FSDP2, plain loop",
            "world_size": world,
            "steps": args.steps,
            "warmup": args.warmup,
            "seq": args.seq,
            "micro_batch": args.micro_batch,
            "checkpointing": not args.no_checkpointing,
            "init_s": init_s,
            "elapsed_s": elapsed,
            "tokens_per_second": tokens_per_step * args.steps / elapsed,
            "loss_last": float(loss),
            "NCCL_P2P_DISABLE": os.environ.get("NCCL_P2P_DISABLE"),
            "gpu": torch.cuda.get_device_name() if device.type == "cuda" else None,
            "torch": torch.__version__,
        }
        print("REFERENCE " + json.dumps(record), flush=True)


def main() -> None:
    measure()
    # The model is freed (measure returned) before the process group goes: left to interpreter
    # exit, a DDP/FSDP model's reference cycles are torn down after it, where gloo's threads can
    # abort the process ("terminate called without an active exception"), as the kit's worker says
    gc.collect()
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
