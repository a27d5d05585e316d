"""The all-reduce sweep as the driver sees it."""

from kit.workloads.allreduce.params import AllreduceParams
from kit.workloads.base import Sweep
from kit.workloads.collective import collective_spec

SPEC = collective_spec(
    "allreduce",
    "all-reduce",
    "NCCL/gloo all-reduce sweep, nccl-tests busbw",
    AllreduceParams,
    Sweep(
        op="all-reduce",
        tool="all_reduce_perf",
        bus_factor="2(n-1)/n",
        size="Size, as all_reduce_perf prints it: the buffer each rank contributes and gets back "
        "reduced (count elements per rank, not summed over the ranks).",
        check="each rank contributes a known pattern times (rank + 1); elements that differ "
        "from the exact sum are counted",
        placement="in-place",
        placement_why="torch's dist.all_reduce reduces its one buffer in place, so this is nccl-tests' "
        "in-place column; torch has no out-of-place all-reduce (its functional all_reduce copies "
        "the input, then reduces the copy in place), so the out-of-place column is not timed",
    ),
)
