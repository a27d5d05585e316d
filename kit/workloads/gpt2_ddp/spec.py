"""The GPT-2 124M DDP training workload as the driver sees it."""

from kit.workloads.base import Phrase
from kit.workloads.gpt2_ddp.params import Gpt2DdpParams
from kit.workloads.training_spec import PRECISION, training_spec

SPEC = training_spec(
    "gpt2_ddp",
    "GPT-2 124M DDP",
    "GPT-2 124M, DDP, fp32, 4 x 1024 tokens per GPU",
    Gpt2DdpParams,
    (
        Phrase(("n_layer",), "{} layers"),
        Phrase(("n_embd",), "{} wide"),
        Phrase(("seq_len",), "sequence {}"),
        Phrase(("batch_per_gpu",), "batch {} per GPU"),
        PRECISION,
    ),
)
