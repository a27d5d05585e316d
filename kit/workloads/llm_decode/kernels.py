"""Triton kernels of the batch-1 decode step: each matmul carries its neighbours.

At batch 1 a decode step is a row vector times each weight: the time is the weight's bytes over
HBM bandwidth, and whatever runs between the matmuls is lost. cuBLAS's matmuls with torch.compile's
small kernels around them left 15 kernels a layer and about 1 ms of a 4.9 ms step between them on
an H200. Here one program holds a few rows of a weight and the whole reduction over its columns
(no split-K, no second kernel), so the step needs five kernels a layer:

  qkv_rope_write   RMSNorm of the residual (its 1/rms folded in after the dot), the q/k/v matmul,
                   RoPE on q and k, K and V written into the cache at the step's position
  Attention        flash decoding over the written positions only: the query heads of one KV head
                   together, the positions in SPLITS chunks, then one kernel combines the chunks
  gemv             the output and down matmuls, with the residual add in place (one GPU, and
                   the first rank of a tensor-parallel group, whose all-reduce then sums the
                   other ranks' partial sums in)
  swiglu_gemv      RMSNorm, the gate/up matmul, SiLU(gate) * up

Measured on H200s (reports/measurements/2026-11-28-decode-step): the study's form of these
kernels took 4.11-4.25 ms a step of the Llama-3.1-8B shape (84-87% of the GPU's copy ceiling)
where the compiled pieces took 4.90-4.91 ms (calls 11-12); these, with a row mask on the weight
loads since removed, 4.36-4.44 ms a token in the kit's Docker container (call 15). Each kernel's
block sizes are autotuned at the first step among the ones that won the study's sweeps (calls
11-12) and their neighbours; the result's notes name the picks (`picked`). Accumulation is fp32:
a step's logits are at least as close to an fp32 step of the same weights as the eager bf16
step's.

The position is read from device memory, so a CUDA graph of the step replays at every position.
`TRITON_INTERPRET=1` runs the same kernels on the CPU (the unit tests do, in fp32).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import torch

try:
    import triton
    import triton.language as tl
except ImportError:  # a torch without Triton (CPU-only wheels): usable() says no, nothing runs
    triton = tl = None  # type: ignore[assignment]

SPLITS, BLOCK_L = 8, 64  # attention: position chunks per KV head, positions per block


def _jit(fn: Callable[..., Any]) -> Any:
    return triton.jit(fn) if triton is not None else fn


def _autotune(configs: list[Any], key: list[str], **kwargs: Any) -> Callable[..., Any]:
    if triton is None or not configs:
        return lambda fn: fn
    return triton.autotune(configs=configs, key=key, **kwargs)


def _configs(*choices: tuple[int, int, int, int]) -> list[Any]:
    """(rows a program, columns a block, warps, stages); the interpreter takes the first only
    (it cannot time them)."""
    if triton is None:
        return []
    if os.environ.get("TRITON_INTERPRET") == "1":
        choices = choices[:1]
    return [triton.Config({"R": r, "BK": bk}, num_warps=w, num_stages=s) for r, bk, w, s in choices]


# the winners of the study's sweeps (calls 11, 12) and their neighbours
QKV = _configs(
    (4, 512, 2, 1), (4, 256, 4, 1), (2, 512, 2, 1), (2, 256, 4, 1), (4, 512, 4, 1), (2, 1024, 2, 1)
)
GEMV = _configs(
    (4, 512, 8, 3), (2, 1024, 4, 3), (4, 512, 4, 3), (2, 512, 4, 3), (4, 1024, 8, 3),
    (8, 256, 4, 3), (8, 512, 8, 3), (4, 256, 4, 3),
)  # fmt: skip
SWIGLU = _configs(
    (4, 512, 2, 1), (8, 256, 4, 3), (4, 256, 2, 1), (8, 512, 4, 3), (4, 512, 4, 3), (8, 256, 4, 1)
)


@_jit
def _norm_dot_pair(
    h_ptr, g_ptr, w_ptr, rows, other, eps, K: tl.constexpr, R: tl.constexpr, BK: tl.constexpr
):
    """RMSNorm(h) (with its weight g) against the weight's `rows` and the rows `other` further
    on: both dot products in fp32, the norm's 1/rms applied after them (it is one number)."""
    acc_a = tl.zeros((R, BK), tl.float32)
    acc_b = tl.zeros((R, BK), tl.float32)
    ss = tl.zeros((BK,), tl.float32)
    for k0 in range(0, K, BK):
        cols = k0 + tl.arange(0, BK)
        inside = cols < K
        x = tl.load(h_ptr + cols, mask=inside, other=0.0).to(tl.float32)
        ss += x * x
        xg = (x * tl.load(g_ptr + cols, mask=inside, other=0.0).to(tl.float32))[None, :]
        wa = tl.load(w_ptr + rows[:, None] * K + cols[None, :], mask=inside[None, :], other=0.0)
        wb = tl.load(
            w_ptr + (rows + other)[:, None] * K + cols[None, :], mask=inside[None, :], other=0.0
        )
        acc_a += wa.to(tl.float32) * xg
        acc_b += wb.to(tl.float32) * xg
    scale = 1.0 / tl.sqrt(tl.sum(ss, 0) / K + eps)
    return tl.sum(acc_a, 1) * scale, tl.sum(acc_b, 1) * scale


@_autotune(QKV, key=["K", "HALF", "HQ", "HKV"])
@_jit
def _qkv_kernel(
    h_ptr, g_ptr, w_ptr, rope_ptr, pos_ptr, kv_ptr, q_ptr, eps,
    K: tl.constexpr, HALF: tl.constexpr, HQ: tl.constexpr, HKV: tl.constexpr,
    MAXLEN: tl.constexpr, RSTRIDE: tl.constexpr, R: tl.constexpr, BK: tl.constexpr,
):  # fmt: skip
    """R rows of a head's first half and the R rows HALF later (RoPE's pairs meet in one
    program). Grid: heads x cdiv(HALF, R). kv: [2, 1, HKV, MAXLEN, 2 HALF] (this layer's)."""
    pid = tl.program_id(0)
    parts = tl.cdiv(HALF, R)
    head = pid // parts
    d_lo = (pid % parts) * R + tl.arange(0, R)
    lo, hi = _norm_dot_pair(h_ptr, g_ptr, w_ptr, head * (2 * HALF) + d_lo, HALF, eps, K, R, BK)
    pos = tl.load(pos_ptr)
    if head < HQ + HKV:  # q and k heads are rotated (cos and sin repeat after HALF)
        cos = tl.load(rope_ptr + pos * (2 * HALF) + d_lo)
        sin = tl.load(rope_ptr + RSTRIDE + pos * (2 * HALF) + d_lo)
        lo, hi = lo * cos - hi * sin, hi * cos + lo * sin
    if head < HQ:
        dst = q_ptr + head * (2 * HALF) + d_lo
    else:  # K heads at [0, 0, head - HQ], V heads at [1, 0, head - HQ - HKV]: both head - HQ
        dst = kv_ptr + ((head - HQ) * MAXLEN + pos) * (2 * HALF) + d_lo
    tl.store(dst, lo.to(q_ptr.dtype.element_ty))
    tl.store(dst + HALF, hi.to(q_ptr.dtype.element_ty))


@_autotune(GEMV, key=["N", "K", "ADD"], restore_value=["out_ptr"])
@_jit
def _gemv_kernel(
    x_ptr, w_ptr, h_ptr, out_ptr, N: tl.constexpr, K: tl.constexpr, ADD: tl.constexpr,
    R: tl.constexpr, BK: tl.constexpr,
):  # fmt: skip
    """out[n] = (h[n] +) sum_k W[n, k] x[k] for the program's R rows."""
    rows = tl.program_id(0) * R + tl.arange(0, R)
    acc = tl.zeros((R, BK), tl.float32)
    for k0 in range(0, K, BK):
        cols = k0 + tl.arange(0, BK)
        inside = cols < K
        x = tl.load(x_ptr + cols, mask=inside, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + rows[:, None] * K + cols[None, :], mask=inside[None, :], other=0.0)
        acc += w.to(tl.float32) * x[None, :]
    out = tl.sum(acc, 1)
    if ADD:
        out += tl.load(h_ptr + rows).to(tl.float32)
    tl.store(out_ptr + rows, out.to(out_ptr.dtype.element_ty))


@_autotune(SWIGLU, key=["N", "K"])
@_jit
def _swiglu_kernel(
    h_ptr, g_ptr, w_ptr, out_ptr, eps, N: tl.constexpr, K: tl.constexpr,
    R: tl.constexpr, BK: tl.constexpr,
):  # fmt: skip
    """out[n] = SiLU(gate[n]) * up[n] of RMSNorm(h): rows n of the gate and n + N of up."""
    rows = tl.program_id(0) * R + tl.arange(0, R)
    gate, up = _norm_dot_pair(h_ptr, g_ptr, w_ptr, rows, N, eps, K, R, BK)
    # gate and up rounded as a matmul's output in the weights' dtype would be; SiLU * up in fp32
    gate = gate.to(out_ptr.dtype.element_ty).to(tl.float32)
    up = up.to(out_ptr.dtype.element_ty).to(tl.float32)
    act = gate / (1.0 + tl.exp(-gate)) * up
    tl.store(out_ptr + rows, act.to(out_ptr.dtype.element_ty))


@_jit
def _attend_kernel(
    q_ptr, kv_ptr, pos_ptr, part_ptr, stat_ptr, scale,
    HKV: tl.constexpr, G: tl.constexpr, GP: tl.constexpr, DH: tl.constexpr,
    MAXLEN: tl.constexpr, CHUNK: tl.constexpr, BL: tl.constexpr,
):  # fmt: skip
    """Grid (KV heads, splits): the G query heads of one KV head (GP rows, padded for the dot)
    over positions [split * CHUNK, min(+CHUNK, pos + 1)), online softmax in fp32; writes the
    chunk's unnormalised sum, its running max and its denominator."""
    j = tl.program_id(0)
    s = tl.program_id(1)
    pos = tl.load(pos_ptr)
    r = tl.arange(0, GP)
    d = tl.arange(0, DH)
    q = tl.load(q_ptr + (j * G + r)[:, None] * DH + d[None, :], mask=(r < G)[:, None], other=0.0)
    m = tl.full((GP,), float("-inf"), tl.float32)
    lsum = tl.zeros((GP,), tl.float32)
    acc = tl.zeros((GP, DH), tl.float32)
    start = s * CHUNK
    end = tl.minimum(start + CHUNK, pos + 1)
    k_base = kv_ptr + j * MAXLEN * DH
    v_base = kv_ptr + (HKV + j) * MAXLEN * DH
    for p0 in range(start, end, BL):
        p = p0 + tl.arange(0, BL)
        valid = p < end
        k = tl.load(k_base + p[:, None] * DH + d[None, :], mask=valid[:, None], other=0.0)
        v = tl.load(v_base + p[:, None] * DH + d[None, :], mask=valid[:, None], other=0.0)
        sc = tl.dot(q, tl.trans(k)) * scale
        sc = tl.where(valid[None, :], sc, float("-inf"))
        m_new = tl.maximum(m, tl.max(sc, 1))
        alpha = tl.exp(m - m_new)
        pr = tl.exp(sc - m_new[:, None])
        lsum = lsum * alpha + tl.sum(pr, 1)
        acc = acc * alpha[:, None] + tl.dot(pr.to(v.dtype), v)
        m = m_new
    base = (j * tl.num_programs(1) + s) * GP
    tl.store(part_ptr + (base + r)[:, None] * DH + d[None, :], acc)
    tl.store(stat_ptr + 2 * (base + r), m)
    tl.store(stat_ptr + 2 * (base + r) + 1, lsum)


@_jit
def _combine_kernel(
    part_ptr, stat_ptr, out_ptr, G: tl.constexpr, GP: tl.constexpr, DH: tl.constexpr,
    SPLITS: tl.constexpr,
):  # fmt: skip
    """One query head: its chunks' sums weighted by exp(m_chunk - max m), over the weighted
    denominators (an empty chunk, past the position, weighs 0)."""
    j = tl.program_id(0) // G
    r = tl.program_id(0) % G
    s = tl.arange(0, SPLITS)
    d = tl.arange(0, DH)
    row = (j * SPLITS + s) * GP + r
    m = tl.load(stat_ptr + 2 * row)
    lsum = tl.load(stat_ptr + 2 * row + 1)
    w = tl.where(m == float("-inf"), 0.0, tl.exp(m - tl.max(m, 0)))
    acc = tl.load(part_ptr + row[:, None] * DH + d[None, :])
    out = tl.sum(acc * w[:, None], 0) / tl.sum(lsum * w, 0)
    tl.store(out_ptr + (j * G + r) * DH + d, out.to(out_ptr.dtype.element_ty))


def usable(head_dim: int, rows: list[int]) -> bool:
    """Triton is here; the head dim is a power of two, at least 16 (a dot's smallest side); every
    weight's rows a multiple of 8, so that a program's rows need no mask (a row mask on the
    weight's loads cost the down matmul 10%: the study's call 16)."""
    return (
        triton is not None
        and head_dim >= 16
        and head_dim & (head_dim - 1) == 0
        and all(n % 8 == 0 for n in rows)
    )


def qkv_rope_write(
    h: torch.Tensor, norm: torch.Tensor, w: torch.Tensor, rope: torch.Tensor,
    pos: torch.Tensor, layer_kv: torch.Tensor, q: torch.Tensor, hq: int, hkv: int, eps: float,
) -> None:  # fmt: skip
    """q = RoPE(RMSNorm(h) Wq), K and V into layer_kv [2, 1, hkv, max_len, dh] at `pos`."""
    half = layer_kv.shape[-1] // 2
    _qkv_kernel[lambda c: ((hq + 2 * hkv) * triton.cdiv(half, c["R"]),)](
        h, norm, w, rope, pos, layer_kv, q, eps,
        h.numel(), half, hq, hkv, layer_kv.shape[-2], rope.stride(0),
    )  # fmt: skip


def gemv(x: torch.Tensor, w: torch.Tensor, out: torch.Tensor, add: bool) -> None:
    """out = x W^T, plus out's own values when `add` (the residual, in place)."""
    n, k = w.shape
    _gemv_kernel[lambda c: (triton.cdiv(n, c["R"]),)](x, w, out, out, n, k, add)


def swiglu_gemv(
    h: torch.Tensor, norm: torch.Tensor, w: torch.Tensor, out: torch.Tensor, eps: float
) -> None:
    """out = SiLU(x Wgate^T) * (x Wup^T) with x = RMSNorm(h); w is gate and up stacked."""
    n = w.shape[0] // 2
    _swiglu_kernel[lambda c: (triton.cdiv(n, c["R"]),)](h, norm, w, out, eps, n, w.shape[1])


def picked() -> str:
    """The block sizes the autotuner picked, one phrase per kernel and shape (for the notes)."""
    parts = []
    for name, kernel in (("qkv", _qkv_kernel), ("gemv", _gemv_kernel), ("swiglu", _swiglu_kernel)):
        for key, c in sorted(getattr(kernel, "cache", {}).items(), key=str):
            shape = "x".join(str(v) for v in key if isinstance(v, int) and not isinstance(v, bool))
            parts.append(
                f"{name} {shape}: {c.kwargs['R']} rows, {c.kwargs['BK']} columns, "
                f"{c.num_warps} warps, {c.num_stages} stages"
            )
    return "; ".join(parts)


class Attention:
    """Flash decoding of one layer at a time: the scratch of the chunks, kept for the graph."""

    def __init__(self, hq: int, hkv: int, dh: int, max_len: int, device: torch.device) -> None:
        self.hq, self.hkv, self.dh, self.max_len = hq, hkv, dh, max_len
        self.group = hq // hkv
        self.gp = max(16, triton.next_power_of_2(self.group))
        self.chunk = triton.cdiv(triton.cdiv(max_len, SPLITS), BLOCK_L) * BLOCK_L
        rows = hkv * SPLITS * self.gp
        self.part = torch.empty((rows, dh), device=device, dtype=torch.float32)
        self.stat = torch.empty((rows, 2), device=device, dtype=torch.float32)

    def __call__(
        self, q: torch.Tensor, layer_kv: torch.Tensor, pos: torch.Tensor, out: torch.Tensor
    ) -> None:
        """out [hq dh] = softmax(q K^T / sqrt(dh)) V over positions 0..pos."""
        _attend_kernel[(self.hkv, SPLITS)](
            q, layer_kv, pos, self.part, self.stat, self.dh**-0.5,
            self.hkv, self.group, self.gp, self.dh, self.max_len, self.chunk, BLOCK_L,
        )  # fmt: skip
        _combine_kernel[(self.hq,)](self.part, self.stat, out, self.group, self.gp, self.dh, SPLITS)
