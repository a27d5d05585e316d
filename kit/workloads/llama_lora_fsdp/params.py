"""Llama LoRA FSDP parameters: the shape of the forum post's NVLink result."""

from __future__ import annotations

from dataclasses import dataclass, field

from kit.workloads.base import TrainingParams, check
from kit.workloads.llama_shape import LlamaShape

LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


@dataclass
class LlamaLoraFsdpParams(LlamaShape, TrainingParams):
    """Llama-3.1-8B architecture, LoRA (peft) on all linear layers, FSDP2 per decoder layer, bf16.

    The shape of the forum post's NVLink result: sequence 4096, micro batch 1, gradient
    checkpointing, AdamW on the LoRA parameters.
    """

    max_position: int = 131072
    seq_len: int = 4096
    micro_batch: int = 1
    lora_r: int = 8
    lora_alpha: int = 16
    lora_dropout: float = 0.05
    lora_targets: list[str] = field(default_factory=lambda: list(LORA_TARGETS))
    gradient_checkpointing: bool = True  # non-reentrant, through transformers
    compile: bool = False  # torch.compile each decoder layer before sharding it
    reshard_after_forward: bool = True  # FSDP full shard: free gathered weights after forward
    lr: float = 1e-4
    warmup_steps: int = 3
    steps: int = 12
    min_window_s: float = 0.0  # the timed window lasts at least this long (steps permitting more)
    data_batches: int = 4
    seed: int = 0
    model_path: str = ""  # a LOCAL directory with config.json (and weights); "" = the shape above
    data_path: str = ""  # a LOCAL torch file holding integer token ids; "" = synthetic

    def __post_init__(self) -> None:
        self.check_shape("seq_len", "micro_batch", "lora_r")
        check(self.max_position >= self.seq_len, "max_position", "at least seq_len")
        check(0 <= self.lora_dropout < 1, "lora_dropout", "in [0, 1)")
        check(self.rope_theta > 0, "rope_theta", "greater than 0")
        check(self.lr > 0, "lr", "greater than 0")
        check(
            len(self.lora_targets) > 0 and set(self.lora_targets) <= set(LORA_TARGETS),
            "lora_targets",
            f"a non-empty list of {', '.join(LORA_TARGETS)}",
        )
        self.check_loop()
