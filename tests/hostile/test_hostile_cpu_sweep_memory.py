"""A CPU all-reduce sweep whose largest sizes would not fit in the host's available memory stops
at the largest size that fits and says so, as a GPU sweep stops by device memory. A one-rank
gloo group in this process; the host's memory is read from a meminfo file the test writes."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")


def test_cpu_sweep_stops_where_host_memory_ends(tmp_path, monkeypatch):
    import torch.distributed as dist

    from kit.shared import hostmem
    from kit.worker.common import Context
    from kit.workloads import collective_sweep
    from kit.workloads.allreduce.params import AllreduceParams
    from kit.workloads.allreduce.worker import COLLECTIVE

    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal: 1000000 kB\nMemAvailable: 64 kB\n")  # 65,536 bytes
    monkeypatch.setattr(hostmem, "MEMINFO", meminfo)
    monkeypatch.setattr(hostmem, "CGROUP", tmp_path / "no-cgroup")
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    assert collective_sweep.host_available() == 65536
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0,
                            world_size=1)  # fmt: skip
    try:
        ctx = Context({}, tmp_path, 0, 0, 1, torch.device("cpu"), "gloo")
        p = AllreduceParams(min_bytes=1024, max_bytes=1 << 20, warmup_iters=0, iters=1, trials=1,
                            log_nccl_choice=False, latency=False)  # fmt: skip
        out = collective_sweep.sweep(ctx, p, COLLECTIVE)
    finally:
        dist.destroy_process_group()
    sizes = [row["bytes"] for row in out["data"]["sizes"]]
    assert sizes == [1024, 2048, 4096, 8192, 16384]  # 4 x 16 KiB fits in 64 KiB; 32 KiB does not
    note = next(n for n in ctx.notes if n.startswith("sweep stopped before 32768 B"))
    assert "host memory available per rank" in note and "largest size run is 16384 B" in note
