"""Per-call host cost of torch 2.14's deprecated collective names against the new ones (gloo, 1 rank)."""

import os
import statistics
import time

import torch
import torch.distributed as dist

os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29577")
dist.init_process_group("gloo", rank=0, world_size=1)
out, inp = torch.zeros(4), torch.ones(4)
pairs = [
    ("all_gather_into_tensor", "all_gather_single"),
    ("reduce_scatter_tensor", "reduce_scatter_single"),
]
N = 3000
for old, new in pairs:
    res = {old: [], new: []}
    for _ in range(7):
        for name in (old, new):
            f = getattr(dist, name)
            t = time.perf_counter()
            for _ in range(N):
                f(out, inp)
            res[name].append((time.perf_counter() - t) / N * 1e6)
    mo, mn = statistics.median(res[old]), statistics.median(res[new])
    print(
        f"{torch.__version__} {old}: {mo:.2f} us/call, {new}: {mn:.2f} us/call, difference {mo - mn:.2f} us ({mo / mn:.3f}x)"
    )
dist.destroy_process_group()
