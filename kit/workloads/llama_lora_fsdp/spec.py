"""The Llama-3.1-8B LoRA FSDP training workload as the driver sees it."""

from kit.workloads.base import Phrase
from kit.workloads.llama_lora_fsdp.params import LlamaLoraFsdpParams
from kit.workloads.training_spec import PRECISION, training_spec

SPEC = training_spec(
    "llama_lora_fsdp",
    "Llama-3.1-8B LoRA FSDP",
    "Llama-3.1-8B shape, LoRA r8 all-linear, FSDP2, bf16, seq 4096, grad ckpt",
    LlamaLoraFsdpParams,
    (
        Phrase(("num_layers",), "{} layers"),
        Phrase(("hidden_size",), "{} wide"),
        Phrase(("seq_len",), "sequence {}"),
        Phrase(("micro_batch",), "micro batch {}"),
        Phrase(("lora_r",), "LoRA r{}"),
        PRECISION,
        Phrase(("gradient_checkpointing",), "gradient checkpointing", "no gradient checkpointing"),
        Phrase(("compile",), "torch.compile"),
    ),
)
