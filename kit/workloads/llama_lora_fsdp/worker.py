"""Llama LoRA fine-tuning with FSDP2: the shape of the forum post's 40% NVLink result.

transformers' LlamaForCausalLM built from a LlamaConfig of the Llama-3.1-8B architecture with
random weights (or loaded from a local `model_path`), bf16 weights, LoRA through peft on the
linear layers, FSDP2 `fully_shard` on every decoder layer and then the root (full shard,
MixedPrecisionPolicy: bf16 compute, fp32 gradient reduction; peft keeps the LoRA weights fp32),
gradient checkpointing through transformers (non-reentrant), AdamW on the LoRA parameters.

The model is built directly on the GPU in bf16 (~16 GB per rank before sharding at 8B, seconds
rather than the minutes a CPU init takes); the build is timed apart from the measured window
(`init_s` in the result).

MFU (kit.worker.flops.llama_lora_flops_per_token), the frozen base needing no weight gradients:
    FLOPs per token = 4 N_mm + 6 N_lora + 12 L T d
    mfu = tokens/s/GPU x FLOPs per token / peak bf16 dense FLOP/s per GPU
Recomputation under checkpointing is not model work; it is reported as `hfu` (hardware FLOPs).
"""

from __future__ import annotations

import time
from typing import Any

import torch

from kit.worker.common import Context
from kit.worker.flops import llama_lora_flops_per_token, llama_param_count
from kit.worker.hf_models import check_local_paths, hf_model
from kit.worker.training import Built, optimizer_step, runner, token_batches
from kit.workloads.llama_lora_fsdp.params import LlamaLoraFsdpParams
from kit.workloads.llama_shape import TRANSFORMERS_NAMES


def build_base(ctx: Context, p: LlamaLoraFsdpParams) -> tuple[torch.nn.Module, str]:
    """The bf16 base model on the device, and a sentence saying where its weights came from."""
    from transformers import LlamaConfig, LlamaForCausalLM

    def own_config() -> LlamaConfig:
        return LlamaConfig(
            **p.transformers_config(),
            max_position_embeddings=p.max_position,
            rms_norm_eps=1e-5,
            tie_word_embeddings=False,
            use_cache=False,
            attn_implementation="sdpa",
            bos_token_id=min(128000, p.vocab_size - 1),
            eos_token_id=min(128001, p.vocab_size - 1),
        )

    return hf_model(ctx, p.model_path, LlamaConfig, LlamaForCausalLM, own_config, torch.bfloat16)


def build(ctx: Context, p: LlamaLoraFsdpParams) -> Built:
    check_local_paths(p.model_path, p.data_path)  # before transformers' and peft's imports
    import peft
    import transformers
    from peft import LoraConfig, get_peft_model
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    t0 = time.perf_counter()
    model, weights = build_base(ctx, p)
    ctx.synchronize()
    build_s = time.perf_counter() - t0
    cfg = model.config
    if p.gradient_checkpointing:
        kwargs = {"use_reentrant": False}
        if hasattr(model, "activation_checkpointing_enable"):  # transformers >= 5.2x names it so
            model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
        else:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
        model.enable_input_require_grads()
    lora = LoraConfig(
        r=p.lora_r,
        lora_alpha=p.lora_alpha,
        lora_dropout=p.lora_dropout,
        target_modules=list(p.lora_targets),
        bias="none",
        task_type="CAUSAL_LM",
    )
    model = get_peft_model(model, lora)
    model.train()
    layers = model.base_model.model.model.layers
    mesh = init_device_mesh(ctx.device.type, (ctx.world_size,))
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for i, layer in enumerate(layers):
        if p.compile:  # compile the block, then shard the compiled module (torchtitan's order)
            layer = torch.compile(layer)
            layers[i] = layer
        fully_shard(layer, mesh=mesh, mp_policy=mp, reshard_after_forward=p.reshard_after_forward)
    fully_shard(model, mesh=mesh, mp_policy=mp)
    trainable = [x for x in model.parameters() if x.requires_grad]
    opt = torch.optim.AdamW(trainable, lr=p.lr)
    batches, data_source = token_batches(
        ctx, cfg.vocab_size, p.micro_batch, p.seq_len, p.data_batches, p.data_path, p.seed
    )
    n_trainable = sum(x.numel() for x in trainable)  # DTensors: numel is the global size
    n_total = sum(x.numel() for x in model.parameters()) - n_trainable  # the base model

    def step(batch: torch.Tensor) -> torch.Tensor:
        loss = model(input_ids=batch, labels=batch, use_cache=False).loss
        return optimizer_step(loss, opt)

    tokens = p.micro_batch * p.seq_len * ctx.world_size
    shape = (
        cfg.num_hidden_layers,
        cfg.hidden_size,
        cfg.intermediate_size,
        cfg.num_attention_heads,
        cfg.num_key_value_heads,
    )
    fl = llama_lora_flops_per_token(
        *shape, cfg.vocab_size, p.seq_len, p.lora_r, list(p.lora_targets)
    )
    hw_per_token = fl["model"] + (fl["recompute"] if p.gradient_checkpointing else 0)

    def finish(metrics: dict[str, Any], data: dict[str, Any]) -> None:
        mfu = data["mfu"]
        data["hfu"] = mfu * hw_per_token / fl["model"] if mfu is not None else None

    return Built(
        step=step,
        batches=batches,
        work="tokens",
        work_per_step=tokens,
        flops_per_step=fl["model"] * tokens,
        precision="bf16",
        facts={
            "model": "LlamaForCausalLM + peft LoRA",
            "weights": weights,
            "data": data_source,
            "config": {
                **{ours: getattr(cfg, theirs) for ours, theirs in TRANSFORMERS_NAMES.items()},
                "rope": getattr(cfg, "rope_parameters", None) or {"rope_theta": cfg.rope_theta},
                "attn_implementation": cfg._attn_implementation,
            },
            "param_count": n_total,
            "param_count_formula": llama_param_count(
                *shape, cfg.vocab_size, cfg.tie_word_embeddings
            ),
            "lora_param_count": n_trainable,
            "lora_param_count_formula": fl["lora_params"],
            "parallelism": (
                "FSDP2 fully_shard per decoder layer + root, full shard "
                f"(reshard_after_forward={p.reshard_after_forward}), "
                "MixedPrecisionPolicy(param bf16, reduce fp32)"
            ),
            "optimizer": f"AdamW lr {p.lr} on the LoRA parameters",
            "build_s": build_s,
            "tokens_per_step": tokens,
            "flops_per_token": fl["model"],
            "flops_formula": fl["formula"],
            "recompute_flops_per_token": fl["recompute"] if p.gradient_checkpointing else 0,
            "transformers": transformers.__version__,
            "peft": peft.__version__,
        },
        describe=f"llama: {n_total / 1e9:.3f}B base params ({n_trainable / 1e6:.2f}M LoRA), "
        f"{p.micro_batch} x {p.seq_len} tokens per rank, checkpointing "
        f"{'on' if p.gradient_checkpointing else 'off'}, compile {'on' if p.compile else 'off'}, "
        f"model build {build_s:.1f} s",
        finish=finish,
    )


run = runner(LlamaLoraFsdpParams, build)
