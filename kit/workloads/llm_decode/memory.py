"""LLM decode's memory: the bytes a decode step must read on one rank, and the largest batch
whose cache fits beside the weights.

The largest batch that fits (GPU only): doubled, then bisected, from 1 to fit_max_batch, a batch
fits when its KV cache of fit_seq_len positions can be allocated beside the weights and one
decode step at the last position runs (collectives left out, so a rank running out of memory
cannot strand the others inside one; the group agrees on the result after each try).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from kit.worker.common import Context
from kit.workloads.llm_decode.model import Cache, Llama
from kit.workloads.llm_decode.params import LlmDecodeParams


def bytes_per_step(model: Llama, p: LlmDecodeParams, batch: int, cache_len: int) -> dict[str, Any]:
    """What a decode step must read on one rank, and what the static cache makes it read."""
    el = torch.finfo(model.dtype).bits // 8
    per_position = 2 * p.num_layers * batch * model.hkv * model.dh * el  # K and V
    weights = model.weight_bytes() + batch * p.hidden_size * el
    mean_len = p.prompt_len + (p.decode_steps + 1) / 2
    return {
        "weights": weights,
        "kv_needed": per_position * mean_len,
        "kv_issued": per_position * cache_len,
        "needed": weights + per_position * mean_len,
    }


def fits(ctx: Context, model: Llama, p: LlmDecodeParams, batch: int) -> bool:
    """Whether this batch's cache of fit_seq_len positions and one decode step fit on this rank
    (the worker makes the ranks agree on the smallest answer)."""
    ok = True
    try:
        cache = Cache(model, batch, p.fit_seq_len)
        model.ensure_rope(p.fit_seq_len)
        tokens = torch.zeros((batch, 1), dtype=torch.long, device=ctx.device)
        pos = torch.full((1,), p.fit_seq_len - 1, dtype=torch.long, device=ctx.device)
        model.decode(tokens, pos, cache, collectives=False)
        ctx.synchronize()
    except torch.cuda.OutOfMemoryError:
        ok = False
    cache = tokens = pos = None  # type: ignore[assignment]
    torch.cuda.empty_cache()
    return ok


def largest_batch(p: LlmDecodeParams, fit: Callable[[int], bool]) -> dict[str, Any]:
    """Doubling, then bisection, over batch sizes up to fit_max_batch; `fit(b)` tries one."""
    good, bad, b = 0, None, 1
    while b <= p.fit_max_batch and fit(b):
        good, b = b, b * 2
    if b <= p.fit_max_batch:
        bad = b
    elif good < p.fit_max_batch:  # every power of two fitted: try the cap itself
        if fit(p.fit_max_batch):
            good = p.fit_max_batch
        else:
            bad = p.fit_max_batch
    while bad is not None and bad - good > 1:
        mid = (good + bad) // 2
        good, bad = (mid, bad) if fit(mid) else (good, mid)
    return {"largest_batch": good, "capped": bad is None, "seq_len": p.fit_seq_len}
