"""GPT-2 with DistributedDataParallel: the shape people time with the HF Trainer and run_clm.py.

transformers' GPT2LMHeadModel from GPT2Config() (124M) with random weights, DDP, AdamW (fused
on CUDA, the HF Trainer's default "adamw_torch_fused"), gradient clipping at 1.0 as the Trainer
does, batch_per_gpu sequences of seq_len tokens per rank and step. fp32 runs with torch's default
matmul precision ("highest": no TF32), as the HF Trainer does without --tf32; bf16 is autocast.

MFU (kit.worker.flops.gpt2_flops_per_token), every weight trained:
    FLOPs per token = 6 N_mm + 12 L T d,  N_mm = 12 L d^2 + V d
    mfu = tokens/s/GPU x FLOPs per token / peak FLOP/s per GPU (fp32 or bf16 dense, by precision)
"""

from __future__ import annotations

from typing import Any

import torch

from kit.shared.metrics import record
from kit.worker.common import Context
from kit.worker.flops import gpt2_flops_per_token, gpt2_param_count
from kit.worker.hf_models import check_local_paths, hf_model
from kit.worker.training import DDP_PARALLELISM, Built, autocast_step, ddp, runner, token_batches
from kit.workloads.gpt2_ddp.params import Gpt2DdpParams


def build_model(ctx: Context, p: Gpt2DdpParams) -> tuple[torch.nn.Module, str]:
    """GPT-2 on the device: from GPT2Config (random weights) or from a local directory."""
    from transformers import GPT2Config, GPT2LMHeadModel

    def own_config() -> GPT2Config:
        return GPT2Config(
            n_layer=p.n_layer,
            n_embd=p.n_embd,
            n_head=p.n_head,
            vocab_size=p.vocab_size,
            n_positions=max(1024, p.seq_len),
            attn_implementation="sdpa",
            bos_token_id=min(50256, p.vocab_size - 1),
            eos_token_id=min(50256, p.vocab_size - 1),
        )

    return hf_model(ctx, p.model_path, GPT2Config, GPT2LMHeadModel, own_config)


def build(ctx: Context, p: Gpt2DdpParams) -> Built:
    check_local_paths(p.model_path, p.data_path)  # before transformers' import
    import transformers

    model, weights = build_model(ctx, p)
    cfg = model.config
    model.train()
    wrapped = ddp(ctx, model)
    fused = ctx.is_cuda
    opt = torch.optim.AdamW(model.parameters(), lr=p.lr, fused=fused)
    batches, data_source = token_batches(
        ctx, cfg.vocab_size, p.batch_per_gpu, p.seq_len, p.data_batches, p.data_path, p.seed
    )

    def loss_of(batch: torch.Tensor) -> torch.Tensor:
        return wrapped(input_ids=batch, labels=batch, use_cache=False).loss

    step, precision = autocast_step(
        ctx, p.precision, loss_of, opt, list(model.parameters()), p.max_grad_norm
    )

    samples = p.batch_per_gpu * ctx.world_size
    tokens = samples * p.seq_len
    per_token = gpt2_flops_per_token(cfg.n_layer, cfg.n_embd, cfg.vocab_size, p.seq_len)
    n_params = sum(x.numel() for x in model.parameters())

    def finish(metrics: dict[str, Any], data: dict[str, Any]) -> None:
        tps = data["throughput_median"] * p.seq_len
        metrics["tokens_per_s"] = record("tokens_per_s", tps)
        data["tokens_per_s"] = tps

    return Built(
        step=step,
        batches=batches,
        work="samples",
        work_per_step=samples,
        flops_per_step=per_token * tokens,
        precision=precision,
        facts={
            "model": "GPT2LMHeadModel",
            "weights": weights,
            "data": data_source,
            "param_count": n_params,
            "param_count_formula": gpt2_param_count(
                cfg.n_layer, cfg.n_embd, cfg.vocab_size, cfg.n_positions
            ),
            "attn_implementation": cfg._attn_implementation,
            "parallelism": DDP_PARALLELISM,
            "optimizer": f"AdamW lr {p.lr}{' fused' if fused else ''}",
            "tokens_per_step": tokens,
            "flops_per_token": per_token,
            "flops_formula": "6 N_mm + 12 L T d, N_mm = 12 L d^2 + V d (all weights trained)",
            "transformers": transformers.__version__,
        },
        describe=f"gpt2: {n_params / 1e6:.1f}M params, {p.batch_per_gpu} x {p.seq_len} tokens "
        f"per rank, {p.precision}",
        finish=finish,
    )


run = runner(Gpt2DdpParams, build)
