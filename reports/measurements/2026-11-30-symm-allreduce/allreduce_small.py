"""One-off instrument (issue 47): the decode step's all-reduces at tensor parallel 2, timed alone.

At batch 1 a Llama-3.1-8B step makes 64 all-reduces of 4,096 bf16 values (8 KiB; two a layer over
32 layers). The kit's step (kit.workloads.llm_decode) replays them from one CUDA graph through
NCCL; call c20 put them at about 0.61 ms a token with P2P (about 9.5 us each). This times, per
call, inside a CUDA graph of 64 calls as the step has them:

- nccl: `dist.all_reduce`, what the kit does today;
- one-shot: torch's symmetric-memory `one_shot_all_reduce_out` (each GPU reads the other's buffer
  over the link; no multicast object, TORCH_SYMM_MEM_DISABLE_MULTICAST=1 as these machines need);
- two-shot: symmetric memory's `two_shot_all_reduce_` (reduce-scatter then all-gather), in place;

at batch 1, 8 and 128 (8 KiB, 64 KiB, 1 MiB). Every method's sum is checked before it is timed.
Symmetric memory moves data over P2P whatever NCCL_P2P_DISABLE says: under that variable only
NCCL is timed. Run by run.sh beside it, with torchrun --nproc-per-node 2.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
from collections.abc import Callable

import torch
import torch.distributed as dist

CALLS = 64  # a step's all-reduces at batch 1
REPLAYS = 100  # graph replays per timing
TIMINGS = 7  # timings per method and size; the median is reported
HIDDEN = 4096
BATCHES = (1, 8, 128)


def per_call_us(fn: Callable[[], None]) -> list[float]:
    """Microseconds per call: `fn` (CALLS calls) captured once as a CUDA graph, replayed."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    graph.replay()
    torch.cuda.synchronize()
    out = []
    for _ in range(TIMINGS):
        dist.barrier()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(REPLAYS):
            graph.replay()
        end.record()
        end.synchronize()
        out.append(start.elapsed_time(end) * 1000 / REPLAYS / CALLS)
    return out


def one_call(method: str, x: torch.Tensor, out: torch.Tensor, group_name: str) -> None:
    """One all-reduce of `x` by `method`; its sum lands in `out` (one-shot) or in `x`."""
    if method == "nccl":
        dist.all_reduce(x)
    elif method == "one-shot":
        torch.ops.symm_mem.one_shot_all_reduce_out(x, "sum", group_name, out)
    else:
        torch.ops.symm_mem.two_shot_all_reduce_(x, "sum", group_name)


def main() -> None:
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
    torch.cuda.set_device(device)
    p2p_off = os.environ.get("NCCL_P2P_DISABLE") == "1"
    # GROUP=new: the group a dist.new_group makes over the same ranks, as the kit's tensor-parallel
    # group is (kit.workloads.llm_decode.worker), instead of the default one
    group = dist.new_group(list(range(world))) if os.environ.get("GROUP") == "new" else None
    name = (group or dist.group.WORLD).group_name
    methods = ["nccl"]
    if not p2p_off:
        import torch.distributed._symmetric_memory as symm

        if hasattr(symm, "enable_symm_mem_for_group"):
            symm.enable_symm_mem_for_group(name)
        methods += ["one-shot", "two-shot"]
    expect = float(sum(r + 1 for r in range(world)))
    rows = []
    for batch in BATCHES:
        n = batch * HIDDEN
        for method in methods:
            error = None
            ok, times = False, []
            try:  # a method that fails (its op, its capture) is recorded, the others still run
                if method == "nccl":
                    x = torch.empty(n, device=device, dtype=torch.bfloat16)
                else:  # the input lives in symmetric memory, mapped by every rank
                    x = symm.empty(n, device=device, dtype=torch.bfloat16)
                    symm.rendezvous(x, name)
                out = torch.empty_like(x)
                result = out if method == "one-shot" else x
                # one call, checked: every element the sum of every rank's value (rank + 1)
                x.fill_(rank + 1)
                torch.cuda.synchronize()
                dist.barrier()
                one_call(method, x, out, name)
                torch.cuda.synchronize()
                ok = bool((result.float() == expect).all())

                def calls(method: str = method, x: torch.Tensor = x, o: torch.Tensor = out) -> None:
                    for _ in range(CALLS):
                        one_call(method, x, o, name)

                times = per_call_us(calls) if ok else []
            except Exception as exc:
                error = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
            row = {
                "rank": rank,
                "method": method,
                "batch": batch,
                "bytes": n * 2,
                "sum_ok": ok,
                "us_per_call_median": round(statistics.median(times), 3) if times else None,
                "us_per_call_all": [round(t, 3) for t in times],
                "p2p_disabled": p2p_off,
                "error": error,
            }
            rows.append(row)
            if rank == 0:
                print(json.dumps(row), flush=True)
    if rank == 0:
        meta = {
            "torch": torch.__version__,
            "nccl": ".".join(map(str, torch.cuda.nccl.version())),
            "gpu": torch.cuda.get_device_name(device),
            "world": world,
            "group": os.environ.get("GROUP", "world"),
            "calls_per_graph": CALLS,
            "replays": REPLAYS,
            "timings": TIMINGS,
        }
        with open(sys.argv[1], "w") as f:
            json.dump({"meta": meta, "rows": rows}, f, indent=1)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
