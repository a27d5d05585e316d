"""Round five of the black-box pass (issue 37): a run killed in flight, stop signals at every
stage, notices before errors, options that mean nothing for the run, strict recipe integers,
refs' messages, an empty KIT_REFS_DB, a bundle compared with itself, CPU bundles and buying.

Every case runs the real `kit` command in a subprocess, as a user would."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kit.bundle import verify_manifest
from kit.shared import files
from tests.conftest import ROOT, run_kit, sigint_as_default

KILLED = """\
kit: 1
name: killed
gpus: 2
repeats: 1
timeout_s: 600
variants: [p2p]
benchmarks:
  - kind: allreduce
    name: fast
    params: {max_bytes: 4096, factor: 4, iters: 2, warmup_iters: 1, trials: 1}
  - kind: allreduce
    name: slow
    params: {max_bytes: 4096, factor: 4, iters: 1000000, warmup_iters: 1, trials: 100}
"""


def _start(tmp_path: Path, recipe: str = KILLED) -> tuple[subprocess.Popen, Path, Path]:
    """`kit reproduce` of a CPU recipe (host runtime): the first benchmark finishes in seconds,
    the second runs until it is stopped. Returns once the second is in flight."""
    path = tmp_path / "recipe.yaml"
    path.write_text(recipe)
    out, log = tmp_path / "bundle", tmp_path / "out.txt"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "kit", "reproduce", str(path), "--device", "cpu",
           "--runtime", "host", "--out", str(out)]  # fmt: skip
    with open(log, "w") as f:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=f, stderr=subprocess.STDOUT,
                                preexec_fn=sigint_as_default)  # fmt: skip
    deadline = time.monotonic() + 180
    beat = out / files.RUNS / "slow.p2p.r0" / "heartbeat"
    while not beat.exists():
        assert proc.poll() is None, log.read_text()
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.3)
    time.sleep(2)  # its ranks are working
    return proc, out, log


@pytest.mark.slow
def test_seal_after_sigkill_records_the_run_in_flight(tmp_path):
    proc, out, _ = _start(tmp_path)
    proc.kill()
    proc.wait(timeout=30)
    time.sleep(1)
    sealed = run_kit("seal", str(out), timeout=300)
    assert sealed.returncode == 0, sealed.stderr
    assert sealed.stderr.count("\n") == 1, sealed.stderr
    line = sealed.stderr
    assert "the driver was killed during slow.p2p.r0" in line
    assert "did not run to the end: slow.p2p.r0" in line and "seal" in line
    assert "interrupted (no manifest" not in line  # not "the seal was interrupted"
    results = json.loads((out / files.RESULTS).read_text())
    runs = {r["run_id"]: r for r in results["runs"]}
    assert runs["fast.p2p.r0"]["status"] == "ok" and runs["fast.p2p.r0"]["metrics"]
    stopped = runs["slow.p2p.r0"]
    assert (stopped["benchmark"], stopped["variant"], stopped["repeat"]) == ("slow", "p2p", 0)
    assert stopped["status"] == "failed" and stopped["metrics"] == {}
    assert stopped["error"].startswith("did not run to the end")
    assert results["sealed_after"]["in_flight_runs"] == ["slow.p2p.r0"]
    assert results["status"] == "interrupted"
    assert verify_manifest(out).ok
    html = (out / "report.html").read_text()
    assert "did not run to the end" in html and "slow.p2p.r0" in html
