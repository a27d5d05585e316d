"""The all-to-all sweep as the driver sees it."""

from kit.workloads.alltoall.params import AlltoallParams
from kit.workloads.base import Sweep
from kit.workloads.collective import collective_spec

SPEC = collective_spec(
    "alltoall",
    "all-to-all",
    "NCCL/gloo all-to-all sweep, nccl-tests busbw (mixture-of-experts token exchange)",
    AlltoallParams,
    Sweep(
        op="all-to-all",
        tool="alltoall_perf",
        bus_factor="(n-1)/n",
        size="Size, as alltoall_perf prints it: what each rank sends in all (and receives); "
        "size/n to each rank, itself included.",
        check="each rank sends a known pattern times (rank + 1); elements that differ from "
        "the chunk their sender meant for this rank are counted",
        placement="out-of-place",
        placement_why="all_to_all_single sends from one buffer and receives into another: nccl-tests' "
        "out-of-place column; its in-place column is not timed",
    ),
)
