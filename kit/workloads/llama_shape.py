"""The Llama-3.1-8B architecture, written once: the shape the LoRA FSDP training workload and
the decode workload both default to, and the checks every Llama shape must pass."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kit.workloads.base import check, check_sizes

# the shape's sizes, each at least 1 (a params class checks them first, in this order)
SHAPE_SIZES = (
    "vocab_size",
    "hidden_size",
    "intermediate_size",
    "num_layers",
    "num_heads",
    "num_kv_heads",
)

TRANSFORMERS_NAMES = {
    "num_layers": "num_hidden_layers",
    "hidden_size": "hidden_size",
    "intermediate_size": "intermediate_size",
    "num_heads": "num_attention_heads",
    "num_kv_heads": "num_key_value_heads",
    "vocab_size": "vocab_size",
}
"""The shape's sizes under the names transformers' LlamaConfig gives them: one table for a
config made from the shape and for the shape read back from a config (a training result's
`config` fact records the sizes in this order)."""


@dataclass
class LlamaShape:
    """Llama-3.1-8B: 32 layers of hidden size 4096, grouped-query attention of 32 heads over 8
    key/value heads, SwiGLU MLP of 14336, a 128256-token vocabulary, RoPE base 500000."""

    vocab_size: int = 128256
    hidden_size: int = 4096
    intermediate_size: int = 14336
    num_layers: int = 32
    num_heads: int = 32
    num_kv_heads: int = 8
    rope_theta: float = 500000.0

    def transformers_config(self) -> dict[str, Any]:
        """The shape as keyword arguments of transformers' LlamaConfig."""
        sizes = {theirs: getattr(self, ours) for ours, theirs in TRANSFORMERS_NAMES.items()}
        return {**sizes, "rope_theta": self.rope_theta}

    def check_shape(self, *more_sizes: str) -> None:
        """The shape's sizes, then a params class's own (`more_sizes`), each at least 1; then the
        heads: they split the hidden size evenly, key/value heads the query heads."""
        check_sizes(self, (*SHAPE_SIZES, *more_sizes))
        check(self.hidden_size % self.num_heads == 0, "hidden_size", "a multiple of num_heads")
        check(self.num_heads % self.num_kv_heads == 0, "num_kv_heads", "a divisor of num_heads")
