"""The LLM decode workload as the driver sees it: serving throughput against batch, latency and
the memory reads a batch-1 step makes."""

from kit.workloads.base import Beside, Phrase, RecordedEnergy, Silent, WorkloadSpec, metrics
from kit.workloads.llm_decode.params import LlmDecodeParams

METHOD = """\
<b>{{ a.label }}.</b> The Llama-3.1-8B architecture ({{ a.params.num_layers }} layers, hidden
{{ a.params.hidden_size }}, {{ a.params.num_heads }} heads, {{ a.params.num_kv_heads }} KV heads,
vocabulary {{ a.params.vocab_size }}) with random {{ a.params.dtype }} weights, served from a
static KV cache by a plain decoder written for this benchmark (kit/workloads/llm_decode/model.py):
per batch size ({{ a.params.batch_sizes|join(", ") }}) {{ a.params.warmup }} untimed and
{{ a.params.trials }} timed generations, each a prefill of {{ a.params.prompt_len }} random prompt
tokens per sequence and {{ a.params.decode_steps }} greedy decode steps. A benchmark's tp (its
parameters are listed below) says how many GPUs serve one model: tp 1, every GPU serves its own
copy (data parallel, no traffic between GPUs); tp 2 or more, each group of that many GPUs serves
one model, attention heads and MLP columns split as Megatron-LM splits them, two all-reduces per
layer per decode step and the logits all-gathered{% if a.params.all_reduce == "one-shot" %}
(at batch 1 on GPUs the all-reduces are torch's symmetric-memory one-shot kernel, each GPU reading
the others' partial sums over peer-to-peer, where peer-to-peer is on, and NCCL's where it is off:
the runs' notes say which ran){% endif %}. On a GPU the decode step is a CUDA graph per
batch size (step_mode fused: at batch 1 five Triton kernels a layer, each matmul with its neighbours
(RMSNorm, RoPE and the cache write, SiLU, the residual add) and one flash-decoding attention
over the written positions; at larger batches the small kernels fused by torch.compile, the
matmuls cuBLAS's;
graph: its eager kernels; compile: the whole step torch.compile'd, then captured),
replayed back to back with nothing
read back until the generation ends; CUDA events time the prefill and every step (the host
clock on the CPU), each step's time the slowest rank's. <b>Decode throughput</b> (the headline, at
the largest batch) = batch x steps x model copies over the median generation's decode time;
<b>time per output token</b> = a decode step's time (median and 90th percentile of every timed step);
<b>prefill throughput</b> = prompt tokens over the median prefill time. <b>Memory read at batch 1</b> =
the bytes one decode step must read on one GPU (its weights, the embedding's one row, and K and V
of every position already written, the mean over the steps) over the mean step time, against the
datasheet HBM bandwidth of the GPU (kit.shared.gpu_specs) and, where this bundle measured it, the
device-local copy traffic of the silicon section. <b>Largest batch that fits</b>: the largest batch
whose KV cache of {{ a.params.fit_seq_len }} positions and one decode step fit beside the weights
(doubling, then bisection, up to {{ a.params.fit_max_batch }}). <b>Tensor-parallel communication
at batch 1</b> (tp 2 or more): the batch-1 step captured and timed again the same way with its
all-reduces and the logits' all-gather left out, each rank computing its shard alone; the time per
output token less that step's is what the collectives cost a token as the step ran them (their own
time and any wait they expose), with peer-to-peer on or off. <b>Energy per output token</b> (GPU
only): NVML's total-energy counter of every GPU the runs drove, read after a synchronize at the
edges of a batch size's timed generations, over the tokens every model copy generated in them
(each generation's prefill included: an output token's cost with its share of its prompt); GPU
boards only, not the CPU, memory, fans or power supplies. vLLM and TensorRT-LLM are not run:
they cannot be installed on the machines this kit was developed on; the plain reference loop in
benchmarks/reference/ is the yardstick."""


SPEC = WorkloadSpec(
    kind="llm_decode",
    label="LLM decode",
    description="Llama-3.1-8B shape decode from a static KV cache: tokens/s against batch",
    params=LlmDecodeParams,
    headline="decode_tokens_per_s",
    # the batch-1 HBM share is batch-1 tokens/s times a constant (the bytes a step reads): a
    # verdict of its own would repeat that one's ratio (a buyer read it twice on page 1)
    secondary=("decode_tokens_per_s_b1",),
    page1=(
        Beside("tpot_median_ms", "time per token, batch 1", "tpot_p90_ms", "p90"),
        Beside("decode_tokens_per_s_b1", "tokens/s at batch 1"),
        Beside("hbm_share_b1", "batch-1 reads / datasheet HBM"),
        # the fit is searched at fit_seq_len tokens a sequence, not at the timed batches' length
        Beside("max_batch_fit", "largest batch that fits, {fit_seq_len:,} tokens each"),
    ),
    ran=(
        Phrase(("num_layers",), "{} layers"),
        Phrase(("hidden_size",), "{} wide"),
        Phrase(("dtype",)),
        Phrase(("batch_sizes",), "batch {}"),
        Phrase(("prompt_len",), "prompt {}"),
        Phrase(("decode_steps",), "{} decode steps"),
        Phrase(("tp",), "tp {}", recorded=True),
        Phrase(("step_mode",), "{} step", recorded=True),
    ),
    energy=RecordedEnergy(
        "j_per_token",
        "output token",
        "NVML's total-energy counter of every GPU the runs drove, over the output tokens of a "
        "batch size's timed generations, their prefill included",
        "at the largest batch timed",
        "j_per_token_b1",
        "at batch 1",
    ),
    silent=Silent(
        "tp",
        1,
        "tp 1 is data parallel: every GPU serves its own copy of the model and no data moves "
        "between GPUs, so peer-to-peer has nothing to carry and P2P on against off says nothing "
        "about the link (tensor-parallel runs, tp 2 or more, all-reduce every layer)",
    ),
    figures="decode",
    method=METHOD,
    metrics=metrics(
        "decode_tokens_per_s",
        "decode_tokens_per_s_b1",
        "prefill_tokens_per_s",
        "tpot_median_ms",
        "tpot_p90_ms",
        "tpot_local_ms_b1",
        "tp_comm_ms_b1",
        "max_batch_fit",
        "decode_read_gbps_b1",
        "hbm_share_b1",
        "j_per_token_b1",
        "j_per_token",
    ),
    smoke_model=True,
    window="the batch sweep (every batch size, its warm-up and CUDA-graph capture included)",
)
