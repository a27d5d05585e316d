"""The Llama-3.1-8B LoRA FSDP training workload as the driver sees it."""

from kit.workloads.llama_lora_fsdp.params import LlamaLoraFsdpParams
from kit.workloads.training_spec import training_spec

SPEC = training_spec(
    "llama_lora_fsdp",
    "Llama-3.1-8B LoRA FSDP",
    "Llama-3.1-8B shape, LoRA r8 all-linear, FSDP2, bf16, seq 4096, grad ckpt",
    LlamaLoraFsdpParams,
)
