"""The decode step with its small kernels fused (step_mode "fused").

A batch-1 decode step reads 15 GB of weights in about 3.9 ms of matmuls on an H200, and the
kit's eager step spent 2 ms more in some 600 small kernels between them (RMSNorm, RoPE, the
cache writes, the softmax, SiLU, the residual adds), each a launch and a wait in the CUDA graph.
Two forms, measured on an H200 (one GPU, the Llama-3.1-8B shape,
reports/measurements/2026-11-28-decode-step):

- batch 1 on a GPU (kernel_step): Triton kernels that carry each matmul's neighbours, five a
  layer (kit.workloads.llm_decode.kernels): 4.36-4.44 ms a token in the kit's Docker container; the
  study's form of them 4.1-4.3 ms a step (84-87% of the GPU's copy ceiling) where the pieces
  below took 4.9 ms and the eager step's kernels 6.0-6.3 ms;
- any batch (pieces_step): torch.compile fuses each run of small kernels into one Triton kernel
  and leaves the matmuls to cuBLAS: per layer the residual add and RMSNorm one kernel (twice),
  RoPE with the K/V write into the cache one, softmax and its cast one, SiLU * up one: 4.8-5.0
  ms at batch 1 (497 kernels against 816), 1.2x the eager step's kernels at batch 8 to 128.

Both are the eager step's arithmetic (kit.workloads.llm_decode.model.Llama.decode) with fp32
accumulation where the kernels fuse; against an fp32 step of the same weights their logits are as
close as the eager step's, the same greedy token. The tensor-parallel all-reduces stay between
the pieces. `backend` is torch.compile's: "inductor" on a GPU; the CPU tests pass "aot_eager",
which traces and runs the same pieces without generating code (and TRITON_INTERPRET=1 runs
kernel_step's kernels on the CPU).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import torch
import torch.nn.functional as F

from kit.workloads.llm_decode import kernels
from kit.workloads.llm_decode.model import Generation, Llama, rotate


def fused_step(gen: Generation, backend: str = "inductor") -> Callable[[], torch.Tensor]:
    """A step() for `gen` like Generation.step: the same state, the same outputs. Batch 1 on a
    GPU runs the Triton kernels (kernel_step); the rest torch.compile's pieces (pieces_step)."""
    layer = gen.model.layers[0]
    rows = [layer.wo.shape[0], layer.wgu.shape[0] // 2]
    if gen.tokens.shape[0] == 1 and gen.tokens.is_cuda and kernels.usable(gen.model.dh, rows):
        return kernel_step(gen)
    return pieces_step(gen, backend)


def kernel_step(gen: Generation) -> Callable[[], torch.Tensor]:
    """The batch-1 step in five Triton kernels a layer (kit.workloads.llm_decode.kernels). With
    tensor parallel the output and down matmuls write into the residual in place on every rank,
    the group's first rank adding it and the others not, so the all-reduce sums the residual in
    with the partial sums: no add kernel after each of the step's 64 all-reduces."""
    model, cache = gen.model, gen.cache
    p = model.p
    assert gen.tokens.shape[0] == 1 and model.rope is not None
    hq, hkv, dh, eps = p.num_heads // model.shard.size, model.hkv, model.dh, p.rms_eps
    parallel = model.shard.size > 1
    carries = model.shard.index == 0  # the rank whose partial sum carries the residual
    attention = kernels.Attention(hq, hkv, dh, cache.max_len, model.device)
    shared = one_shot_buffers(model, p.hidden_size) if parallel and model.one_shot else None

    def reduced(h: torch.Tensor) -> torch.Tensor:
        """h summed across the group: NCCL's all-reduce in place (Llama._reduce, which also
        leaves it out while the step is timed alone), or the one-shot from the symmetric buffer
        h is in into the other one, where h then lives."""
        if shared is None or model.local_only:
            return model._reduce(h, True)
        first, second, group = shared
        into = second if h.data_ptr() == first.data_ptr() else first
        torch.ops.symm_mem.one_shot_all_reduce_out(h, "sum", group, into)
        return into

    def decode() -> torch.Tensor:
        assert model.rope is not None
        h = F.embedding(gen.tokens, model.embed).view(-1)
        if shared is not None:  # the residual lives in symmetric memory, where the one-shot reads
            h = shared[0].copy_(h)
        q = torch.empty(hq * dh, device=h.device, dtype=h.dtype)
        a = torch.empty_like(q)
        act = torch.empty(model.layers[0].wdown.shape[1], device=h.device, dtype=h.dtype)

        def residual(x: torch.Tensor, w: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
            """h + x W^T, in place: on one GPU the matmul adds h; across the group only the
            first rank's does, and the all-reduce adds the other ranks' partial sums."""
            kernels.gemv(x, w, h, add=carries)
            return reduced(h) if parallel else h

        for i, layer in enumerate(model.layers):
            kernels.qkv_rope_write(
                h, layer.norm1, layer.wqkv, model.rope, gen.pos, cache.kv[i], q, hq, hkv, eps
            )
            attention(q, cache.kv[i], gen.pos, a)
            h = residual(a, layer.wo, h)
            kernels.swiglu_gemv(h, layer.norm2, layer.wgu, act, eps)
            h = residual(act, layer.wdown, h)
        return model._logits(h.view(1, -1), True)

    return lambda: gen.advance(decode())


def one_shot_buffers(model: Llama, n: int) -> tuple[torch.Tensor, torch.Tensor, str]:
    """For symmetric memory's one-shot all-reduce (torch.distributed._symmetric_memory): two
    buffers of `n` values every GPU of the group maps (a collective: every rank of the group
    calls it), and the group's name. The residual moves from one to the other at each
    all-reduce: the one-shot waits for every GPU's values before it reads and for every GPU's
    read before it returns, so the buffer it read may be written again by the next matmul."""
    import torch.distributed._symmetric_memory as symm

    group = model.shard.group
    assert group is not None
    name = group.group_name
    if hasattr(symm, "enable_symm_mem_for_group"):  # torch releases that have it need it first
        symm.enable_symm_mem_for_group(name)
    buffers = []
    for _ in range(2):
        buffer = symm.empty(n, device=model.device, dtype=model.dtype)
        symm.rendezvous(buffer, name)
        buffers.append(buffer)
    return buffers[0], buffers[1], name


def pieces_step(gen: Generation, backend: str = "inductor") -> Callable[[], torch.Tensor]:
    """torch.compile's pieces around cuBLAS's matmuls, at any batch."""
    model, cache = gen.model, gen.cache
    p, b = model.p, gen.tokens.shape[0]
    hq, hkv, dh = p.num_heads // model.shard.size, model.hkv, model.dh
    group, eps, scale = hq // hkv, p.rms_eps, 1.0 / math.sqrt(dh)
    compiled = functools.partial(torch.compile, dynamic=False, fullgraph=True, backend=backend)

    @compiled
    def add_norm(h: torch.Tensor, d: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, ...]:
        h = h + d
        return h, F.rms_norm(h, (h.shape[-1],), w, eps)

    @compiled
    def norm(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return F.rms_norm(x, (x.shape[-1],), w, eps)

    @compiled
    def rope_write(
        qkv: torch.Tensor, cs: torch.Tensor, layer_kv: torch.Tensor, pos: torch.Tensor
    ) -> torch.Tensor:
        """q rotated, grouped per KV head [B kv heads, group, dh]; K rotated and V written
        into the cache at `pos`."""
        rotated = rotate(qkv[:, :, : hq + hkv], cs)
        k = rotated[:, :, hq:].transpose(1, 2)
        v = qkv[:, :, hq + hkv :].transpose(1, 2)
        layer_kv.index_copy_(3, pos, torch.stack([k, v]))
        return rotated[:, :, :hq].reshape(b * hkv, group, dh).contiguous()

    @compiled
    def softmax(scores: torch.Tensor) -> torch.Tensor:
        return scores.softmax(-1, dtype=torch.float32).to(scores.dtype)

    @compiled
    def swiglu(gu: torch.Tensor) -> torch.Tensor:
        gate, up = gu.chunk(2, dim=-1)
        return F.silu(gate) * up

    def decode() -> torch.Tensor:
        pos = gen.pos
        cs, bias = model.step_tables(pos, cache)
        n = b * hkv
        h = F.embedding(gen.tokens, model.embed)
        x = norm(h, model.layers[0].norm1)
        delta: torch.Tensor | None = None
        for i, layer in enumerate(model.layers):
            if delta is not None:
                h, x = add_norm(h, delta, layer.norm1)
            qkv = F.linear(x, layer.wqkv).view(b, 1, hq + 2 * hkv, dh)
            q = rope_write(qkv, cs, cache.kv[i], pos)
            keys, values = cache.kv[i, 0].view(n, -1, dh), cache.kv[i, 1].view(n, -1, dh)
            scores = torch.baddbmm(bias.expand(n, group, -1), q, keys.transpose(1, 2), alpha=scale)
            a = torch.bmm(softmax(scores), values).reshape(b, 1, hq * dh)
            attended = model._reduce(F.linear(a, layer.wo), True)
            h, x = add_norm(h, attended, layer.norm2)
            up = swiglu(F.linear(x, layer.wgu))
            delta = model._reduce(F.linear(up, layer.wdown), True)
        assert delta is not None
        return model._logits((h + delta)[:, -1], True)

    return lambda: gen.advance(decode())
