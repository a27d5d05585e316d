"""A driver killed outright (SIGKILL: no handler runs) leaves nothing running and no "ok" run.

The container's guard (kit.worker.guard) is checked here as a process: its command, and what
that command started, end when the heartbeat file stops changing, and a command that ends on its
own passes its status through. A bundle a killed driver left (a run's result written, its
heartbeat file still there) is sealed with that run failed, never "ok". The Docker path itself
is tests/integration/test_docker_env.py (test_sigkill_of_the_driver_stops_its_container).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from kit.shared import files
from tests.conftest import ROOT, run_kit

SMOKE = ROOT / "tests" / "fixtures" / "bundles" / "cpu-smoke"
# a command that starts a grandchild and sleeps: both must end
TREE = "import subprocess, sys, time; p = subprocess.Popen(['sleep', '300']); " \
       "print(p.pid, flush=True); time.sleep(300)"  # fmt: skip


def guard(heartbeat: Path, *argv: str, stale: str = "2") -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "KIT_HEARTBEAT": str(heartbeat),
           "KIT_HEARTBEAT_STALE_S": stale}  # fmt: skip
    return subprocess.Popen([sys.executable, "-m", "kit.worker.guard", "--", *argv], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    state = (
        Path(f"/proc/{pid}/stat").read_text().split()[2] if Path(f"/proc/{pid}").exists() else "X"
    )
    return state not in ("Z", "X")


def test_a_stale_heartbeat_ends_the_command_and_what_it_started(tmp_path):
    beat = tmp_path / "heartbeat"
    beat.write_text("1\n")  # written once, never again: the driver is gone
    t0 = time.monotonic()
    proc = guard(beat, sys.executable, "-c", TREE)
    grandchild = int(proc.stdout.readline())
    _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 137, err
    assert time.monotonic() - t0 < 15
    assert "heartbeat" in err and "stopping this container" in err
    time.sleep(0.5)
    assert not alive(grandchild)


def test_a_live_heartbeat_keeps_the_command_and_its_status_passes(tmp_path):
    beat = tmp_path / "heartbeat"
    beat.write_text("1\n")
    proc = guard(beat, sys.executable, "-c", "import time, sys; time.sleep(4); sys.exit(3)")
    for i in range(10):  # the driver beats
        if proc.poll() is not None:
            break
        beat.write_text(f"{i}\n")
        time.sleep(0.5)
    proc.communicate(timeout=30)
    assert proc.returncode == 3


def test_a_run_whose_driver_died_is_never_sealed_ok(tmp_path):
    b = tmp_path / "b"
    shutil.copytree(SMOKE, b)
    (b / "MANIFEST.sha256").unlink(missing_ok=True)
    (b / "MANIFEST.sha256.sig").unlink(missing_ok=True)
    results = json.loads((b / files.RESULTS).read_text())
    run = results["runs"].pop()  # the driver never recorded it: it was killed during this run
    results["status"] = "running"
    (b / files.RESULTS).write_text(json.dumps(results))
    run_dir = b / files.RUNS / run["run_id"]
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / files.RESULT).write_text(json.dumps({**run, "status": "ok"}))
    (run_dir / "heartbeat").write_text("4242\n")  # left by the killed driver
    proc = run_kit("seal", str(b), timeout=300)
    assert proc.returncode == 0, proc.stderr
    sealed = json.loads((b / files.RESULTS).read_text())
    (got,) = [r for r in sealed["runs"] if r["run_id"] == run["run_id"]]
    assert got["status"] == "failed" and "driver was killed" in got["error"]
    assert run_kit("verify", str(b)).returncode == 0


def _unsealed(tmp_path: Path) -> Path:
    b = tmp_path / "u"
    shutil.copytree(SMOKE, b)
    (b / "MANIFEST.sha256").unlink()
    return b


def test_seal_refuses_a_folder_a_run_left_before_recording_the_machine(tmp_path):
    b = _unsealed(tmp_path)
    (b / files.HARDWARE).unlink()  # Ctrl-C just as the run started
    proc = run_kit("seal", str(b))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "hardware.json" in proc.stderr and not (b / "MANIFEST.sha256").exists()


def test_seal_refuses_a_stray_result_no_reader_takes(tmp_path):
    b = _unsealed(tmp_path)
    run_dir = b / files.RUNS / "allreduce.p2p.r9"
    run_dir.mkdir(parents=True)
    (run_dir / files.RESULT).write_text(json.dumps({"schema": 99, "run_id": "allreduce.p2p.r9"}))
    proc = run_kit("seal", str(b))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "allreduce.p2p.r9" in proc.stderr and not (b / "MANIFEST.sha256").exists()
    with open(run_dir / files.RESULT, "r+b") as f:  # 1 GiB, sparse
        f.truncate(1 << 30)
    proc = run_kit("seal", str(b))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert not (b / "MANIFEST.sha256").exists()
