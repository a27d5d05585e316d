"""FLOP formulas and parameter counts of the training workloads, against known values and
against what torch's FlopCounterMode counts when the real models (tiny configs) train a step."""

from __future__ import annotations

import pytest
import torch

from kit.worker.flops import (
    gpt2_flops_per_token,
    gpt2_param_count,
    llama_lora_flops_per_token,
    llama_param_count,
)
from kit.worker.training import peak_flops
from kit.workloads.llama_lora_fsdp.params import LORA_TARGETS

LLAMA_8B = dict(n_layer=32, d=4096, inter=14336, n_heads=32, n_kv=8)


def test_gpt2_small_param_count_is_the_known_124m():
    from transformers import GPT2Config, GPT2LMHeadModel

    assert gpt2_param_count(12, 768, 50257, 1024) == 124_439_808
    with torch.device("meta"):
        model = GPT2LMHeadModel(GPT2Config())
    assert sum(p.numel() for p in model.parameters()) == 124_439_808


def test_llama_31_8b_param_count_is_the_known_8_03b():
    from transformers import LlamaConfig, LlamaForCausalLM

    assert llama_param_count(**LLAMA_8B, vocab=128256) == 8_030_261_248
    config = LlamaConfig(
        vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
        num_attention_heads=32, num_key_value_heads=8, tie_word_embeddings=False,
    )  # fmt: skip
    with torch.device("meta"):
        model = LlamaForCausalLM(config)
    assert sum(p.numel() for p in model.parameters()) == 8_030_261_248


def test_flops_per_token_known_values():
    # 6 * (12 * 12 * 768^2 + 50257 * 768) + 12 * 12 * 1024 * 768
    assert gpt2_flops_per_token(12, 768, 50257, 1024) == 854_438_400
    fl = llama_lora_flops_per_token(
        **LLAMA_8B, vocab=128256, seq=4096, r=8, targets=list(LORA_TARGETS)
    )
    assert fl["matmul_params"] == 7_504_658_432
    assert fl["lora_params"] == 20_971_520  # 32 layers x 655,360: peft's count for r 8 all-linear
    # 4 * 7,504,658,432 + 6 * 20,971,520 + 12 * 32 * 4096 * 4096
    assert fl["model"] == 36_586_913_792


def _counted(model, batch) -> int:
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    with counter:
        model(input_ids=batch, labels=batch, use_cache=False).loss.backward()
    return counter.get_total_flops()


def test_gpt2_formula_matches_flop_counter_on_a_training_step():
    from transformers import GPT2Config, GPT2LMHeadModel

    L, d, V, T, B = 2, 64, 512, 32, 3
    torch.manual_seed(0)
    model = GPT2LMHeadModel(
        GPT2Config(
            n_layer=L, n_embd=d, n_head=4, vocab_size=V, n_positions=T, attn_implementation="eager"
        )
    )
    counted = _counted(model, torch.randint(0, V, (B, T)))
    assert counted == gpt2_flops_per_token(L, d, V, T) * B * T


@pytest.mark.parametrize("targets", [list(LORA_TARGETS), ["q_proj", "v_proj"]])
def test_llama_lora_formula_matches_flop_counter_on_a_training_step(targets):
    from peft import LoraConfig, get_peft_model
    from transformers import LlamaConfig, LlamaForCausalLM

    L, d, inter, H, KV, V, T, B, r = 2, 64, 96, 4, 2, 512, 32, 2, 4
    torch.manual_seed(0)
    base = LlamaForCausalLM(
        LlamaConfig(
            vocab_size=V, hidden_size=d, intermediate_size=inter, num_hidden_layers=L,
            num_attention_heads=H, num_key_value_heads=KV, attn_implementation="eager",
            tie_word_embeddings=False,
        )
    )  # fmt: skip
    base.enable_input_require_grads()  # as the worker does with checkpointing
    model = get_peft_model(base, LoraConfig(r=r, lora_alpha=8, target_modules=targets))
    model.train()
    counted = _counted(model, torch.randint(0, V, (B, T)))
    fl = llama_lora_flops_per_token(L, d, inter, H, KV, V, T, r, targets)
    assert fl["lora_params"] == sum(p.numel() for p in model.parameters() if p.requires_grad)
    assert counted == fl["model"] * B * T


def test_peak_flops_table_picks_the_specific_name_first():
    assert peak_flops("NVIDIA H200", "bf16") == (
        989e12,
        "H200 SXM bf16 dense 989 TFLOP/s, NVIDIA H200 Tensor Core GPU datasheet (H200 SXM column)",
    )
    assert peak_flops("NVIDIA GH200 480GB", "bf16")[1].startswith("GH200 ")
    assert peak_flops("NVIDIA H100 80GB HBM3", "fp32")[0] == 67e12
    assert peak_flops("NVIDIA H100 PCIe", "bf16")[0] == 756e12
    assert peak_flops("NVIDIA A100-SXM4-80GB", "bf16")[0] == 312e12
    assert peak_flops("NVIDIA GeForce GTX 1080", "bf16") is None
    assert peak_flops(None, "bf16") is None
