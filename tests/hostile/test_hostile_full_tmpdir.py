"""A full TMPDIR (ENOSPC mid-sweep) leaves none of the kit's files behind: the worker's folder
for NCCL's per-size log is removed however the sweep ends, not when the interpreter gets to it.
A one-rank gloo group in this process, the log switched on as on NCCL, the timing failing with
ENOSPC as a full disk makes it."""

from __future__ import annotations

import errno
import tempfile

import pytest

torch = pytest.importorskip("torch")


def test_enospc_mid_sweep_leaves_nothing_in_tmpdir(tmp_path, monkeypatch):
    import torch.distributed as dist

    from kit.worker import nccl_tuning
    from kit.worker.common import Context
    from kit.workloads import collective_sweep
    from kit.workloads.allreduce.params import AllreduceParams
    from kit.workloads.allreduce.worker import COLLECTIVE

    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    monkeypatch.setattr(nccl_tuning, "reset_function", lambda: (lambda: None, ""))
    monkeypatch.setattr(collective_sweep, "_tuning_log",
                        lambda ctx, p: nccl_tuning.TuningLog(ctx.rank, True))  # fmt: skip

    def full(*args, **kw):
        assert [p.name for p in tmp.iterdir()], "the log folder is made before the timing"
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(collective_sweep, "timed", full)
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0,
                            world_size=1)  # fmt: skip
    try:
        ctx = Context({}, tmp_path, 0, 0, 1, torch.device("cpu"), "gloo")
        p = AllreduceParams(min_bytes=8, max_bytes=64, warmup_iters=0, iters=1, trials=1)
        with pytest.raises(OSError) as err:
            collective_sweep.sweep(ctx, p, COLLECTIVE)
        assert err.value.errno == errno.ENOSPC
        assert sorted(p.name for p in tmp.iterdir()) == []  # while the failure is still held
    finally:
        dist.destroy_process_group()
