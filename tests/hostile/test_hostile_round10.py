"""The eighth black-box pass's running-side findings: a stop signal wins over the error it
caused. SIGTERM while the kit waits for Podman's API was "no Podman API answers (Terminated)",
exit 1; a closed terminal (SIGHUP, then every write EIO) ended 1 or 2 instead of 129."""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import time

import pytest

from kit.bundle import verify_manifest
from tests.conftest import ROOT, needs_pdf, one_variant, sigint_as_default


def test_sigterm_while_podman_s_api_is_awaited_is_a_stop_not_a_missing_service(tmp_path):
    """An API socket that accepts and never answers: the driver waits in its ping; SIGTERM
    then ends it as stopped (143, one line), not as 'no Podman API answers'."""
    path = tmp_path / "podman.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(4)
    env = {**os.environ, "KIT_PODMAN_HOST": f"unix://{path}", "TMPDIR": str(tmp_path)}
    args = [sys.executable, "-m", "kit", "reproduce", "recipes/allreduce.yaml", "--device",
            "cpu", "--smoke", "--repeats", "1", "--runtime", "podman", "--out",
            str(tmp_path / "out")]  # fmt: skip
    proc = subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        server.settimeout(120)
        conn, _ = server.accept()  # the driver is in its ping now
        time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
        conn.close()
    finally:
        proc.kill() if proc.poll() is None else None
        server.close()
    assert proc.returncode == 143, err
    lines = err.strip().splitlines()
    assert lines[-1] == "kit: stopped by SIGTERM", err
    assert "Podman API" not in err and "Traceback" not in err


@pytest.mark.skipif(not hasattr(os, "login_tty"), reason="needs os.login_tty (Python 3.11)")
def test_a_closed_terminal_ends_the_run_as_sighup_with_its_bundle_sealed(tmp_path):
    """The run's terminal closes mid-run: the kernel sends SIGHUP and every later write to the
    terminal fails (EIO); the command still ends 129 and what finished is sealed."""
    out = tmp_path / "out"
    main, sub = os.openpty()
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    args = [sys.executable, "-m", "kit", "reproduce", "recipes/allreduce.yaml", "--device",
            "cpu", "--smoke", "--repeats", "1", "--runtime", "host", "--out", str(out)]  # fmt: skip
    proc = subprocess.Popen(args, cwd=ROOT, env=env, stdin=sub, stdout=sub, stderr=sub,
                            preexec_fn=lambda: (sigint_as_default(), os.login_tty(sub)))  # fmt: skip
    os.close(sub)
    seen = b""
    deadline = time.monotonic() + 240
    try:
        while b"[1/2]" not in seen and time.monotonic() < deadline:
            ready, _, _ = select.select([main], [], [], 1)
            if ready:
                try:
                    seen += os.read(main, 4096)
                except OSError:
                    break
        assert b"[1/2]" in seen, seen.decode(errors="replace")
    finally:
        os.close(main)  # the terminal is gone: SIGHUP to its session
    code = proc.wait(timeout=240)
    assert code == 129, seen.decode(errors="replace")
    assert verify_manifest(out).ok


@pytest.mark.parametrize("delay", [1.5, 2.5, 3.5, 5.0])
@needs_pdf
def test_a_report_killed_while_it_renders_leaves_the_bundle_verifying(tmp_path, delay):
    """SIGKILL to `kit report` mid-render: the new report.html was renamed in before the PDF was
    made, and the manifest never caught up (the bundle then failed verify). Both pages are now
    made first and written together just before the manifest."""
    import shutil

    b = tmp_path / "b"
    shutil.copytree(ROOT / "reports" / "examples" / "h200x2-allreduce", b)
    (b / "MANIFEST.sha256.sig").unlink(missing_ok=True)
    proc = subprocess.Popen([sys.executable, "-m", "kit", "report", str(b)], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    time.sleep(delay)
    proc.kill()
    proc.wait(timeout=60)
    check = verify_manifest(b)
    assert check.ok, (check.changed, check.missing, check.extra)


@needs_pdf  # the signal lands while the PDF is made: without it the seal is over first
def test_a_second_sighup_after_the_stop_still_exits_129(tmp_path):
    """SIGHUP at the seal, then another 50 ms later: the command has ended as stopped; the
    second one came while Python shut down (its handlers back to the default) and killed it by
    the signal. It is ignored once the exit code is chosen."""
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    recipe = one_variant(tmp_path)  # one run: the signals are for the seal after it
    args = [sys.executable, "-m", "kit", "reproduce", str(recipe), "--device", "cpu",
            "--smoke", "--repeats", "1", "--runtime", "host", "--out", str(tmp_path / "o")]  # fmt: skip
    proc = subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True,
                            preexec_fn=sigint_as_default)  # fmt: skip
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("[1/1]") and " ok " in line:
            for _ in range(2):
                time.sleep(0.05)
                proc.send_signal(signal.SIGHUP)
            break
    rest = proc.stdout.read()
    assert proc.wait(timeout=120) == 129, rest
    assert verify_manifest(tmp_path / "o").ok


def _hang_up_ignored() -> None:
    """What `nohup` leaves a command: SIGHUP ignored (an ignored signal is inherited)."""
    signal.signal(signal.SIGHUP, signal.SIG_IGN)


def test_a_run_under_nohup_outlives_a_hang_up(tmp_path):
    """`nohup kit reproduce ... &` and the ssh session closes: the run goes on to the end. A
    SIGHUP ignored when the kit starts stays ignored while the runs go as while the report
    renders (the run's handler used to replace it, and stopped the run the user had asked to
    outlive the terminal)."""
    out = tmp_path / "o"
    args = [sys.executable, "-m", "kit", "reproduce", "recipes/allreduce.yaml", "--device", "cpu",
            "--smoke", "--repeats", "1", "--runtime", "host", "--out", str(out)]  # fmt: skip
    proc = subprocess.Popen(args, cwd=ROOT, env={**os.environ, "TMPDIR": str(tmp_path)},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            preexec_fn=_hang_up_ignored)  # fmt: skip
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("[1/2]"):  # the first run has finished, the second is starting
            proc.send_signal(signal.SIGHUP)
            break
    rest = proc.stdout.read()
    assert proc.wait(timeout=180) == 0, rest
    assert json.loads((out / "results.json").read_text())["status"] == "complete"
    assert verify_manifest(out).ok
