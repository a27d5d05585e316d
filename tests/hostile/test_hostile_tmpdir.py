"""A CPU run leaves nothing in the user's TMPDIR: torchrun's torchelastic_* folders (one per
launch) once stayed after every run. Each host launch gets its own TMPDIR, removed with it."""

from __future__ import annotations

import os

from tests.conftest import ROOT, run_kit

RECIPE = """kit: 1
name: tiny
gpus: 2
repeats: 1
variants: [p2p]
benchmarks:
  - kind: allreduce
    params: {min_bytes: 8, max_bytes: 64, factor: 8, iters: 1, warmup_iters: 0, trials: 1}
"""


def test_a_cpu_run_leaves_nothing_in_tmpdir(tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    recipe = tmp_path / "tiny.yaml"
    recipe.write_text(RECIPE)
    env = {**os.environ, "TMPDIR": str(tmp), "MPLCONFIGDIR": str(tmp_path / "mpl")}
    proc = run_kit("reproduce", str(recipe), "--device", "cpu", "--smoke", "--runtime", "host",
                   "--out", str(tmp_path / "out"), env=env, timeout=600, cwd=ROOT)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert sorted(p.name for p in tmp.iterdir()) == []
