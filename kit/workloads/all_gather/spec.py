"""The all-gather sweep as the driver sees it."""

from kit.workloads.all_gather.params import AllGatherParams
from kit.workloads.base import Sweep
from kit.workloads.collective import collective_spec

SPEC = collective_spec(
    "all_gather",
    "all-gather",
    "NCCL/gloo all-gather sweep, nccl-tests busbw (FSDP's weight gathering)",
    AllGatherParams,
    Sweep(
        op="all-gather",
        tool="all_gather_perf",
        bus_factor="(n-1)/n",
        size="Size, as all_gather_perf prints it: the gathered output; each rank sends size/n.",
        check="each rank sends a known pattern times (rank + 1); elements of the gathered "
        "output that differ from what their rank sent are counted",
        placement="out-of-place",
        placement_why="all_gather_single (all_gather_into_tensor on a torch without it) "
        "gathers a separate send buffer into the output: nccl-tests' out-of-place column",
    ),
)
