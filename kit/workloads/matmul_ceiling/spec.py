"""The matmul-ceiling workload as the driver sees it (mamf-finder's search, every GPU)."""

from kit.workloads.base import Phrase, WorkloadSpec, metrics
from kit.workloads.matmul_ceiling.params import MatmulCeilingParams

DTYPES = ("bf16", "fp16", "tf32", "fp8", "fp32")

METHOD = """\
<b>{{ a.label }}.</b> The best sustained matmul rate per dtype, searched as mamf-finder searches:
every (m, n, k) of m {{ a.params.m_sizes|join("/") }} x n {{ a.params.n_sizes|join("/") }} x
k {{ a.params.k_sizes|join("/") }} is timed on the first GPU alone ({{ a.params.trials }} trials of
back-to-back matmuls filling {{ a.params.search_s }} s each, after {{ a.params.warmup }} warm-up
calls; a shape's figure is its median trial), and the best shape is then held for
{{ a.params.sustain_s }} s per trial on every GPU alone, one after another, and on all GPUs at once.
TFLOP/s = 2mnk x matmuls / seconds; CUDA events on a GPU. Operands are random normal; tf32 is
float32 with TF32 tensor cores allowed; fp8 is torch._scaled_mm on e4m3 with unit scales and
bf16 output, only where the GPU has fp8 tensor cores. The headline is the median GPU with all
GPUs running (what training gets); a GPU more than {{ a.params.outlier_pct }}% below the median GPU
is flagged. On the CPU: fp32 at small sizes, a smoke test of the method, not a ceiling."""


SPEC = WorkloadSpec(
    kind="matmul_ceiling",
    label="matmul ceiling",
    description="best sustained matmul TFLOP/s per dtype over a shape search, each GPU and all",
    params=MatmulCeilingParams,
    headline="tflops_bf16",
    secondary=("tflops_fp8", "tflops_tf32"),
    figures="ceiling",
    method=METHOD,
    ran=(Phrase(("dtypes",)),),
    metrics=metrics(*(f"tflops_{d}{x}" for d in DTYPES for x in ("", "_weakest", "_alone"))),
)
