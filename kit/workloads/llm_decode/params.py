"""LLM decode parameters: the Llama-3.1-8B architecture served from a static KV cache."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Literal

from kit.workloads.base import STRICT, check
from kit.workloads.llama_shape import LlamaShape

StepMode = Literal["fused", "graph", "compile", "eager"]
AllReduce = Literal["nccl", "one-shot"]


@dataclass
class LlmDecodeParams(LlamaShape):
    """Random bf16 weights of the Llama-3.1-8B shape; per batch size a prefill of `prompt_len`
    tokens, then `decode_steps` greedy decode steps from a static KV cache.

    tp: ranks per model (1: every rank serves its own copy, data parallel; 2: tensor parallel
    across pairs of ranks, an all-reduce after each layer's attention and MLP).
    step_mode: how the decode step runs on a GPU: "fused" (kit.workloads.llm_decode.fused: at
    batch 1 Triton kernels that carry each matmul's neighbours, five a layer; at larger batches
    its small kernels fused by torch.compile around cuBLAS's matmuls; captured as one CUDA graph
    per batch size), "graph" (its eager kernels captured the same way), "compile" (the
    whole step torch.compile'd, then captured), "eager"; the CPU always runs eager.
    all_reduce: how tensor parallel's all-reduces run in the batch-1 Triton step ("fused" on
    GPUs): "nccl", or "one-shot", torch's symmetric-memory one-shot all-reduce (each GPU reads the
    others' partial sums over the link, one kernel); it needs P2P, so a variant without P2P, and
    every other step, runs NCCL's, and the run's notes say so.
    trials: timed generations per batch size, after `warmup` untimed ones.
    fit_seq_len / fit_max_batch: the largest batch whose KV cache at this sequence length fits
    with the weights, searched up to fit_max_batch (GPU only).
    """

    __pydantic_config__ = STRICT
    # The parameters that change how long or how often a figure is measured, never the figure:
    # a known machine that differs from a run only in these measured the same workload
    # (kit.refs matches on every other parameter, one this list lacks included, and names these).
    # Untimed and timed generations per batch size: each figure is a median over them.
    SAME_FIGURE: ClassVar[frozenset[str]] = frozenset({"warmup", "trials"})

    rms_eps: float = 1e-5
    dtype: Literal["bf16", "fp32"] = "bf16"
    tp: int = 1
    batch_sizes: list[int] = field(default_factory=lambda: [1, 8, 32, 128])
    prompt_len: int = 512
    decode_steps: int = 128
    step_mode: StepMode = "graph"
    all_reduce: AllReduce = "nccl"
    warmup: int = 1
    trials: int = 3
    fit_seq_len: int = 8192
    fit_max_batch: int = 4096
    seed: int = 0

    def __post_init__(self) -> None:
        self.check_shape("prompt_len", "fit_seq_len", "fit_max_batch")
        check(((self.hidden_size // self.num_heads) % 2) == 0, "hidden_size", "an even head dim")
        check(self.tp in (1, 2, 4, 8), "tp", "1, 2, 4 or 8")
        check(self.all_reduce == "nccl" or self.tp > 1, "all_reduce", "nccl when tp is 1")
        check(self.num_kv_heads % self.tp == 0, "tp", "a divisor of num_kv_heads")
        check(self.intermediate_size % self.tp == 0, "tp", "a divisor of intermediate_size")
        check(self.vocab_size % self.tp == 0, "tp", "a divisor of vocab_size")
        check(
            len(self.batch_sizes) >= 1
            and len(set(self.batch_sizes)) == len(self.batch_sizes)
            and all(1 <= b <= 4096 for b in self.batch_sizes),
            "batch_sizes",
            "one or more distinct batch sizes from 1 to 4096",
        )
        check(2 <= self.decode_steps <= 10**5, "decode_steps", "from 2 to 100,000")
        check(
            self.prompt_len + self.decode_steps <= 10**6,
            "prompt_len",
            "at most 1,000,000 minus decode_steps (the cache holds both)",
        )
        check(0 <= self.warmup <= 100, "warmup", "from 0 to 100")
        check(1 <= self.trials <= 1000, "trials", "from 1 to 1,000")
        check(self.rope_theta > 0, "rope_theta", "greater than 0")
        check(self.rms_eps > 0, "rms_eps", "greater than 0")
