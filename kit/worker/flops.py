"""Parameter counts and model FLOPs per token of the transformer workloads, written out.

Conventions (the PaLM paper's appendix B, as nanoGPT and torchtitan count):
- a matmul of an (m x k) by a (k x n) matrix is 2mkn FLOPs; elementwise work (norms,
  activations, softmax, dropout, RoPE, the optimizer) is not counted;
- the backward pass of a trained weight costs twice its forward (gradient to the input and to
  the weight); a frozen weight costs only the gradient to the input (once its forward);
- attention scores (Q K^T) and the weighted sum (A V) cost 2 * T * d_attn each per token and
  layer, over the full T x T square: causal masking is not halved (the convention; the kernel
  may skip the masked half, which would make the true figure lower);
- recomputation (activation checkpointing) is not model work: it is left out of model FLOPs and
  reported separately as hardware FLOPs.

Standard library only.
"""

from __future__ import annotations


def gpt2_param_count(n_layer: int, d: int, vocab: int, n_positions: int) -> int:
    """Every parameter of GPT2LMHeadModel (lm_head tied to the token embedding).

    Per block: ln_1, ln_2 (2d each), c_attn (3d^2 + 3d), attn c_proj (d^2 + d), c_fc (4d^2 + 4d),
    mlp c_proj (4d^2 + d) = 12d^2 + 13d; plus wte (V d), wpe (P d) and ln_f (2d).
    GPT-2 small: 124,439,808.
    """
    return vocab * d + n_positions * d + n_layer * (12 * d * d + 13 * d) + 2 * d


def gpt2_matmul_params(n_layer: int, d: int, vocab: int) -> int:
    """Weights that take part in a matmul per token: 12 d^2 per block plus the (tied) lm_head."""
    return 12 * n_layer * d * d + vocab * d


def gpt2_flops_per_token(n_layer: int, d: int, vocab: int, seq: int) -> float:
    """Training FLOPs per token, every weight trained: 6 N_mm + 12 L T d.

    Forward 2 N_mm + attention 4 L T d; backward twice that. GPT-2 small at T=1024:
    6 * 123,532,032 + 12 * 12 * 1024 * 768 = 854,438,400 (nanoGPT's 6N + 12LHQT, with N the
    matmul weights rather than all parameters).
    """
    return 6 * gpt2_matmul_params(n_layer, d, vocab) + 12 * n_layer * seq * d


def llama_param_count(
    n_layer: int, d: int, inter: int, n_heads: int, n_kv: int, vocab: int, tied: bool = False
) -> int:
    """Every parameter of LlamaForCausalLM (no biases).

    Per layer: q, o (d^2 each), k, v (d * d_kv each, d_kv = n_kv * d / n_heads), gate, up, down
    (d * I each), two RMSNorms (d each); plus the embedding (V d), the final norm (d) and the
    lm_head (V d, unless tied). Llama-3.1-8B: 8,030,261,248.
    """
    d_kv = n_kv * (d // n_heads)
    per_layer = 2 * d * d + 2 * d * d_kv + 3 * d * inter + 2 * d
    return vocab * d + n_layer * per_layer + d + (0 if tied else vocab * d)


def llama_matmul_params(
    n_layer: int, d: int, inter: int, n_heads: int, n_kv: int, vocab: int
) -> int:
    """Frozen base weights used in a matmul per token: the projections and the lm_head."""
    d_kv = n_kv * (d // n_heads)
    return n_layer * (2 * d * d + 2 * d * d_kv + 3 * d * inter) + vocab * d


def lora_params(
    n_layer: int, d: int, inter: int, n_heads: int, n_kv: int, r: int, targets: list[str]
) -> int:
    """LoRA weights: A (in x r) and B (r x out) for each adapted projection, r * (in + out)."""
    d_kv = n_kv * (d // n_heads)
    shapes = {
        "q_proj": (d, d),
        "k_proj": (d, d_kv),
        "v_proj": (d, d_kv),
        "o_proj": (d, d),
        "gate_proj": (d, inter),
        "up_proj": (d, inter),
        "down_proj": (inter, d),
    }
    return n_layer * sum(r * (shapes[t][0] + shapes[t][1]) for t in targets)


def llama_lora_flops_per_token(
    n_layer: int,
    d: int,
    inter: int,
    n_heads: int,
    n_kv: int,
    vocab: int,
    seq: int,
    r: int,
    targets: list[str],
) -> dict[str, float]:
    """Model FLOPs per token of a LoRA step on a frozen Llama: 4 N_mm + 6 N_lora + 12 L T d.

    forward:  2 N_mm (base matmuls incl. lm_head) + 2 N_lora + 4 L T d (attention)
    backward: 2 N_mm (frozen base: gradient to the activations only, no weight gradients)
              + 4 N_lora (gradient to the input and to A, B) + 8 L T d (attention)
    The activation gradient is counted through every layer (the first layer's input gradient,
    which peft's enable_input_require_grads asks for, included).
    With checkpointing, each decoder layer's forward runs again in backward; that is hardware
    work, not model work: recompute = 2 (N_mm - V d) + 2 N_lora + 4 L T d.
    Llama-3.1-8B, r 8 on all seven projections, T=4096: about 36.6 GFLOP per token.
    """
    n_mm = llama_matmul_params(n_layer, d, inter, n_heads, n_kv, vocab)
    n_lora = lora_params(n_layer, d, inter, n_heads, n_kv, r, targets)
    attn = 4 * n_layer * seq * d  # forward Q K^T + A V, full square
    return {
        "matmul_params": n_mm,
        "lora_params": n_lora,
        "model": 4 * n_mm + 6 * n_lora + 3 * attn,
        "recompute": 2 * (n_mm - vocab * d) + 2 * n_lora + attn,
        "formula": "4 N_mm + 6 N_lora + 12 L T d (frozen base, LoRA trained, attention full T x T)",
    }
