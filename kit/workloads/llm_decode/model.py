"""A plain Llama decoder for serving: static KV cache, tensor-parallel shards, graph-safe steps.

Written for the decode benchmark rather than taken from transformers, so that every byte a step
reads is known: per layer one fused q/k/v matmul, one output matmul, one fused gate/up matmul and
one down matmul (the weights, read once per step whatever the batch), and the layer's slice of
the KV cache. Tensor parallel as Megatron-LM splits a Llama: attention heads and the MLP's
intermediate columns per rank, an all-reduce after the output and down projections (two per
layer), the LM head split by vocabulary and its logits all-gathered.

Random weights: every full weight is drawn from its own seeded generator (seed, index) and each
rank keeps its slice, so a tensor-parallel model holds exactly the weights of the unsplit one
(the logits agree up to rounding: tests/integration/test_llm_decode_cpu.py checks it).

The decode step takes its position as a device tensor and writes its token and position in
place, so a CUDA graph of one step replays with no host work between tokens. Attention in a
decode step is two batched matmuls over the whole static cache (masked past the position):
K and V read once, each KV head shared by its query heads (GQA) without copying.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F

from kit.worker.common import dist_call
from kit.workloads.llm_decode.params import LlmDecodeParams

DTYPES = {"bf16": torch.bfloat16, "fp32": torch.float32}
# resolved once at import, not in every step of the timed loop
_GATHER = dist_call("all_gather_single", "all_gather_into_tensor")
INIT_STD = 0.02

# Llama 3.1's RoPE frequency scaling ("rope_type": "llama3" in its config.json)
ROPE_FACTOR, LOW_FREQ, HIGH_FREQ, ORIGINAL_MAX = 8.0, 1.0, 4.0, 8192


@dataclass(frozen=True)
class Shard:
    """Which slice of the model this rank holds: its index in its tensor-parallel group."""

    index: int
    size: int
    group: Any = None  # the tensor-parallel process group (None: one rank per model)


def rope_tables(p: LlmDecodeParams, positions: int, device: torch.device) -> torch.Tensor:
    """cos and sin per position, full head width (each frequency twice, as transformers lays
    them out): shape [2, positions, head_dim], computed in float64, kept in fp32."""
    dh = p.hidden_size // p.num_heads
    inv = 1.0 / (p.rope_theta ** (torch.arange(0, dh, 2, dtype=torch.float64) / dh))
    wavelen = 2 * math.pi / inv
    low, high = ORIGINAL_MAX / LOW_FREQ, ORIGINAL_MAX / HIGH_FREQ
    smooth = (ORIGINAL_MAX / wavelen - LOW_FREQ) / (HIGH_FREQ - LOW_FREQ)
    scaled = torch.where(wavelen > low, inv / ROPE_FACTOR, inv)
    mid = (wavelen <= low) & (wavelen >= high)
    inv = torch.where(mid, (1 - smooth) * inv / ROPE_FACTOR + smooth * inv, scaled)
    angles = torch.outer(torch.arange(positions, dtype=torch.float64), inv)
    angles = torch.cat([angles, angles], dim=-1)
    return torch.stack([angles.cos(), angles.sin()]).float().to(device)


def rotate(x: torch.Tensor, cs: torch.Tensor) -> torch.Tensor:
    """RoPE on [B, T, heads, dh] with cs [2, T, dh] in x's dtype, as transformers applies it
    (x cos + rotate_half(x) sin): five kernels for the queries and keys together."""
    x1, x2 = x.chunk(2, dim=-1)
    cos, sin = cs[0].unsqueeze(1), cs[1].unsqueeze(1)
    return x * cos + torch.cat([-x2, x1], dim=-1) * sin


class Weights:
    """Each full weight drawn from its own generator, this rank's slice kept."""

    def __init__(self, seed: int, device: torch.device, dtype: torch.dtype) -> None:
        self.seed, self.device, self.dtype, self.count = seed, device, dtype, 0

    def full(self, *shape: int) -> torch.Tensor:
        self.count += 1
        gen = torch.Generator(device=self.device).manual_seed(self.seed * 1_000_003 + self.count)
        w = torch.randn(*shape, generator=gen, device=self.device, dtype=torch.float32)
        return (w * INIT_STD).to(self.dtype)


def rows(w: torch.Tensor, shard: Shard) -> torch.Tensor:
    return w.chunk(shard.size, dim=0)[shard.index].contiguous()


def cols(w: torch.Tensor, shard: Shard) -> torch.Tensor:
    return w.chunk(shard.size, dim=1)[shard.index].contiguous()


class Layer:
    def __init__(self, p: LlmDecodeParams, w: Weights, shard: Shard) -> None:
        d, dh = p.hidden_size, p.hidden_size // p.num_heads
        self.hq, self.hkv = p.num_heads // shard.size, p.num_kv_heads // shard.size
        wq, wk, wv = (
            w.full(p.num_heads * dh, d),
            w.full(p.num_kv_heads * dh, d),
            w.full(p.num_kv_heads * dh, d),
        )
        self.wqkv = torch.cat([rows(wq, shard), rows(wk, shard), rows(wv, shard)])
        self.wo = cols(w.full(d, p.num_heads * dh), shard)
        gate, up = w.full(p.intermediate_size, d), w.full(p.intermediate_size, d)
        self.wgu = torch.cat([rows(gate, shard), rows(up, shard)])
        self.wdown = cols(w.full(d, p.intermediate_size), shard)
        self.norm1 = torch.ones(d, device=w.device, dtype=w.dtype)
        self.norm2 = torch.ones(d, device=w.device, dtype=w.dtype)

    def tensors(self) -> list[torch.Tensor]:
        return [self.wqkv, self.wo, self.wgu, self.wdown, self.norm1, self.norm2]


class Cache:
    """The static KV cache: K and V per layer, [B, kv heads on this rank, max_len, head_dim].
    Both live in one tensor, kv [layers, 2, B, kv heads, max_len, head_dim], so that the fused
    step writes a layer's new K and V with one kernel; k and v are its two views."""

    def __init__(self, model: Llama, batch: int, max_len: int) -> None:
        shape = (model.p.num_layers, 2, batch, model.hkv, max_len, model.dh)
        self.kv = torch.zeros(shape, device=model.device, dtype=model.dtype)
        self.k, self.v = self.kv[:, 0], self.kv[:, 1]
        self.max_len = max_len
        self.positions = torch.arange(max_len, device=model.device)


class Llama:
    """The decoder's weights on this rank, and its prefill and decode forward passes."""

    def __init__(self, p: LlmDecodeParams, shard: Shard, device: torch.device) -> None:
        self.p, self.shard, self.device = p, shard, device
        self.dtype = DTYPES[p.dtype]
        self.dh = p.hidden_size // p.num_heads
        self.hkv = p.num_kv_heads // shard.size
        w = Weights(p.seed, device, self.dtype)
        self.embed = w.full(p.vocab_size, p.hidden_size)  # every rank: a step reads B rows
        self.layers = [Layer(p, w, shard) for _ in range(p.num_layers)]
        self.norm = torch.ones(p.hidden_size, device=device, dtype=self.dtype)
        self.head = rows(w.full(p.vocab_size, p.hidden_size), shard)
        self.rope: torch.Tensor | None = None
        # set while the communication time is measured: every step's all-reduces and the
        # logits' all-gather left out, each rank computing its shard alone
        self.local_only = False
        # set by the worker where the batch-1 Triton step may reduce with symmetric memory's
        # one-shot all-reduce (params all_reduce "one-shot", GPUs with P2P)
        self.one_shot = False

    def weight_bytes(self) -> int:
        """Bytes of weights a decode step reads on this rank (the embedding table excluded:
        a step reads only its batch's rows of it, counted per step by the caller)."""
        ts = [t for layer in self.layers for t in layer.tensors()] + [self.norm, self.head]
        return sum(t.numel() * t.element_size() for t in ts)

    def param_count(self) -> int:
        """Parameters on this rank, the embedding included."""
        ts = [t for layer in self.layers for t in layer.tensors()] + [self.norm, self.head]
        return sum(t.numel() for t in ts) + self.embed.numel()

    def ensure_rope(self, positions: int) -> None:
        if self.rope is None or self.rope.shape[1] < positions:
            self.rope = rope_tables(self.p, positions, self.device)

    def _norm(self, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        """RMSNorm; torch's own (one fused kernel on a GPU, where the written-out form is five,
        each a launch in every layer of every step)."""
        return F.rms_norm(x, (x.shape[-1],), w, self.p.rms_eps)

    def _reduce(self, x: torch.Tensor, collectives: bool) -> torch.Tensor:
        if self.shard.size > 1 and collectives and not self.local_only:
            dist.all_reduce(x, group=self.shard.group)
        return x

    def _logits(self, h: torch.Tensor, collectives: bool) -> torch.Tensor:
        """[B, vocab] logits of the last positions, fp32 (gathered across the group)."""
        local = F.linear(self._norm(h, self.norm), self.head).float()
        if self.shard.size == 1 or not collectives or self.local_only:
            return local
        b, cols_here = local.shape
        parts = torch.empty(
            (self.shard.size * b, cols_here), device=local.device, dtype=local.dtype
        )
        _GATHER(parts, local.contiguous(), group=self.shard.group)
        return parts.view(self.shard.size, b, cols_here).permute(1, 0, 2).reshape(b, -1)

    def _mlp(self, layer: Layer, x: torch.Tensor, collectives: bool) -> torch.Tensor:
        gate, up = F.linear(x, layer.wgu).chunk(2, dim=-1)
        return self._reduce(F.linear(F.silu(gate) * up, layer.wdown), collectives)

    def _qkv(self, layer: Layer, x: torch.Tensor, cs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """q, k (rotated) and v as [B, heads, T, dh]: one matmul, then RoPE on q and k at once."""
        b, t, _ = x.shape
        qkv = F.linear(x, layer.wqkv).view(b, t, layer.hq + 2 * self.hkv, self.dh)
        rotated = rotate(qkv[:, :, : layer.hq + self.hkv], cs)
        q = rotated[:, :, : layer.hq].transpose(1, 2)
        k = rotated[:, :, layer.hq :].transpose(1, 2)
        v = qkv[:, :, layer.hq + self.hkv :].transpose(1, 2)
        return q, k, v

    def prefill(self, tokens: torch.Tensor, cache: Cache) -> torch.Tensor:
        """The prompt [B, T] through the model, its K and V written to positions 0..T-1 of the
        cache; returns the logits of the last position [B, vocab]."""
        b, t = tokens.shape
        self.ensure_rope(cache.max_len)
        assert self.rope is not None
        cs = self.rope[:, :t].to(self.dtype)
        h = F.embedding(tokens, self.embed)
        for i, layer in enumerate(self.layers):
            x = self._norm(h, layer.norm1)
            q, k, v = self._qkv(layer, x, cs)
            cache.k[i, :, :, :t] = k
            cache.v[i, :, :, :t] = v
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
            a = a.transpose(1, 2).reshape(b, t, -1)
            h = h + self._reduce(F.linear(a, layer.wo), True)
            h = h + self._mlp(layer, self._norm(h, layer.norm2), True)
        return self._logits(h[:, -1], True)

    def step_tables(self, pos: torch.Tensor, cache: Cache) -> tuple[torch.Tensor, torch.Tensor]:
        """A decode step's RoPE row (cos and sin at `pos`, [2, 1, dh]) and its attention bias:
        0 where a position is written, -inf past it, one for every layer of the step."""
        assert self.rope is not None
        cs = self.rope.index_select(1, pos).to(self.dtype)
        hidden = torch.full((), float("-inf"), device=self.device, dtype=self.dtype)
        return cs, torch.where(cache.positions <= pos, torch.zeros_like(hidden), hidden)

    def decode(
        self, tokens: torch.Tensor, pos: torch.Tensor, cache: Cache, collectives: bool = True
    ) -> torch.Tensor:
        """One token per sequence: tokens [B, 1] at position `pos` (a one-element device
        tensor); writes its K and V there and returns the logits [B, vocab]."""
        b = tokens.shape[0]
        cs, bias = self.step_tables(pos, cache)
        group = self.p.num_heads // self.p.num_kv_heads
        scale = 1.0 / math.sqrt(self.dh)
        h = F.embedding(tokens, self.embed)
        for i, layer in enumerate(self.layers):
            x = self._norm(h, layer.norm1)
            q, k, v = self._qkv(layer, x, cs)
            cache.k[i].index_copy_(2, pos, k)
            cache.v[i].index_copy_(2, pos, v)
            # [B kv heads, group, dh] x [B kv heads, dh, len]: each KV head read once, its
            # queries together; scale and mask in the same matmul (baddbmm), softmax in fp32
            n = b * self.hkv
            qg = q.reshape(n, group, self.dh)
            scores = torch.baddbmm(
                bias.expand(n, group, -1),
                qg,
                cache.k[i].view(n, -1, self.dh).transpose(1, 2),
                alpha=scale,
            )
            probs = scores.softmax(-1, dtype=torch.float32).to(self.dtype)
            a = torch.bmm(probs, cache.v[i].view(n, -1, self.dh)).reshape(b, 1, -1)
            h = h + self._reduce(F.linear(a, layer.wo), collectives)
            h = h + self._mlp(layer, self._norm(h, layer.norm2), collectives)
        return self._logits(h[:, -1], collectives)


class Generation:
    """The static state of one batch's generation: a CUDA graph replays `step` in place."""

    def __init__(self, model: Llama, batch: int, prompt_len: int, steps: int) -> None:
        self.model, self.prompt_len = model, prompt_len
        self.cache = Cache(model, batch, prompt_len + steps)
        model.ensure_rope(self.cache.max_len)
        self.tokens = torch.zeros((batch, 1), dtype=torch.long, device=model.device)
        self.pos = torch.zeros(1, dtype=torch.long, device=model.device)
        self.out = torch.zeros((batch, steps + 1), dtype=torch.long, device=model.device)
        self.logits: torch.Tensor | None = None

    def start(self, prompt: torch.Tensor) -> torch.Tensor:
        """Prefill the prompt; its next token is the first output, at position prompt_len."""
        logits = self.model.prefill(prompt, self.cache)
        first = logits.argmax(-1, keepdim=True)
        self.tokens.copy_(first)
        self.out[:, :1].copy_(first)
        self.pos.fill_(self.prompt_len)
        return logits

    def step(self) -> torch.Tensor:
        """One greedy decode step, all on the device: no value comes back to the host."""
        return self.advance(self.model.decode(self.tokens, self.pos, self.cache))

    def advance(self, logits: torch.Tensor) -> torch.Tensor:
        """The greedy token of a step's logits becomes the next input; the position moves on."""
        nxt = logits.argmax(-1, keepdim=True)
        self.tokens.copy_(nxt)
        self.out.index_copy_(1, self.pos - (self.prompt_len - 1), nxt)
        self.pos.add_(1)
        self.logits = logits
        return logits
