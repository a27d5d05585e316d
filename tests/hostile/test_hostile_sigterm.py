"""SIGTERM (or SIGHUP) while `kit report` renders: one line and exit 128+signal, never a silent
death; the bundle's report files are the old ones or the new ones, never half of one."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import time

import pytest

from kit.bundle import verify_manifest
from tests.conftest import ROOT, sigint_as_default

EXAMPLE = ROOT / "reports" / "examples" / "h200x2-allreduce"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_stopped_report_says_so(tmp_path, sig):
    b = tmp_path / "b"
    shutil.copytree(EXAMPLE, b)
    (b / "MANIFEST.sha256.sig").unlink(missing_ok=True)
    proc = subprocess.Popen([sys.executable, "-m", "kit", "report", str(b)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=sigint_as_default)  # fmt: skip
    time.sleep(2.5)  # imports done, rendering
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    if proc.returncode == 0:
        pytest.skip("the report finished before the signal came")
    assert proc.returncode == 128 + sig, err
    assert err.strip().splitlines()[-1] == f"kit: stopped by {sig.name}", err
    assert "Traceback" not in err
    assert not [p for p in b.rglob("*.tmp")]
    assert verify_manifest(b).ok or not (b / "MANIFEST.sha256").exists()
