"""All-reduce sweep with nccl-tests' definitions, through torch.distributed.

For each message size: check the result first (wrong-element count, as nccl-tests' #wrong), then
time `iters` back-to-back all-reduces per trial after `warmup_iters` untimed ones. On CUDA the
time is read on the device with CUDA events; small messages are captured into a CUDA graph and
replayed, which removes the launch gaps a host-driven loop leaves between them (nccl-tests' -G).
On the CPU (gloo) the host clock is all there is. The reported time of a trial is the slowest
rank's: a collective is done when its last rank is.

    algbw = bytes / time            (decimal GB/s)
    busbw = algbw * 2 * (n - 1) / n (the bandwidth each link must carry in a ring)
"""

from __future__ import annotations

import statistics
import time
from dataclasses import asdict
from typing import Any

import torch
import torch.distributed as dist

from kit.worker.common import Context, metric
from kit.worker.params import AllreduceParams

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def bus_factor(world_size: int) -> float:
    """nccl-tests' all-reduce bus bandwidth factor 2(n-1)/n."""
    return 2.0 * (world_size - 1) / world_size


def count_wrong(ctx: Context, count: int, dtype: torch.dtype) -> int:
    """All-reduce a known pattern and count elements that differ from the exact sum."""
    n = ctx.world_size
    pattern = (torch.arange(7, device=ctx.device, dtype=dtype) + 1).repeat(count // 7 + 1)[:count]
    buf = pattern * (ctx.rank + 1)
    dist.all_reduce(buf)
    expected = pattern * (n * (n + 1) // 2)
    exact = dtype == torch.float32
    tol = 0.0 if exact else 1e-2
    wrong = ((buf - expected).abs() > tol * expected.abs()).sum()
    total = torch.tensor([int(wrong.item())], dtype=torch.int64, device=ctx.device)
    dist.all_reduce(total)
    return int(total.item())


def _slowest(ctx: Context, seconds: float) -> float:
    t = torch.tensor([seconds], dtype=torch.float64, device=ctx.device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t.item())


def _time_host(ctx: Context, buf: torch.Tensor, p: AllreduceParams) -> float:
    for _ in range(p.warmup_iters):
        dist.all_reduce(buf)
    ctx.synchronize()
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(p.iters):
        dist.all_reduce(buf)
    ctx.synchronize()
    return (time.perf_counter() - t0) / p.iters


def _time_events(ctx: Context, buf: torch.Tensor, p: AllreduceParams) -> float:
    for _ in range(p.warmup_iters):
        dist.all_reduce(buf)
    torch.cuda.synchronize()
    dist.barrier()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(p.iters):
        dist.all_reduce(buf)
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3 / p.iters


def _capture(buf: torch.Tensor, p: AllreduceParams) -> torch.cuda.CUDAGraph:
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):  # NCCL needs a few eager calls on the capture stream before capture
            dist.all_reduce(buf)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(p.iters):
            dist.all_reduce(buf)
    torch.cuda.synchronize()
    return graph


def _time_graph(graph: torch.cuda.CUDAGraph, p: AllreduceParams) -> float:
    for _ in range(max(1, p.warmup_iters // p.iters)):
        graph.replay()
    torch.cuda.synchronize()
    dist.barrier()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    graph.replay()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3 / p.iters


def run(ctx: Context, params: dict[str, Any]) -> dict[str, Any]:
    p = AllreduceParams(**params)
    dtype = DTYPES[p.dtype]
    elsize = torch.tensor([], dtype=dtype).element_size()
    factor = bus_factor(ctx.world_size)
    rows = []
    graphs_ok = ctx.is_cuda and p.timing in ("auto", "graph")
    for nbytes in p.sizes():
        count = max(1, nbytes // elsize)
        size = count * elsize
        wrong = count_wrong(ctx, count, dtype)
        buf = torch.ones(count, dtype=dtype, device=ctx.device)
        method = "host-clock"
        graph = None
        if graphs_ok and (p.timing == "graph" or size <= p.graph_max_bytes):
            try:
                graph = _capture(buf, p)
                method = "cuda-graph"
            except RuntimeError as exc:  # keep measuring; say why graphs were dropped
                ctx.notes.append(f"CUDA graph capture failed ({exc}); timed with CUDA events")
                graphs_ok = False
        if graph is None and ctx.is_cuda:
            method = "cuda-events"
        times, mono_t0 = [], time.monotonic()
        for _ in range(p.trials):
            buf.fill_(1)  # values double every call; refilled so they stay finite
            if graph is not None:
                seconds = _time_graph(graph, p)
            elif ctx.is_cuda:
                seconds = _time_events(ctx, buf, p)
            else:
                seconds = _time_host(ctx, buf, p)
            times.append(_slowest(ctx, seconds))
        del graph
        algbw = [size / t / 1e9 for t in times]
        rows.append(
            {
                "bytes": size,
                "count": count,
                "time_us": [t * 1e6 for t in times],
                "algbw_gbps": algbw,
                "busbw_gbps": [a * factor for a in algbw],
                "wrong": wrong,
                "timing": method,
                "window_monotonic_s": [mono_t0, time.monotonic()],  # the trials, telemetry's clock
            }
        )
        ctx.log(
            f"{size:>12d} B  {statistics.median(times) * 1e6:10.1f} us  "
            f"busbw {statistics.median(algbw) * factor:8.2f} GB/s  wrong {wrong}  ({method})"
        )
    medians = [statistics.median(r["busbw_gbps"]) for r in rows]
    metrics = {
        "busbw_peak": metric(max(medians), "GB/s"),
        "busbw_largest": metric(medians[-1], "GB/s"),
        "time_small_us": metric(
            statistics.median(rows[0]["time_us"]), "us", higher_is_better=False
        ),
        "wrong_total": metric(sum(r["wrong"] for r in rows), "elements", higher_is_better=False),
    }
    data = {
        "params": asdict(p),
        "op": "sum",
        "dtype": p.dtype,
        "bus_factor": factor,
        "sizes": rows,
    }
    return {"metrics": metrics, "data": data}
