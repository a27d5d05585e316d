"""The reduce-scatter sweep as the driver sees it."""

from kit.workloads.base import Sweep
from kit.workloads.collective import collective_spec
from kit.workloads.reduce_scatter.params import ReduceScatterParams

SPEC = collective_spec(
    "reduce_scatter",
    "reduce-scatter",
    "NCCL/gloo reduce-scatter sweep, nccl-tests busbw (FSDP's gradient reduction)",
    ReduceScatterParams,
    Sweep(
        op="reduce-scatter",
        tool="reduce_scatter_perf",
        bus_factor="(n-1)/n",
        size="Size, as reduce_scatter_perf prints it: each rank's input; each rank receives "
        "its reduced size/n.",
        check="each rank contributes a known pattern times (rank + 1); elements of each "
        "rank's reduced chunk that differ from the exact sum are counted",
        placement="out-of-place",
        placement_why="reduce_scatter_single (reduce_scatter_tensor on a torch without it) "
        "reduces a separate input into the output: nccl-tests' out-of-place column",
    ),
)
