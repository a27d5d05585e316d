"""Per-call host cost of torch's deprecated collective names against the new ones, one rank.

`python wrap_bench.py` on the CPU (gloo); `python wrap_bench.py cuda` on one GPU (NCCL), where it
also times one call as a caller sees it (synchronize, call, synchronize: host launch included).
A one-off instrument of this measurement folder."""

import os
import statistics
import sys
import time

import torch
import torch.distributed as dist

CUDA = sys.argv[1:] == ["cuda"]
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29577")
dist.init_process_group("nccl" if CUDA else "gloo", rank=0, world_size=1)
device = torch.device("cuda", 0) if CUDA else torch.device("cpu")
out, inp = torch.zeros(4, device=device), torch.ones(4, device=device)
sync = torch.cuda.synchronize if CUDA else (lambda: None)
print(torch.__version__, "CUDA" if CUDA else "CPU", "new names:",
      hasattr(dist, "all_gather_single"), hasattr(dist, "reduce_scatter_single"))  # fmt: skip
pairs = [("all_gather_into_tensor", "all_gather_single"), ("reduce_scatter_tensor", "reduce_scatter_single")]  # fmt: skip
N = 3000
for old, new in pairs:
    if not hasattr(dist, new):
        continue
    host = {old: [], new: []}
    one = {old: [], new: []}
    for _ in range(7):
        for name in (old, new):
            f = getattr(dist, name)
            sync()
            t = time.perf_counter()
            for _ in range(N):
                f(out, inp)
            host[name].append((time.perf_counter() - t) / N * 1e6)
            sync()
            if CUDA:
                calls = []
                for _ in range(300):
                    sync()
                    t = time.perf_counter()
                    f(out, inp)
                    sync()
                    calls.append((time.perf_counter() - t) * 1e6)
                one[name].append(statistics.median(calls))
    ho, hn = statistics.median(host[old]), statistics.median(host[new])
    print(f"{old}: {ho:.2f} us/call, {new}: {hn:.2f} us/call (host, {N} calls back to back), "
          f"difference {ho - hn:.2f} us ({ho / hn:.3f}x)")  # fmt: skip
    if CUDA:
        oo, on = statistics.median(one[old]), statistics.median(one[new])
        print(f"  one call, synchronized: {old} {oo:.2f} us, {new} {on:.2f} us, "
              f"difference {oo - on:.2f} us ({oo / on:.3f}x)")  # fmt: skip
dist.destroy_process_group()
