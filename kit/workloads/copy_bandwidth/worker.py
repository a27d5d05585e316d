"""Copy bandwidth measured as NVIDIA's nvbandwidth measures it (worker side).

One process drives every GPU of the node, as nvbandwidth does: rank 0 measures while the other
ranks wait on a host-side (gloo) barrier, so no NCCL kernel occupies a GPU being measured.

A sample (nvbandwidth's MemcpyOperation): the measured stream is held by a spin kernel
(torch.cuda._sleep, nvbandwidth's blocking kernel) while 4 warm-up copies, a start event,
`loop_count` copies and an end event are queued, so the queueing time stays out of the window;
then

    bandwidth = copied bytes x loop_count / (end - start)      (decimal GB/s, per direction)

and the reported figure is the median of `samples` samples. Copy-engine (CE) copies are
cudaMemcpyAsync (torch's copy_ of contiguous same-type tensors); host memory is pinned. An SM copy
is a copy kernel on the source GPU writing into the peer's memory (torch's copy of a negated view,
which cannot be a memcpy, so torch runs its copy kernel; the sign is checked). Both ways: the two
directions run on their own streams at once and their bandwidths are added (nvbandwidth's "Total").
Device-local copy counts the bytes copied once, as nvbandwidth's device_local_copy does; the
memory moves twice that (read and write). On the CPU the analogue is a host memory copy timed
with the host clock.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict
from typing import Any

import torch
import torch.distributed as dist

from kit.shared.metrics import record
from kit.worker.common import Context
from kit.workloads.copy_bandwidth import matrix
from kit.workloads.copy_bandwidth.params import CopyBandwidthParams
from kit.workloads.timing import elapsed

MIB = 1 << 20
WARMUP_COPIES = 4  # nvbandwidth's WARMUP_COUNT: queued behind the spin, before the start event
SPIN_CYCLES_MIN = 2_000_000  # about 1 ms at 2 GHz: longer than queueing a sample's first copies
SPIN_CYCLES_PER_OP = 100_000  # about 50 us of spin per queued operation (a cross-device
# copy queues two event fences besides the copy)


def _spin(ops: int) -> None:
    torch.cuda._sleep(max(SPIN_CYCLES_MIN, ops * SPIN_CYCLES_PER_OP))


@contextlib.contextmanager
def _on(*streams: torch.cuda.Stream) -> Iterator[None]:
    """Make each stream current on its own device (torch queues a cross-device copy on the
    source's current stream and fences it against the destination's current stream)."""
    with contextlib.ExitStack() as stack:
        for s in streams:
            stack.enter_context(torch.cuda.stream(s))
        yield


class Gpus:
    """The node's GPUs as nvbandwidth drives them: per device a measured stream and an idle one
    (the idle one is current on a copy's other end, so torch's fences never wait on a blocked
    stream)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.busy = [torch.cuda.Stream(device=d) for d in range(n)]
        self.idle = [torch.cuda.Stream(device=d) for d in range(n)]

    def _queue(self, dev: int) -> contextlib.ExitStack:
        """Queue on `dev`'s measured stream, every other GPU's idle stream current."""
        stack = contextlib.ExitStack()
        stack.enter_context(torch.cuda.device(dev))
        stack.enter_context(_on(*(self.idle[d] for d in range(self.n) if d != dev), self.busy[dev]))
        return stack

    def sample(self, lanes: list[tuple[int, Callable[[], None], int]], loop: int) -> list[float]:
        """One sample of simultaneous lanes (device, one copy, bytes): GB/s per lane."""
        first = lanes[0][0]
        starts = [torch.cuda.Event(enable_timing=True) for _ in lanes]
        ends = [torch.cuda.Event(enable_timing=True) for _ in lanes]
        for dev in dict.fromkeys(d for d, _, _ in lanes):
            with torch.cuda.device(dev), torch.cuda.stream(self.busy[dev]):
                _spin((loop + WARMUP_COPIES) * len(lanes))
        for dev, op, _ in lanes:
            with self._queue(dev):
                for _ in range(WARMUP_COPIES):
                    op()
        starts[0].record(self.busy[first])
        for i, (dev, _, _) in enumerate(lanes[1:], start=1):
            self.busy[dev].wait_event(starts[0])
            starts[i].record(self.busy[dev])
        for i, (dev, op, _) in enumerate(lanes):
            with self._queue(dev):
                for _ in range(loop):
                    op()
            ends[i].record(self.busy[dev])
        for e in ends:
            e.synchronize()
        return [
            b * loop / (s.elapsed_time(e) / 1e3) / 1e9
            for s, e, (_, _, b) in zip(starts, ends, lanes, strict=True)
        ]

    def median(
        self, lanes: list[tuple[int, Callable[[], None], int]], loop: int, samples: int
    ) -> tuple[list[float], list[list[float]]]:
        """Medians per lane over `samples` samples, and every sample."""
        runs = [self.sample(lanes, loop) for _ in range(samples)]
        return [statistics.median(col) for col in zip(*runs, strict=True)], runs


def plateau_loop(mib: int, loop_count: int) -> int:
    """Copies per sample below the full size: about 1 GiB a sample, 4 to 1024 copies."""
    return max(4, min(1024, 1024 // mib, loop_count * 64))


def _pattern(nbytes: int, device: Any, pin: bool = False) -> torch.Tensor:
    """Small integers as float32 (exact when negated): a copy that lost bytes shows."""
    t = torch.empty(nbytes // 4, dtype=torch.float32, device=device, pin_memory=pin)
    t.copy_((torch.arange(t.numel(), dtype=torch.int32) % 251).to(torch.float32))
    return t


def _wrong(got: torch.Tensor, want: torch.Tensor) -> int:
    """Elements that differ, compared on a GPU where either tensor is on one."""
    where = got.device if got.is_cuda else want.device
    return int((got.to(where) != want.to(where)).sum().item())


def _pin_affinity(dev: int, notes: list[str]) -> None:
    """Run on the CPUs near the GPU before touching host memory (nvbandwidth does the same)."""
    try:
        import pynvml

        pynvml.nvmlInit()
        # by PCI address: NVML counts every GPU, CUDA only the visible ones
        prop = torch.cuda.get_device_properties(dev)
        bus = f"{prop.pci_domain_id:08x}:{prop.pci_bus_id:02x}:{prop.pci_device_id:02x}.0"
        pynvml.nvmlDeviceSetCpuAffinity(pynvml.nvmlDeviceGetHandleByPciBusId(bus.encode()))
    except Exception as exc:  # affinity is an optimization: say it was skipped
        note = f"CPU affinity to the GPU's NUMA node not set ({type(exc).__name__})"
        if note not in notes:
            notes.append(note)


def _host_link(
    g: Gpus, dev: int, mib: int, loop: int, samples: int, notes: list[str]
) -> dict[str, Any]:
    """Host-to-device and device-to-host (CE, pinned) on one GPU, and its device-local copy."""
    nbytes = mib * MIB
    if hasattr(torch._C, "_host_emptyCache"):  # pinned blocks cached for another GPU's NUMA node
        torch._C._host_emptyCache()
    _pin_affinity(dev, notes)
    host = _pattern(nbytes, "cpu", pin=True)
    back = torch.empty(host.numel(), dtype=host.dtype, pin_memory=True)
    a = torch.empty(nbytes // 4, dtype=torch.float32, device=dev)
    b = torch.empty_like(a)
    h2d, h2d_runs = g.median(
        [(dev, lambda: a.copy_(host, non_blocking=True), nbytes)], loop, samples
    )
    d2h, d2h_runs = g.median(
        [(dev, lambda: back.copy_(a, non_blocking=True), nbytes)], loop, samples
    )
    local, local_runs = g.median(
        [(dev, lambda: b.copy_(a, non_blocking=True), nbytes)], loop, samples
    )
    torch.cuda.synchronize(dev)
    wrong = _wrong(a, host) + _wrong(back, host) + _wrong(b, host)
    return {
        "device": dev,
        "mib": mib,
        "h2d_gbps": h2d[0],
        "d2h_gbps": d2h[0],
        "local_gbps": local[0],
        "samples": {
            "h2d": [r[0] for r in h2d_runs],
            "d2h": [r[0] for r in d2h_runs],
            "local": [r[0] for r in local_runs],
        },
        "wrong": wrong,
    }


def _sm_copy(dst: torch.Tensor, src: torch.Tensor) -> Callable[[], None]:
    neg = torch._neg_view(src)
    return lambda: dst.copy_(neg)


class PairRig:
    """Buffers for every GPU and the measurements of one pair, as matrix.one_way/both_ways call."""

    def __init__(self, g: Gpus, p: CopyBandwidthParams) -> None:
        self.g, self.p = g, p
        self.nbytes = p.pair_size_mib * MIB
        self.src = [_pattern(self.nbytes, d) for d in range(g.n)]
        self.dst = [torch.empty_like(s) for s in self.src]
        self.wrong = 0
        self.samples: dict[str, dict[str, list[float]]] = {}

    def _lanes(self, pairs: list[tuple[int, int]], sm: bool) -> list[tuple[int, Callable, int]]:
        lanes = []
        for s, d in pairs:
            dst, src = self.dst[d], self.src[s]
            op = _sm_copy(dst, src) if sm else (lambda dst=dst, src=src: dst.copy_(src))
            lanes.append((s, op, self.nbytes))
        return lanes

    def _check(self, pairs: list[tuple[int, int]], sm: bool) -> None:
        for s, d in pairs:
            torch.cuda.synchronize(d)
            want = -self.src[s] if sm else self.src[s]
            self.wrong += _wrong(self.dst[d], want)

    def measure(self, name: str, pairs: list[tuple[int, int]], sm: bool) -> float:
        medians, runs = self.g.median(
            self._lanes(pairs, sm), self.p.pair_loop_count, self.p.pair_samples
        )
        self._check(pairs, sm)
        key = "->".join(str(i) for i in pairs[0]) + ("" if len(pairs) == 1 else " both")
        self.samples.setdefault(name, {})[key] = [sum(r) for r in runs]
        return sum(medians)

    def latency_us(self, s: int, d: int) -> float:
        """Median time of one 4-byte copy s -> d over back-to-back copies (CE)."""
        src, dst = self.src[s][:1], self.dst[d][:1]
        count = self.p.latency_copies
        gbps, _ = self.g.median([(s, lambda: dst.copy_(src), 4)], count, self.p.pair_samples)
        return 4 / (gbps[0] * 1e9) * 1e6

    def staged(self, s: int, d: int, chunk_mib: int = 4) -> float:
        """s -> pinned host -> d in chunks, double-buffered (the path a P2P-off copy takes)."""
        nbytes = self.p.staged_size_mib * MIB
        chunk = min(chunk_mib * MIB, nbytes) // 4
        src, dst = self.src[s][: nbytes // 4], self.dst[d][: nbytes // 4]
        bufs = [torch.empty(chunk, dtype=torch.float32, pin_memory=True) for _ in range(2)]
        up, down = self.g.idle[s], self.g.idle[d]
        freed: list[torch.cuda.Event | None] = [None, None]  # a buffer's last upload done

        def once() -> None:
            for k, start in enumerate(range(0, src.numel(), chunk)):
                buf = bufs[k % 2][: min(chunk, src.numel() - start)]
                if (done := freed[k % 2]) is not None:
                    up.wait_event(done)
                with torch.cuda.stream(up):
                    buf.copy_(src[start : start + buf.numel()], non_blocking=True)
                    landed = torch.cuda.Event()
                    landed.record(up)
                down.wait_event(landed)
                with torch.cuda.stream(down):
                    dst[start : start + buf.numel()].copy_(buf, non_blocking=True)
                    freed[k % 2] = done = torch.cuda.Event()
                    done.record(down)

        once()  # warm-up, and the data to check
        torch.cuda.synchronize(d)
        self.wrong += _wrong(dst, src)
        rates = []
        for _ in range(self.p.pair_samples):
            torch.cuda.synchronize(s)
            t0 = time.perf_counter()
            for _ in range(self.p.pair_loop_count):
                once()
            torch.cuda.synchronize(d)
            rates.append(nbytes * self.p.pair_loop_count / (time.perf_counter() - t0) / 1e9)
        self.samples.setdefault("staged", {})[f"{s}->{d}"] = rates
        return statistics.median(rates)


def measure_pairs(g: Gpus, p: CopyBandwidthParams, ctx: Context) -> dict[str, Any]:
    """Every pair matrix nvbandwidth prints, for any number of GPUs (nothing below two)."""
    n = g.n
    peer = [
        [a != b and torch.cuda.can_device_access_peer(a, b) for b in range(n)] for a in range(n)
    ]
    rig = PairRig(g, p)
    tests: dict[str, matrix.PairTest] = {
        "ce_one_way": matrix.PairTest(
            "one", lambda a, b: rig.measure("ce_one_way", [(a, b)], False)
        ),
        "ce_both_ways": matrix.PairTest(
            "both", lambda a, b: rig.measure("ce_both_ways", [(a, b), (b, a)], False)
        ),
        "sm_one_way": matrix.PairTest(
            "one", lambda a, b: rig.measure("sm_one_way", [(a, b)], True)
        ),
        "sm_both_ways": matrix.PairTest(
            "both", lambda a, b: rig.measure("sm_both_ways", [(a, b), (b, a)], True)
        ),
        "latency_us": matrix.PairTest("one", rig.latency_us),
    }
    if p.staged:
        tests["staged_one_way"] = matrix.PairTest("one", rig.staged, needs_peer=False)
    out = matrix.measure_all(n, peer, tests, ctx.notes, ctx.log)
    for key, m in out.items():
        if m is not None:
            ctx.log("\n" + matrix.render(matrix.TITLES[key], m))
    return {"peer_access": peer, **out, "samples": rig.samples, "wrong": rig.wrong}


def _measure_cuda(ctx: Context, p: CopyBandwidthParams, n: int) -> dict[str, Any]:
    g = Gpus(n)
    per_gpu = []
    for dev in range(n):
        row = _host_link(g, dev, p.size_mib, p.loop_count, p.samples, ctx.notes)
        per_gpu.append(row)
        ctx.log(
            f"GPU {dev}: h2d {row['h2d_gbps']:.2f}  d2h {row['d2h_gbps']:.2f}  "
            f"local {row['local_gbps']:.2f} GB/s  wrong {row['wrong']}"
        )
    plateau = []
    for mib in p.plateau_sizes()[:-1]:  # the last size is the first GPU's figure above
        row = _host_link(g, 0, mib, plateau_loop(mib, p.loop_count), p.samples, ctx.notes)
        plateau.append(row)
        ctx.log(
            f"plateau {mib:>5d} MiB: h2d {row['h2d_gbps']:.2f}  d2h {row['d2h_gbps']:.2f}  "
            f"local {row['local_gbps']:.2f} GB/s"
        )
    for key in ("h2d_gbps", "d2h_gbps", "local_gbps"):  # as nvbandwidth prints them
        ctx.log("\n" + matrix.render(matrix.TITLES[key], [[r[key] for r in per_gpu]]))
    plateau.append(per_gpu[0])
    pairs = measure_pairs(g, p, ctx) if p.pairs and n >= 2 else None
    if p.pairs and n < 2:
        ctx.notes.append("one GPU: no pair to measure (the pair matrix needs two or more)")
    return {"per_gpu": per_gpu, "plateau": plateau, "pairs": pairs}


def _host_copy(ctx: Context, p: CopyBandwidthParams, mib: int) -> dict[str, Any]:
    """One host memory copy size (torch's copy_, its threads), timed by the host clock."""
    src = _pattern(mib * MIB, "cpu")
    dst = torch.empty_like(src)
    loop = plateau_loop(mib, p.loop_count) if mib < p.size_mib else p.loop_count
    runs = []
    for _ in range(p.samples):
        seconds = elapsed(ctx, lambda dst=dst, src=src: dst.copy_(src), loop)
        runs.append(mib * MIB * loop / seconds / 1e9)
    return {
        "device": "cpu",
        "rank": ctx.rank,
        "mib": mib,
        "h2d_gbps": None,
        "d2h_gbps": None,
        "local_gbps": statistics.median(runs),
        "samples": {"local": runs},
        "wrong": _wrong(dst, src),
    }


def _measure_cpu(
    ctx: Context, p: CopyBandwidthParams, host: dist.ProcessGroup | None
) -> dict[str, Any]:
    """The CPU analogue: host memory copies. Rank 0 sweeps the plateau; then every rank in
    turn (the others wait on the host barrier) copies at size_mib, so each rank has its row
    as each GPU has one on a GPU machine (rank 0's is the sweep's last size)."""
    plateau = []
    if ctx.rank == 0:
        for mib in p.plateau_sizes():
            plateau.append(_host_copy(ctx, p, mib))
            ctx.log(f"host copy {mib:>5d} MiB: {plateau[-1]['local_gbps']:.2f} GB/s")
    mine = plateau[-1] if plateau else None
    for turn in range(1, ctx.world_size):
        dist.barrier(group=host)
        if ctx.rank == turn:
            mine = _host_copy(ctx, p, p.size_mib)
        dist.barrier(group=host)
    rows = [mine]
    if host is not None:
        rows = [None] * ctx.world_size
        dist.all_gather_object(rows, mine, group=host)
        rows[ctx.rank] = mine  # this rank's own row: the plateau's last size on rank 0
    for i, row in enumerate(rows[1:], start=1):
        ctx.log(f"host copy {p.size_mib:>5d} MiB, rank {i}: {row['local_gbps']:.2f} GB/s")
    ctx.notes.append("CPU: host memory copies only (no host link, no GPU pairs)")
    return {"per_gpu": rows, "plateau": plateau, "pairs": None}


def summarize(found: dict[str, Any]) -> dict[str, Any]:
    """The metrics: the weakest GPU's figure (a slow slot or throttled part shows there)."""
    per_gpu, pairs = found["per_gpu"], found["pairs"]
    out: dict[str, Any] = {}
    for key, name in (
        ("h2d_gbps", "h2d_gbps"),
        ("d2h_gbps", "d2h_gbps"),
        ("local_gbps", "device_local_gbps"),
    ):
        values = [r[key] for r in per_gpu if r[key] is not None]
        if values:
            out[name] = record(name, min(values))
    if pairs:
        for key in ("ce_one_way", "ce_both_ways", "sm_one_way", "sm_both_ways", "staged_one_way"):
            values = matrix.off_diagonal(pairs.get(key) or [])
            if values:
                out[f"pair_{key}_gbps"] = record(f"pair_{key}_gbps", min(values))
        lat = matrix.off_diagonal(pairs.get("latency_us") or [])
        if lat:
            out["pair_latency_us"] = record("pair_latency_us", max(lat))
    rows = per_gpu + [r for r in found["plateau"] if all(r is not g for g in per_gpu)]
    wrong = sum(r["wrong"] for r in rows) + (pairs or {}).get("wrong", 0)
    out["wrong_total"] = record("wrong_total", wrong)
    return out


def run(ctx: Context, params: dict[str, Any]) -> dict[str, Any]:
    p = CopyBandwidthParams(**params)
    host = dist.new_group(backend="gloo") if ctx.world_size > 1 else None
    outcome: dict[str, Any] = {"metrics": {}, "data": {}}
    if not ctx.is_cuda:
        found = _measure_cpu(ctx, p, host)  # every rank takes a turn
    elif ctx.rank == 0:
        found = _measure_cuda(ctx, p, min(torch.cuda.device_count(), ctx.world_size))
    if ctx.rank == 0:
        data = {"params": asdict(p), "gpus": len(found["per_gpu"]), **found}
        if ctx.is_cuda:
            data["names"] = [torch.cuda.get_device_name(d) for d in range(len(found["per_gpu"]))]
        outcome = {"metrics": summarize(found), "data": data}
    if host is not None:
        dist.barrier(group=host)  # the others waited here, on the host, while rank 0 measured
    return outcome
