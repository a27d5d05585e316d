"""Parameters of every benchmark kind, as plain dataclasses.

Both halves read this module: the worker builds its run from it, and the driver validates a
recipe's `params:` against the same classes (through pydantic's TypeAdapter), so a default or a
limit is written once. Standard library only: it is imported inside the container.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

# Pydantic reads this attribute when it validates a plain dataclass: unknown keys are errors.
STRICT = {"extra": "forbid"}


def _check(ok: bool, field_name: str, allowed: str) -> None:
    if not ok:
        raise ValueError(f"{field_name}: must be {allowed}")


@dataclass
class AllreduceParams:
    """An all-reduce sweep with nccl-tests definitions (all_reduce_perf -b MIN -e MAX -f FACTOR)."""

    __pydantic_config__ = STRICT

    min_bytes: int = 8
    max_bytes: int = 1 << 30
    factor: int = 2
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    warmup_iters: int = 5
    iters: int = 20
    trials: int = 3
    # CUDA graphs remove the host's launch gaps for small messages, as nccl-tests' -G does; "auto"
    # uses them up to graph_max_bytes and times eager launches with CUDA events above that. On
    # 2x H200 (reports/examples/h200x2-allreduce-timing) graphs were faster up to 1 MiB (17.6 against
    # 20.3 us) and eager launches from 2 MiB (28.4 against 32.0 us): the threshold sits between.
    timing: Literal["auto", "events", "graph"] = "auto"
    graph_max_bytes: int = 1 << 20

    def __post_init__(self) -> None:
        _check(self.min_bytes >= 1, "min_bytes", "at least 1")
        _check(self.max_bytes >= self.min_bytes, "max_bytes", "at least min_bytes")
        _check(self.factor >= 2, "factor", "at least 2")
        _check(self.warmup_iters >= 0, "warmup_iters", "0 or more")
        _check(self.iters >= 1, "iters", "at least 1")
        _check(self.trials >= 1, "trials", "at least 1")

    def sizes(self) -> list[int]:
        """Message sizes in bytes: min_bytes, min_bytes*factor, ... up to max_bytes."""
        out, size = [], self.min_bytes
        while size <= self.max_bytes:
            out.append(size)
            size *= self.factor
        return out


# kind -> (params class, one-line description). Training kinds are added by their modules here.
KINDS: dict[str, tuple[type, str]] = {
    "allreduce": (AllreduceParams, "NCCL/gloo all-reduce sweep, nccl-tests busbw"),
}


# ---------------------------------------------------------------------------------------------
# Training workloads. Each runs `warmup_steps` untimed steps, then `steps` timed ones, on a small
# pool of `data_batches` batches made on the device (or cut from a local file, `data_path`).


def _check_steps(warmup_steps: int, steps: int, data_batches: int) -> None:
    _check(warmup_steps >= 0, "warmup_steps", "0 or more")
    _check(steps >= 2, "steps", "at least 2 (a loss that changes needs two steps)")
    _check(data_batches >= 1, "data_batches", "at least 1")


@dataclass
class Gpt2DdpParams:
    """GPT-2 (124M by default) from its config, random weights, DistributedDataParallel, AdamW.

    The shape the Hugging Face hardware guide timed with run_clm.py: 4 sequences of 1024 tokens
    per GPU, fp32 (torch's default matmul precision "highest": no TF32, as the HF Trainer runs).
    """

    __pydantic_config__ = STRICT

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
    data_batches: int = 8
    seed: int = 0
    model_path: str = ""  # a LOCAL directory with config.json (and weights); "" = GPT2Config()
    data_path: str = ""  # a LOCAL torch file holding integer token ids; "" = synthetic

    def __post_init__(self) -> None:
        for name in ("n_layer", "n_embd", "n_head", "vocab_size", "seq_len", "batch_per_gpu"):
            _check(getattr(self, name) >= 1, name, "at least 1")
        _check(self.n_embd % self.n_head == 0, "n_embd", "a multiple of n_head")
        _check(self.lr > 0, "lr", "greater than 0")
        _check(self.max_grad_norm >= 0, "max_grad_norm", "0 (off) or more")
        _check_steps(self.warmup_steps, self.steps, self.data_batches)


LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


@dataclass
class LlamaLoraFsdpParams:
    """Llama-3.1-8B architecture, LoRA (peft) on all linear layers, FSDP2 per decoder layer, bf16.

    The shape of the forum post's NVLink result: sequence 4096, micro batch 1, gradient
    checkpointing, AdamW on the LoRA parameters.
    """

    __pydantic_config__ = STRICT

    vocab_size: int = 128256
    hidden_size: int = 4096
    intermediate_size: int = 14336
    num_layers: int = 32
    num_heads: int = 32
    num_kv_heads: int = 8
    rope_theta: float = 500000.0
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
    data_batches: int = 4
    seed: int = 0
    model_path: str = ""  # a LOCAL directory with config.json (and weights); "" = the shape above
    data_path: str = ""  # a LOCAL torch file holding integer token ids; "" = synthetic

    def __post_init__(self) -> None:
        for name in ("vocab_size", "hidden_size", "intermediate_size", "num_layers", "num_heads",
                     "num_kv_heads", "seq_len", "micro_batch", "lora_r"):  # fmt: skip
            _check(getattr(self, name) >= 1, name, "at least 1")
        _check(self.hidden_size % self.num_heads == 0, "hidden_size", "a multiple of num_heads")
        _check(self.num_heads % self.num_kv_heads == 0, "num_kv_heads", "a divisor of num_heads")
        _check(self.max_position >= self.seq_len, "max_position", "at least seq_len")
        _check(0 <= self.lora_dropout < 1, "lora_dropout", "in [0, 1)")
        _check(self.rope_theta > 0, "rope_theta", "greater than 0")
        _check(self.lr > 0, "lr", "greater than 0")
        _check(
            len(self.lora_targets) > 0 and set(self.lora_targets) <= set(LORA_TARGETS),
            "lora_targets",
            f"a non-empty list of {', '.join(LORA_TARGETS)}",
        )
        _check_steps(self.warmup_steps, self.steps, self.data_batches)


@dataclass
class ResnetDdpParams:
    """A torchvision ResNet with random weights, DistributedDataParallel, SGD with momentum."""

    __pydantic_config__ = STRICT

    arch: Literal[
        "resnet18", "resnet34", "resnet50", "resnet101", "resnet152", "wide_resnet50_2"
    ] = "resnet50"
    image_size: int = 224
    num_classes: int = 1000
    batch_per_gpu: int = 256
    precision: Literal["bf16", "fp32"] = "bf16"  # bf16 = autocast, weights stay fp32
    channels_last: bool = True
    lr: float = 0.1
    momentum: float = 0.9
    weight_decay: float = 1e-4
    warmup_steps: int = 5
    steps: int = 30
    data_batches: int = 2
    seed: int = 0

    def __post_init__(self) -> None:
        _check(self.image_size >= 32, "image_size", "at least 32")
        _check(self.num_classes >= 2, "num_classes", "at least 2")
        _check(self.batch_per_gpu >= 2, "batch_per_gpu", "at least 2 (batch norm needs two)")
        _check(self.lr > 0, "lr", "greater than 0")
        _check(0 <= self.momentum < 1, "momentum", "in [0, 1)")
        _check(self.weight_decay >= 0, "weight_decay", "0 or more")
        _check_steps(self.warmup_steps, self.steps, self.data_batches)


KINDS.update(
    {
        "gpt2_ddp": (Gpt2DdpParams, "GPT-2 124M, DDP, fp32, 4 x 1024 tokens per GPU"),
        "llama_lora_fsdp": (
            LlamaLoraFsdpParams,
            "Llama-3.1-8B shape, LoRA r8 all-linear, FSDP2, bf16, seq 4096, grad ckpt",
        ),
        "resnet_ddp": (ResnetDdpParams, "torchvision ResNet, DDP, bf16 autocast, channels_last"),
    }
)
