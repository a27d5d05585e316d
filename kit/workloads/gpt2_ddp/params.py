"""GPT-2 DDP parameters: the shape of the Hugging Face hardware guide's run_clm.py timing."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from kit.workloads.base import TrainingParams, check, check_sizes


@dataclass
class Gpt2DdpParams(TrainingParams):
    """GPT-2 (124M by default) from its config, random weights, DistributedDataParallel, AdamW.

    The shape the Hugging Face hardware guide timed with run_clm.py: 4 sequences of 1024 tokens
    per GPU, fp32 (torch's default matmul precision "highest": no TF32, as the HF Trainer runs).
    """

    n_layer: int = 12
    n_embd: int = 768
    n_head: int = 12
    vocab_size: int = 50257
    seq_len: int = 1024
    batch_per_gpu: int = 4
    precision: Literal["fp32", "bf16"] = "fp32"  # bf16 = autocast, weights stay fp32
    lr: float = 5e-5  # the HF Trainer's default
    max_grad_norm: float = 1.0  # the HF Trainer clips at 1.0; 0 turns clipping off
    warmup_steps: int = 5
    steps: int = 30
    min_window_s: float = 0.0  # the timed window lasts at least this long (steps permitting more)
    data_batches: int = 8
    seed: int = 0
    model_path: str = ""  # a LOCAL directory with config.json (and weights); "" = GPT2Config()
    data_path: str = ""  # a LOCAL torch file holding integer token ids; "" = synthetic

    def __post_init__(self) -> None:
        check_sizes(self, ("n_layer", "n_embd", "n_head", "vocab_size", "seq_len", "batch_per_gpu"))
        check(self.n_embd % self.n_head == 0, "n_embd", "a multiple of n_head")
        check(self.lr > 0, "lr", "greater than 0")
        check(self.max_grad_norm >= 0, "max_grad_norm", "0 (off) or more")
        self.check_loop()
