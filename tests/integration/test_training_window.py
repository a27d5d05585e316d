"""A minimum window on several ranks: every rank runs the same number of steps.

Each step holds a collective, so a rank that stops one step early leaves the others waiting in
that step's collective until the run's timeout. Here rank 1 finishes each step 40 ms after rank
0 (it sleeps after the all-reduce), so on its own clock the window reaches min_window_s one or
more steps sooner: a rule judged on each rank's own clock hangs; the kit's agreed count must not.
Real processes (torchrun, gloo on the CPU), the kit's own measure().
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from tests.conftest import ROOT

SCRIPT = textwrap.dedent(
    """
    import json, sys, time
    from pathlib import Path
    import torch, torch.distributed as dist
    from kit.worker.common import Context
    from kit.worker.training import measure

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    ctx = Context({}, Path("."), rank, rank, world, torch.device("cpu"), "gloo")
    t = torch.ones(1)

    def step(batch):
        time.sleep(0.01)
        dist.all_reduce(t)
        if rank == 1:
            time.sleep(0.04)  # rank 1 reads its clock later than rank 0 after every step
        return torch.zeros(())

    m = measure(ctx, step, [None], warmup_steps=2, steps=2, min_window_s=float(sys.argv[1]))
    row = {"rank": rank, "steps": len(m.step_times), "window_s": m.window_s,
           "rule": m.extra.get("window_rule")}
    Path(sys.argv[2], f"rank{rank}.json").write_text(json.dumps(row))  # one file a rank
    dist.barrier()
    dist.destroy_process_group()
    """
)


@pytest.mark.slow
def test_ranks_agree_on_the_window_they_time(tmp_path):
    script = tmp_path / "window.py"
    script.write_text(SCRIPT)
    log = (tmp_path / "torchrun.log").open("w+")  # a file: a hung rank cannot hold a pipe open
    proc = subprocess.Popen(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
         str(script), "0.6", str(tmp_path)],
        stdout=log, stderr=subprocess.STDOUT, cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1",
             "TMPDIR": str(tmp_path)},  # torchrun's torchelastic_* folder: not into /tmp
    )  # fmt: skip
    try:
        proc.wait(timeout=90)
    except subprocess.TimeoutExpired:
        proc.terminate()  # torchrun stops its ranks (each in a session of its own) on SIGTERM
        proc.wait(timeout=60)
        pytest.fail("the ranks disagreed on the window's steps: one waited in a collective")
    log.seek(0)
    stderr = log.read()
    assert proc.returncode == 0, stderr[-2000:]
    rows = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert sorted(r["rank"] for r in rows) == [0, 1]
    assert (
        rows[0]["steps"] == rows[1]["steps"] > 2
    )  # the same count on both ranks, more than `steps`
    assert min(r["window_s"] for r in rows) >= 0.6  # the rule held on the shorter rank's clock
    assert all(
        r["rule"].startswith(
            f"at least 2 steps and at least 0.6 s of timed steps: {r['steps']} steps ran"
        )
        for r in rows
    )
