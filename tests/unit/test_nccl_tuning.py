"""The switch that turns NCCL's TUNING log on for one call, against the real libnccl torch loads.

No GPU here, so no collective can print its algorithm (the parser is tested on NCCL's own format
strings in test_nccl_log.py). What can be checked for real: NCCL re-reads its settings after
ncclResetDebugInit and writes to the file the switch names (ncclGetUniqueId needs no GPU and is
the first NCCL call of the process), the environment is put back exactly, the ranks that do not
log make the same calls, and a sweep with the log off makes no extra call.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT

PROBE = r"""
import ctypes, json, os
from pathlib import Path
import torch  # loads libnccl, as in the worker
from kit.worker.nccl_tuning import TuningLog, loaded_nccl

if loaded_nccl() is None:
    print(json.dumps({"no_nccl": True}))
    raise SystemExit(0)
import sys
os.environ["NCCL_DEBUG"] = sys.argv[1]
os.environ.pop("NCCL_DEBUG_SUBSYS", None)
os.environ.pop("NCCL_DEBUG_FILE", None)
lib = ctypes.CDLL(loaded_nccl())
uid = ctypes.create_string_buffer(128)
seen, order = {}, []

def logged():
    order.append("logged")
    seen["env"] = [os.environ.get(k) for k in ("NCCL_DEBUG", "NCCL_DEBUG_SUBSYS")]
    seen["rc"] = lib.ncclGetUniqueId(uid)
    seen["file_made_by_nccl"] = Path(os.environ["NCCL_DEBUG_FILE"]).exists()

log = TuningLog(0, True)
calls = log.choice(logged, lambda: order.append("settle"))
after = {k: os.environ.get(k) for k in ("NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE")}
other = TuningLog(1, True).choice(lambda: order.append("rank1"), lambda: order.append("rank1"))
off = TuningLog(0, False, "not logged: off").choice(lambda: order.append("off"), lambda: None)
log.close()
# one write of the whole line: NCCL's threads write to the same stdout, and print() (unbuffered
# where PYTHONUNBUFFERED is set) writes the text and its newline apart; a loaded `make test
# JOBS=3` once read NCCL's "Socket handshake" line between the two, on the JSON's line
os.write(1, (json.dumps({"calls": calls, "seen": seen, "after": after, "other": other,
                         "off": off, "order": order, "reason": log.reason}) + "\n").encode())
# Out without the interpreter's exit: ncclGetUniqueId left NCCL's bootstrap root thread
# listening, and with no collective to settle on (no GPU), NCCL's reset of its log file is still
# pending; glibc's exit-time stream cleanup then raced that thread's logging and aborted the
# probe ("malloc_consolidate(): unaligned fastbin chunk detected", once under a loaded `make
# test -n 2`). A worker settles on a real collective, which completes the reset, and destroys
# its process group before it exits.
os._exit(0)
"""


def _probe(level: str) -> tuple[dict, str]:
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, level], capture_output=True, text=True, timeout=300, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    # the probe's result is its last JSON line: NCCL's own threads may print after it (a fresh
    # clone's run saw "NCCL INFO Socket handshake ..." follow it)
    result = [line for line in proc.stdout.splitlines() if line.startswith("{")][-1]
    return json.loads(result), proc.stdout


@pytest.mark.slow
def test_the_tuning_switch_reaches_the_real_nccl_and_puts_everything_back() -> None:
    out, stdout = _probe("WARN")
    if out.get("no_nccl"):
        pytest.skip("this torch build loads no libnccl")
    assert out["reason"] == ""
    # NCCL_DEBUG was WARN: TUNING alone, and only warnings would be copied back to stdout
    assert out["seen"] == {"env": ["INFO", "TUNING"], "rc": 0, "file_made_by_nccl": True}
    assert out["calls"] == []  # NCCL wrote the file; no collective ran, so no choice in it
    assert out["after"] == {
        "NCCL_DEBUG": "WARN",
        "NCCL_DEBUG_SUBSYS": None,
        "NCCL_DEBUG_FILE": None,
    }
    assert out["other"] is None
    assert out["off"] is None
    assert out["order"] == ["logged", "settle", "rank1", "rank1"]  # the log off: no extra call
    assert "NCCL INFO" not in stdout


@pytest.mark.slow
def test_with_info_on_nccls_other_lines_come_back_to_stdout() -> None:
    """The kit's CUDA runs set NCCL_DEBUG=INFO: NCCL's first call logs its INIT/ENV lines, which
    went to the private file and must reach stdout, where the driver reads the run's log."""
    out, stdout = _probe("INFO")
    if out.get("no_nccl"):
        pytest.skip("this torch build loads no libnccl")
    assert out["seen"]["env"] == ["INFO", "INIT,BOOTSTRAP,ENV,TUNING"]
    assert out["calls"] == [] and out["after"]["NCCL_DEBUG"] == "INFO"
    assert out["after"]["NCCL_DEBUG_SUBSYS"] is None
    assert any(" NCCL INFO " in line for line in stdout.splitlines())


def test_a_debug_file_set_by_the_user_is_left_alone(monkeypatch) -> None:
    from kit.worker.nccl_tuning import TuningLog

    monkeypatch.setenv("NCCL_DEBUG_FILE", "/tmp/theirs.log")
    log = TuningLog(0, True)
    assert log.reset is None and "NCCL_DEBUG_FILE" in log.reason
    order: list[str] = []
    assert log.choice(lambda: order.append("a"), lambda: order.append("b")) is None
    assert order == ["a", "b"]  # the other ranks make these calls too: rank 0 must keep step


def test_tuning_is_added_to_what_the_run_prints(monkeypatch, capsys) -> None:
    from kit.worker.nccl_tuning import echo, with_tuning

    assert with_tuning(None) == "INIT,BOOTSTRAP,ENV,TUNING"  # NCCL's default set, plus TUNING
    assert with_tuning("INIT,P2P") == "INIT,P2P,TUNING"
    assert with_tuning("^NET,TUNING") == "^NET"  # all but NET: TUNING included
    monkeypatch.setenv("NCCL_DEBUG", "INFO")
    conn = "h:1:2 [0] NCCL INFO Channel 02/0 : 0[0] -> 1[1] via P2P/CUMEM/read"
    tuning = "h:1:2 [0] NCCL INFO AllReduce: 8 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..1}"
    warn = "h:1:2 [0] enqueue.cc:1 NCCL WARN something"
    echo("\n".join([conn, tuning, warn]))
    assert capsys.readouterr().out.splitlines() == [conn, warn]  # the transport stays visible
    monkeypatch.setenv("NCCL_DEBUG", "WARN")
    echo("\n".join([conn, tuning, warn]))
    assert capsys.readouterr().out.splitlines() == [warn]


def test_no_writable_temporary_directory_means_not_logged(monkeypatch) -> None:
    import tempfile

    import torch  # noqa: F401  (loads libnccl where the build has it)

    from kit.worker.nccl_tuning import TuningLog, loaded_nccl

    if loaded_nccl() is None:
        pytest.skip("this torch build loads no libnccl")
    monkeypatch.delenv("NCCL_DEBUG_FILE", raising=False)
    monkeypatch.setattr(tempfile, "tempdir", "/proc/kit-no-such-dir")
    log = TuningLog(0, True)
    assert log.reset is None and log.reason.startswith("not logged: no file for NCCL's log")


def test_one_rank_is_said_to_choose_no_algorithm() -> None:
    """On one rank NCCL copies locally: its TUNING log names no algorithm (one H100, NCCL
    2.28.9); the note says why rather than blaming the NCCL version."""
    from kit.worker.nccl_tuning import TuningLog
    from kit.workloads.allreduce.worker import COLLECTIVE
    from kit.workloads.collective_sweep import _choice_note

    rows = [{"bytes": 8, "nccl_calls": []}]
    log = TuningLog(rank=1, enabled=False)
    assert _choice_note(log, COLLECTIVE, rows, 1) == (
        "not logged: on one rank NCCL copies locally and chooses no algorithm"
    )
    assert _choice_note(log, COLLECTIVE, rows, 2).startswith("not logged by this NCCL")
