"""A batch-1 decode step of five Triton kernels a layer (issue 47's study, second session).

The fused step (kit.workloads.llm_decode.fused) left 15 kernels a layer, about 1 ms of a 4.8 ms
step between the matmuls. Here each matmul carries its neighbours (one program per slice of the
weight's rows, the whole reduction inside it: no split-K, no second kernel):
  qkv    RMSNorm of the residual (its scale folded in after the dot), the q/k/v matmul, RoPE,
         K and V written into the cache at the step's position, the rotated q written out
  attn   flash decoding over the written positions only, the grouped queries of one KV head
         together (SPLITS programs a head, then one combine kernel; SPLITS 1: one kernel)
  wo     the output matmul with the residual add (h += a Wo^T, in place)
  gu     RMSNorm, the gate/up matmul and SiLU(gate) * up
  down   the down matmul with the residual add
A piece left out of `pieces` runs as the fused step runs it (torch.compile'd small kernels,
cuBLAS's matmul). The LM head stays cuBLAS's (104% of the copy ceiling alone).

Batch 1, one GPU (no tensor parallel). `TRITON_INTERPRET=1` runs the same kernels on the CPU
(step_variants.py --cpu checks them against the kit's eager step).
"""

from __future__ import annotations

import functools
import math
from typing import Any

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from kit.workloads.llm_decode.model import Generation, rotate

ALL = frozenset({"qkv", "attn", "wo", "gu", "down"})


def _configs(
    rows: tuple[int, ...],
    blocks: tuple[int, ...],
    warps: tuple[int, ...] = (4, 8),
    stages: tuple[int, ...] = (1, 3),
) -> list[triton.Config]:
    """Call 11 swept R (4-32), BK (256, 512), 4/8 warps, 1/3 stages; call 12 wider, around
    call 11's winners (qkv R4 BK256 w4 s1, wo R4 BK512 w4 s3, gu R8 BK256 w4 s3, down R4
    BK512 w8 s3)."""
    return [
        triton.Config({"R": r, "BK": bk}, num_warps=w, num_stages=s)
        for r in rows
        for bk in blocks
        for w in warps
        for s in stages
    ]


@triton.autotune(configs=_configs((2, 4), (128, 256, 512), (2, 4, 8)), key=["K", "HALF"])
@triton.jit
def qkv_kernel(
    h_ptr, g_ptr, w_ptr, rope_ptr, pos_ptr, kv_ptr, q_ptr,
    K: tl.constexpr, HALF: tl.constexpr, HQ: tl.constexpr, HKV: tl.constexpr,
    MAXLEN: tl.constexpr, RSTRIDE: tl.constexpr, eps, R: tl.constexpr, BK: tl.constexpr,
):  # fmt: skip
    """One program: R rows of a head's first half and the R rows 64 (HALF) later, so RoPE's
    pairs meet in one program. Grid: heads x (HALF // R)."""
    pid = tl.program_id(0)
    parts = HALF // R
    head = pid // parts
    d_lo = (pid % parts) * R + tl.arange(0, R)
    rows_lo = head * (2 * HALF) + d_lo
    acc_lo = tl.zeros((R, BK), tl.float32)
    acc_hi = tl.zeros((R, BK), tl.float32)
    ss = tl.zeros((BK,), tl.float32)
    for k0 in range(0, K, BK):
        cols = k0 + tl.arange(0, BK)
        inside = cols < K
        x = tl.load(h_ptr + cols, mask=inside, other=0.0).to(tl.float32)
        ss += x * x
        xg = (x * tl.load(g_ptr + cols, mask=inside, other=0.0).to(tl.float32))[None, :]
        w_lo = tl.load(
            w_ptr + rows_lo[:, None] * K + cols[None, :], mask=inside[None, :], other=0.0
        )
        w_hi = tl.load(
            w_ptr + (rows_lo + HALF)[:, None] * K + cols[None, :], mask=inside[None, :], other=0.0
        )
        acc_lo += w_lo.to(tl.float32) * xg
        acc_hi += w_hi.to(tl.float32) * xg
    scale = 1.0 / tl.sqrt(tl.sum(ss, 0) / K + eps)
    lo = tl.sum(acc_lo, 1) * scale
    hi = tl.sum(acc_hi, 1) * scale
    pos = tl.load(pos_ptr)
    if head < HQ + HKV:  # q and k heads: rotated
        cos = tl.load(rope_ptr + pos * (2 * HALF) + d_lo)
        sin = tl.load(rope_ptr + RSTRIDE + pos * (2 * HALF) + d_lo)
        lo, hi = lo * cos - hi * sin, hi * cos + lo * sin
    if head < HQ:
        dst = q_ptr + head * (2 * HALF) + d_lo
    elif head < HQ + HKV:
        dst = kv_ptr + ((head - HQ) * MAXLEN + pos) * (2 * HALF) + d_lo
    else:
        dst = kv_ptr + ((HKV + head - HQ - HKV) * MAXLEN + pos) * (2 * HALF) + d_lo
    tl.store(dst, lo.to(q_ptr.dtype.element_ty))
    tl.store(dst + HALF, hi.to(q_ptr.dtype.element_ty))


@triton.autotune(
    configs=_configs((2, 4, 8), (256, 512, 1024), (4, 8), (3, 4)),
    key=["N", "K"],
    restore_value=["h_ptr"],
)
@triton.jit
def gemv_add_kernel(
    x_ptr, w_ptr, h_ptr, N: tl.constexpr, K: tl.constexpr, R: tl.constexpr, BK: tl.constexpr
):
    """h[n] += sum_k W[n, k] x[k] for the program's R rows (the residual add as the epilogue)."""
    rows = tl.program_id(0) * R + tl.arange(0, R)
    acc = tl.zeros((R, BK), tl.float32)
    for k0 in range(0, K, BK):
        cols = k0 + tl.arange(0, BK)
        inside = cols < K
        x = tl.load(x_ptr + cols, mask=inside, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + rows[:, None] * K + cols[None, :], mask=inside[None, :], other=0.0)
        acc += w.to(tl.float32) * x[None, :]
    out = tl.load(h_ptr + rows).to(tl.float32) + tl.sum(acc, 1)
    tl.store(h_ptr + rows, out.to(h_ptr.dtype.element_ty))


@triton.autotune(
    configs=_configs((4, 8, 16), (128, 256, 512, 1024), (2, 4, 8), (1, 3, 4)), key=["N", "K"]
)
@triton.jit
def gu_kernel(
    h_ptr, g_ptr, w_ptr, out_ptr, N: tl.constexpr, K: tl.constexpr, eps,
    R: tl.constexpr, BK: tl.constexpr,
):  # fmt: skip
    """out[n] = SiLU(gate[n]) * up[n] of RMSNorm(h): rows n of the gate and n + N of up."""
    rows = tl.program_id(0) * R + tl.arange(0, R)
    acc_g = tl.zeros((R, BK), tl.float32)
    acc_u = tl.zeros((R, BK), tl.float32)
    ss = tl.zeros((BK,), tl.float32)
    for k0 in range(0, K, BK):
        cols = k0 + tl.arange(0, BK)
        inside = cols < K
        x = tl.load(h_ptr + cols, mask=inside, other=0.0).to(tl.float32)
        ss += x * x
        xg = (x * tl.load(g_ptr + cols, mask=inside, other=0.0).to(tl.float32))[None, :]
        wg = tl.load(w_ptr + rows[:, None] * K + cols[None, :], mask=inside[None, :], other=0.0)
        wu = tl.load(
            w_ptr + (rows + N)[:, None] * K + cols[None, :], mask=inside[None, :], other=0.0
        )
        acc_g += wg.to(tl.float32) * xg
        acc_u += wu.to(tl.float32) * xg
    scale = 1.0 / tl.sqrt(tl.sum(ss, 0) / K + eps)
    gate = tl.sum(acc_g, 1) * scale
    up = tl.sum(acc_u, 1) * scale
    # the gate and up rounded as a bf16 matmul's output would be, then SiLU * up in fp32
    gate = gate.to(out_ptr.dtype.element_ty).to(tl.float32)
    up = up.to(out_ptr.dtype.element_ty).to(tl.float32)
    tl.store(out_ptr + rows, (gate / (1.0 + tl.exp(-gate)) * up).to(out_ptr.dtype.element_ty))


@triton.jit
def attn_kernel(
    q_ptr, kv_ptr, pos_ptr, out_ptr, part_ptr, stat_ptr, scale,
    HKV: tl.constexpr, G: tl.constexpr, GP: tl.constexpr, DH: tl.constexpr,
    MAXLEN: tl.constexpr, SPLITS: tl.constexpr, CHUNK: tl.constexpr, BL: tl.constexpr,
):  # fmt: skip
    """Grid (KV heads, SPLITS): the G query heads of one KV head (padded to GP rows for the dot)
    over positions [split * CHUNK, min(+CHUNK, pos + 1)); online softmax in fp32."""
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
    if SPLITS == 1:
        out = acc / lsum[:, None]
        tl.store(
            out_ptr + (j * G + r)[:, None] * DH + d[None, :],
            out.to(out_ptr.dtype.element_ty),
            mask=(r < G)[:, None],
        )
    else:
        base = (j * SPLITS + s) * GP
        tl.store(part_ptr + (base + r)[:, None] * DH + d[None, :], acc)
        tl.store(stat_ptr + 2 * (base + r), m)
        tl.store(stat_ptr + 2 * (base + r) + 1, lsum)


@triton.jit
def combine_kernel(
    part_ptr, stat_ptr, out_ptr, G: tl.constexpr, GP: tl.constexpr, DH: tl.constexpr,
    SPLITS: tl.constexpr,
):  # fmt: skip
    """One query head: its SPLITS partial results weighted by exp(m_s - max m)."""
    j = tl.program_id(0) // G
    r = tl.program_id(0) % G
    s = tl.arange(0, SPLITS)
    d = tl.arange(0, DH)
    row = (j * SPLITS + s) * GP + r
    m = tl.load(stat_ptr + 2 * row)
    lsum = tl.load(stat_ptr + 2 * row + 1)
    w = tl.exp(m - tl.max(m, 0))
    w = tl.where(m == float("-inf"), 0.0, w)
    acc = tl.load(part_ptr + row[:, None] * DH + d[None, :])
    out = tl.sum(acc * w[:, None], 0) / tl.sum(lsum * w, 0)
    tl.store(out_ptr + (j * G + r) * DH + d, out.to(out_ptr.dtype.element_ty))


def tri_step(gen: Generation, pieces: frozenset[str] = ALL, splits: int = 8, bl: int = 64) -> Any:
    """A step() for `gen` (batch 1) like Generation.step, the pieces named run as Triton kernels."""
    model, cache = gen.model, gen.cache
    p = model.p
    assert gen.tokens.shape[0] == 1 and model.shard.size == 1, "batch 1, one GPU"
    hq, hkv, dh, d, inter = p.num_heads, model.hkv, model.dh, p.hidden_size, p.intermediate_size
    group, eps, scale = hq // hkv, p.rms_eps, 1.0 / math.sqrt(dh)
    gp = max(16, triton.next_power_of_2(group))
    maxlen = cache.max_len
    chunk = triton.cdiv(triton.cdiv(maxlen, splits), bl) * bl
    dev, dt = model.device, model.dtype
    part = torch.empty((hkv * splits * gp, dh), device=dev, dtype=torch.float32)
    stat = torch.empty((hkv * splits * gp, 2), device=dev, dtype=torch.float32)
    compiled = functools.partial(
        torch.compile,
        dynamic=False,
        fullgraph=True,
        backend="inductor" if dev.type == "cuda" else "aot_eager",
    )

    @compiled
    def norm(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return F.rms_norm(x, (x.shape[-1],), w, eps)

    @compiled
    def rope_write(qkv: torch.Tensor, cs: torch.Tensor, layer_kv: torch.Tensor, pos: torch.Tensor):
        rotated = rotate(qkv[:, :, : hq + hkv], cs)
        k = rotated[:, :, hq:].transpose(1, 2)
        v = qkv[:, :, hq + hkv :].transpose(1, 2)
        layer_kv.index_copy_(3, pos, torch.stack([k, v]))
        return rotated[:, :, :hq].reshape(hkv, group, dh).contiguous()

    @compiled
    def swiglu(gu: torch.Tensor) -> torch.Tensor:
        gate, up = gu.chunk(2, dim=-1)
        return F.silu(gate) * up

    def decode() -> torch.Tensor:
        pos = gen.pos
        assert model.rope is not None
        if not {"qkv", "attn"} <= pieces:  # the fallbacks' RoPE row and mask
            cs, bias = model.step_tables(pos, cache)
        h = F.embedding(gen.tokens, model.embed).view(d)
        q = torch.empty(hq * dh, device=dev, dtype=dt)
        a = torch.empty(hq * dh, device=dev, dtype=dt)
        act = torch.empty(inter, device=dev, dtype=dt)
        for i, layer in enumerate(model.layers):
            layer_kv = cache.kv[i]
            if "qkv" in pieces:
                qkv_kernel[lambda meta: ((hq + 2 * hkv) * (dh // 2) // meta["R"],)](
                    h, layer.norm1, layer.wqkv, model.rope, pos, layer_kv, q,
                    d, dh // 2, hq, hkv, maxlen, model.rope.stride(0), eps,
                )  # fmt: skip
            else:
                qkv = F.linear(norm(h, layer.norm1), layer.wqkv).view(1, 1, hq + 2 * hkv, dh)
                q.copy_(rope_write(qkv, cs, layer_kv, pos).view(-1))
            if "attn" in pieces:
                attn_kernel[(hkv, splits)](
                    q, layer_kv, pos, a, part, stat, scale,
                    hkv, group, gp, dh, maxlen, splits, chunk, bl,
                )  # fmt: skip
                if splits > 1:
                    combine_kernel[(hq,)](part, stat, a, group, gp, dh, splits)
            else:
                keys, values = layer_kv[0].view(hkv, -1, dh), layer_kv[1].view(hkv, -1, dh)
                sc = torch.baddbmm(
                    bias.expand(hkv, group, -1), q.view(hkv, group, dh), keys.transpose(1, 2),
                    alpha=scale,
                )  # fmt: skip
                probs = sc.softmax(-1, dtype=torch.float32).to(dt)
                a.copy_(torch.bmm(probs, values).view(-1))
            if "wo" in pieces:
                gemv_add_kernel[lambda meta: (d // meta["R"],)](a, layer.wo, h, d, hq * dh)
            else:
                h = h + F.linear(a, layer.wo)
            if "gu" in pieces:
                gu_kernel[lambda meta: (inter // meta["R"],)](
                    h, layer.norm2, layer.wgu, act, inter, d, eps
                )
            else:
                act.copy_(swiglu(F.linear(norm(h, layer.norm2), layer.wgu)))
            if "down" in pieces:
                gemv_add_kernel[lambda meta: (d // meta["R"],)](act, layer.wdown, h, d, inter)
            else:
                h = h + F.linear(act, layer.wdown)
        return F.linear(norm(h, model.norm), model.head).float().view(1, -1)

    return lambda: gen.advance(decode())
