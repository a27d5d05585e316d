"""One message-size sweep for every collective, with nccl-tests' definitions (worker side).

A collective's worker module describes itself as a Collective (its bus factor, its layout of a
size into buffers, the torch.distributed call, and the exact answer its #wrong check expects)
and is `run = runner(ParamsClass, COLLECTIVE)`: the buffers, the check and the timing loop are
written once, here. For each size:
check the result first (wrong-element count, as nccl-tests' #wrong), then time `trials` batches
of `iters` back-to-back operations after `warmup_iters` untimed ones. On CUDA the default
method, spin-held (kit/workloads/collective_timing.py), queues each batch behind a GPU spin so
that the GPU never waits for the host, drops (on every rank) a batch whose queueing outlasted
the spin, and averages the time over ranks as nccl-tests does; `timing: graph` replays the batch
from a CUDA graph instead, its own mode (nccl-tests -G). On the CPU (gloo) the host clock is all
there is, and a trial's time is the slowest rank's. A one-call latency (an event after one call)
is recorded beside, never in place of, the batch's time per call.

    algbw = size / time        (decimal GB/s; `size` as nccl-tests prints it for the collective)
    busbw = algbw * bus factor (what each link must carry: 2(n-1)/n all-reduce, (n-1)/n others)
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import torch
import torch.distributed as dist

from kit.shared import hostmem
from kit.shared.metrics import record
from kit.worker.common import Context
from kit.worker.nccl_tuning import TuningLog
from kit.workloads.collective import CollectiveParams
from kit.workloads.collective_timing import EAGER_METHOD, capture, timed

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
Op = Callable[[], None]


@dataclass(frozen=True)
class Collective:
    """How one collective is laid out, run and checked.

    layout(nbytes, elsize, n) -> (elements per rank chunk, size in bytes as nccl-tests prints it)
    counts(chunk, n) -> (elements of a rank's input, of its output)
    call(output, input): the torch.distributed operation (in_place: one buffer, both)
    expected(ctx, base, chunk) -> the exact output when rank r's input is base x (r + 1)
    in_place: the operation reduces into its input, so the input is refilled between trials
    (a reduction grows its buffer every call); nccl-tests' in-place column
    also_in_place: an out-of-place collective whose in-place form torch also takes (all-gather,
    reduce-scatter): timed after it, as nccl-tests' second column
    """

    name: str
    bus_factor: Callable[[int], float]
    layout: Callable[[int, int, int], tuple[int, int]]
    counts: Callable[[int, int], tuple[int, int]]
    call: Callable[[torch.Tensor, torch.Tensor], Any]
    expected: Callable[[Context, torch.Tensor, int], torch.Tensor]
    in_place: bool = False
    also_in_place: bool = False  # out of place, and its in-place form is timed after it
    api: str = ""  # the torch.distributed function `call` makes, as the result records it

    @property
    def placement(self) -> str:
        """nccl-tests' column for what `prepare` times: all-reduce's one buffer is in place."""
        return "in-place" if self.in_place else "out-of-place"

    def _in_place_buffers(
        self, ctx: Context, chunk: int, buf: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(output, input) inside one buffer, as nccl-tests lays out an in-place split
        collective: the input is the rank's chunk of the output (all-gather), or the output
        the rank's chunk of the input (reduce-scatter)."""
        ins, outs = self.counts(chunk, ctx.world_size)
        mine = own_chunk(ctx, buf, chunk)
        return (buf, mine) if outs > ins else (mine, buf)

    def prepare_in_place(self, ctx: Context, chunk: int, dtype: torch.dtype) -> tuple[Op, Op]:
        """(op, refill) of the in-place form: one buffer, refilled between trials."""
        buf = torch.ones(max(self.counts(chunk, ctx.world_size)), dtype=dtype, device=ctx.device)
        out, inp = self._in_place_buffers(ctx, chunk, buf)
        return (lambda: self.call(out, inp)), (lambda: buf.fill_(1))

    def wrong_in_place(self, ctx: Context, chunk: int, dtype: torch.dtype) -> int:
        """The #wrong check of the in-place form: the same input pattern, in place."""
        ins, outs = self.counts(chunk, ctx.world_size)
        base = pattern(ins, dtype, ctx.device)
        buf = torch.zeros(max(ins, outs), dtype=dtype, device=ctx.device)
        out, inp = self._in_place_buffers(ctx, chunk, buf)
        inp.copy_(base * (ctx.rank + 1))
        self.call(out, inp)
        return mismatches(out, self.expected(ctx, base, chunk))

    def prepare(self, ctx: Context, chunk: int, dtype: torch.dtype) -> tuple[Op, Op]:
        """(op, refill): the operation on buffers allocated once, and what restores its input."""
        ins, outs = self.counts(chunk, ctx.world_size)
        send = torch.ones(ins, dtype=dtype, device=ctx.device)
        if self.in_place:
            return (lambda: self.call(send, send)), (lambda: send.fill_(1))
        recv = torch.empty(outs, dtype=dtype, device=ctx.device)
        return (lambda: self.call(recv, send)), (lambda: None)

    def wrong(self, ctx: Context, chunk: int, dtype: torch.dtype) -> int:
        """This rank's count of elements off the exact answer, for a known input pattern."""
        ins, outs = self.counts(chunk, ctx.world_size)
        base = pattern(ins, dtype, ctx.device)
        send = base * (ctx.rank + 1)
        recv = send if self.in_place else torch.zeros(outs, dtype=dtype, device=ctx.device)
        self.call(recv, send)
        return mismatches(recv, self.expected(ctx, base, chunk))


def split_collective(
    name: str,
    counts: Callable[[int, int], tuple[int, int]],
    call: Callable[[torch.Tensor, torch.Tensor], Any],
    expected: Callable[[Context, torch.Tensor, int], torch.Tensor],
    also_in_place: bool = False,
) -> Collective:
    """A collective over a buffer split into world-size chunks (all-gather, reduce-scatter,
    all-to-all): nccl-tests' bus factor (n-1)/n, and size/n whole elements per rank."""
    return Collective(
        name,
        ring_bus_factor,
        split_layout,
        counts,
        call,
        expected,
        also_in_place=also_in_place,
        api=getattr(call, "__name__", ""),
    )


def runner(params: type[CollectiveParams], coll: Collective) -> Callable[..., dict[str, Any]]:
    """A collective worker's `run(ctx, params)`: its parameters, then the sweep."""

    def run(ctx: Context, values: dict[str, Any]) -> dict[str, Any]:
        return sweep(ctx, params(**values), coll)

    return run


def own_chunk(ctx: Context, base: torch.Tensor, chunk: int) -> torch.Tensor:
    """This rank's chunk of a buffer split into world-size chunks."""
    return base[ctx.rank * chunk : (ctx.rank + 1) * chunk]


def ring_bus_factor(world_size: int) -> float:
    """nccl-tests' bus factor (n-1)/n of all-gather, reduce-scatter and all-to-all."""
    return (world_size - 1) / world_size


def split_layout(nbytes: int, elsize: int, n: int) -> tuple[int, int]:
    """(elements per rank's chunk, bytes in all): `nbytes` split into n whole-element chunks,
    at least one element each, as nccl-tests sizes the collectives that split a buffer."""
    chunk = max(1, nbytes // elsize // n)
    return chunk, chunk * n * elsize


def pattern(count: int, dtype: torch.dtype, device: Any, scale: float = 1.0) -> torch.Tensor:
    """1..7 repeated, times `scale`: small integers, exact in every dtype the sweep uses."""
    base = torch.arange(7, device=device, dtype=dtype) + 1
    return base.repeat(count // 7 + 1)[:count] * scale


def mismatches(got: torch.Tensor, expected: torch.Tensor) -> int:
    """Elements off the exact value: exact for float32, within 1% for 16-bit floats."""
    tol = 0.0 if got.dtype == torch.float32 else 1e-2
    return int(((got - expected).abs() > tol * expected.abs()).sum().item())


def _total(ctx: Context, local: int) -> int:
    t = torch.tensor([local], dtype=torch.int64, device=ctx.device)
    dist.all_reduce(t)
    return int(t.item())


MEMORY_PER_BYTE = 4
"""Device memory a size may take, per byte of its buffer: input, output and the check's reference
with room to spare (the sweep stops before a size that would not fit, as nccl-tests' -e is set to
what memory allows)."""


def host_available() -> int | None:
    """Bytes this container may still take: the host's MemAvailable, less where the cgroup's
    limit is nearer; None when neither can be read (not Linux)."""
    avail = hostmem.meminfo_bytes("MemAvailable")
    limit = hostmem.cgroup_int(hostmem.CGROUP / "memory.max")
    used = hostmem.cgroup_int(hostmem.CGROUP / "memory.current")
    if limit is not None and used is not None:
        avail = min(avail, limit - used) if avail is not None else limit - used
    return avail


def _room(ctx: Context, need: int) -> tuple[bool, int]:
    """(fits, bytes available on the rank with the least). On GPUs: free device memory plus
    what the caching allocator holds unused. On the CPU: the host's available memory (its
    cgroup limit when nearer) shared by the ranks on this host. The smallest over ranks."""
    if ctx.is_cuda:
        free, _ = torch.cuda.mem_get_info(ctx.device)
        cached = torch.cuda.memory_reserved(ctx.device) - torch.cuda.memory_allocated(ctx.device)
        room = free + cached
    else:
        avail = host_available()
        if avail is None:
            return True, 0
        local = int(os.environ.get("LOCAL_WORLD_SIZE", ctx.world_size) or 1)
        room = max(avail, 0) // max(local, 1)
    t = torch.tensor([room], dtype=torch.int64, device=ctx.device)
    dist.all_reduce(t, op=dist.ReduceOp.MIN)
    return int(t.item()) >= need, int(t.item())


def _one_graph(op: Op) -> None:
    """Capture one call into a graph that is thrown away: what NCCL picks under capture (it may
    register buffers then), for the sizes timed by graph replay. Called after `_capture`, whose
    eager calls on the side stream NCCL needs first."""
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph):
            op()
    except RuntimeError:  # _capture of the same call succeeded; if this one fails, no line
        pass
    torch.cuda.synchronize()
    del graph


def _tuning_log(ctx: Context, p: CollectiveParams) -> TuningLog:
    """The switch for NCCL's per-size choice: on for NCCL runs unless the params turn it off."""
    if not p.log_nccl_choice:
        return TuningLog(ctx.rank, False, "not logged: log_nccl_choice is false")
    if not ctx.is_cuda or ctx.backend != "nccl":
        return TuningLog(ctx.rank, False, f"not logged: {ctx.backend} is not NCCL")
    return TuningLog(ctx.rank, True)


def _choice(log: TuningLog, ctx: Context, op: Op, graph: Any) -> list[dict[str, Any]] | None:
    """NCCL's choice for this size, from one untimed call made as the timed ones are (graph
    capture or eager), before any trial."""

    def eager() -> None:
        op()
        ctx.synchronize()

    return log.choice((lambda: _one_graph(op)) if graph is not None else eager, eager)


def _within_budget(
    ctx: Context, p: CollectiveParams, op: Op
) -> tuple[CollectiveParams, dict[str, Any]]:
    """This size's parameters under size_budget_s, and what its row records of them: one call
    to connect (NCCL sets up a size's connections lazily), then one timed on the host after a
    synchronize, the slowest rank's, so that every rank takes the same counts."""
    if p.size_budget_s <= 0:
        return p, {}
    op()
    ctx.synchronize()
    dist.barrier()
    t0 = time.perf_counter()
    op()
    ctx.synchronize()
    took = torch.tensor([time.perf_counter() - t0], dtype=torch.float64, device=ctx.device)
    dist.all_reduce(took, op=dist.ReduceOp.MAX)
    call_s = float(took.item())
    ps = p.within_budget(call_s)
    return ps, {
        "calls": {"warmup": ps.warmup_iters, "iters": ps.iters, "first_call_s": call_s},
    }


def _graph_for(
    ctx: Context, p: CollectiveParams, op: Op, size: int, graphs_ok: bool
) -> tuple[Any, str, bool]:
    """(graph or None, timing method, whether graphs still work). `graph` captures every size
    (nccl-tests -G); `auto`, the method of bundles before spin-held timing, the sizes up to
    graph_max_bytes; a failed capture drops graphs for the rest of the sweep."""
    if not ctx.is_cuda:
        return None, "host-clock", graphs_ok
    method, graph = EAGER_METHOD[p.timing], None
    if graphs_ok and (p.timing == "graph" or (p.timing == "auto" and size <= p.graph_max_bytes)):
        try:
            graph = capture(op, p)
            method = "cuda-graph"
        except RuntimeError as exc:  # keep measuring; say why graphs were dropped
            ctx.notes.append(f"CUDA graph capture failed ({exc}); timed {EAGER_METHOD[p.timing]}")
            graphs_ok = False
    return graph, method, graphs_ok


def _in_place(
    ctx: Context, p: CollectiveParams, coll: Collective, chunk: int, size: int, graphs_ok: bool
) -> tuple[dict[str, Any], bool]:
    """The same size in place (nccl-tests' second column), after the timed placement, with its
    own buffer: checked and timed by the same rules."""
    dtype = DTYPES[p.dtype]
    wrong = _total(ctx, coll.wrong_in_place(ctx, chunk, dtype))
    op, refill = coll.prepare_in_place(ctx, chunk, dtype)
    graph, method, graphs_ok = _graph_for(ctx, p, op, size, graphs_ok)
    row = {"placement": "in-place", "wrong": wrong}
    row.update(timed(ctx, p, coll.bus_factor(ctx.world_size), (op, refill, size), graph, method))
    del graph
    return row, graphs_ok


def sweep(ctx: Context, p: CollectiveParams, coll: Collective) -> dict[str, Any]:
    """Check and time the collective at every size; the result's metrics and data. NCCL's log
    folder (in TMPDIR) is removed however the sweep ends (a full disk, a failed call)."""
    log = _tuning_log(ctx, p)
    try:
        return _sweep(ctx, p, coll, log)
    finally:
        log.close()


def _sweep(ctx: Context, p: CollectiveParams, coll: Collective, log: TuningLog) -> dict[str, Any]:
    dtype = DTYPES[p.dtype]
    elsize = torch.tensor([], dtype=dtype).element_size()
    factor = coll.bus_factor(ctx.world_size)
    rows = []
    graphs_ok = ctx.is_cuda and p.timing in ("auto", "graph")
    for nbytes in p.sizes():
        chunk, size = coll.layout(nbytes, elsize, ctx.world_size)
        fits, room = _room(ctx, MEMORY_PER_BYTE * size)
        if not fits and rows:
            where = (
                "device memory free on the fullest GPU"
                if ctx.is_cuda
                else ("host memory available per rank")
            )
            ctx.notes.append(
                f"sweep stopped before {size} B: {room / 2**30:.1f} GiB of {where}, about "
                f"{MEMORY_PER_BYTE}x the size needed; the largest size run is {rows[-1]['bytes']} B"
            )
            ctx.log(ctx.notes[-1])
            break
        wrong = _total(ctx, coll.wrong(ctx, chunk, dtype))
        op, refill = coll.prepare(ctx, chunk, dtype)
        ps, budget = _within_budget(ctx, p, op)  # this size's call counts
        graph, method, graphs_ok = _graph_for(ctx, ps, op, size, graphs_ok)
        nccl_calls = _choice(log, ctx, op, graph)
        mono_t0 = time.monotonic()
        got = timed(ctx, ps, coll.bus_factor(ctx.world_size), (op, refill, size), graph, method)
        window = [mono_t0, time.monotonic()]  # the trials, on telemetry's clock
        del graph, op, refill
        rows.append(
            {
                "bytes": size,
                "count": size // elsize,
                "chunk": chunk,
                "placement": coll.placement,
                "wrong": wrong,
                **got,
                "window_monotonic_s": window,
                **budget,
            }
        )
        times, algbw = [t / 1e6 for t in got["time_us"]], got["algbw_gbps"]
        if nccl_calls is not None:  # rank 0 with the log on: what NCCL printed (maybe nothing)
            rows[-1]["nccl_calls"] = nccl_calls
        also = ""
        if coll.also_in_place and p.time_in_place:
            rows[-1]["other"], graphs_ok = _in_place(ctx, ps, coll, chunk, size, graphs_ok)
            other = rows[-1]["other"]
            also = (
                f"; in place {statistics.median(other['time_us']):.1f} us, wrong {other['wrong']}"
            )
        ctx.log(
            f"{coll.name} {size:>12d} B  {statistics.median(times) * 1e6:10.1f} us  "
            f"busbw {statistics.median(algbw) * factor:8.2f} GB/s  wrong {wrong}  ({method}"
            f"{_dropped_words(got)}){also}"
        )
    medians = [statistics.median(r["busbw_gbps"]) for r in rows]
    metrics = {
        "busbw_peak": record("busbw_peak", max(medians)),
        "busbw_largest": record("busbw_largest", medians[-1]),
        "time_small_us": record("time_small_us", statistics.median(rows[0]["time_us"])),
        "wrong_total": record("wrong_total", sum(r["wrong"] for r in rows)),
    }
    if factor == 0:  # one rank: nothing crosses a link, and a "0 GB/s" reads as a dead one
        del metrics["busbw_peak"], metrics["busbw_largest"]
        ctx.notes.append(
            "one rank: no bus bandwidth (nccl-tests' bus factor is 0 at n = 1, and no data "
            "crosses a link); the times and the check are recorded"
        )
    data = {
        "params": asdict(p),
        "collective": coll.name,
        "call": f"torch.distributed.{coll.api}" if coll.api else None,
        "op": "sum",
        "dtype": p.dtype,
        "bus_factor": factor,
        "sizes": rows,
        "nccl_choice": _choice_note(log, coll, rows, ctx.world_size),
    }
    return {"metrics": metrics, "data": data}


def _dropped_words(timed: dict[str, Any]) -> str:
    """The log's words for spin-held trials dropped or kept unheld at one size."""
    if timed["timing"] != "spin-held":
        return ""
    return f", spin {max(timed['spin_us']):.0f} us, dropped {timed['dropped']}, unheld {timed['unheld']}"


def _choice_note(log: TuningLog, coll: Collective, rows: list[dict[str, Any]], world: int) -> str:
    """How the rows' `nccl_calls` were read, or why there are none, in the report's words."""
    if log.reason:
        return log.reason
    if not any(r.get("nccl_calls") for r in rows):
        if world == 1:  # seen on one H100, NCCL 2.28.9: the TUNING log names no algorithm
            return "not logged: on one rank NCCL copies locally and chooses no algorithm"
        if coll.name == "alltoall":
            return (
                "not logged by this NCCL: all-to-all runs as NCCL send/receive pairs, for "
                "which NCCL picks no collective algorithm"
            )
        return "not logged by this NCCL: its TUNING log named no algorithm for these calls"
    return (
        "NCCL_DEBUG_SUBSYS=TUNING, one untimed call per size before its trials (captured into "
        "a graph for the sizes timed by graph replay)"
    )
