"""The test harness's zygote (tests/kit_zygote.py): what makes a forked command the same as a
fresh `python -m kit`, and what keeps one stuck command from spoiling the commands after it."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from tests import conftest
from tests.conftest import ROOT, run_kit
from tests.kit_zygote import AnswerLines, Zygote


@pytest.fixture
def zygote(tmp_path: Path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    z = Zygote(ROOT, tmp_path, env)
    yield z, env
    z.close()


def test_the_zygote_has_one_thread_when_it_forks(zygote):
    """A fork keeps only the thread that forked: any other thread of the zygote (a BLAS pool)
    holding a lock at that moment leaves the child waiting on it for ever."""
    z, env = zygote
    assert z.run(["--version"], env, ROOT, 60, None).returncode == 0
    assert z.proc is not None
    assert os.listdir(f"/proc/{z.proc.pid}/task") == [str(z.proc.pid)]


def test_both_answer_lines_of_a_command_that_ended_at_once_are_read_without_waiting():
    """A command that ends before its "pid" line is read leaves both lines in the pipe; the
    harness once read both into a file's buffer and then waited on the pipe for the second,
    until the command's timeout (a `kit --version` 600 s in the suite)."""
    read, write = os.pipe()
    try:
        os.write(write, b"pid 123\nexit 0\n")
        lines = AnswerLines(read)
        assert lines.next(None) == "pid 123"
        assert lines.next(time.monotonic() + 1) == "exit 0"  # TimeoutError if it asked the pipe
        with pytest.raises(TimeoutError):
            lines.next(time.monotonic() + 0.01)
        os.close(write)
        with pytest.raises(RuntimeError, match="died"):
            lines.next(None)
    finally:
        os.close(read)


def test_a_command_past_its_timeout_leaves_the_next_command_its_own_answer(zygote):
    z, env = zygote
    validate = ["recipes", "validate", str(ROOT / "recipes/allreduce.yaml")]
    # a deadline already past: the command is killed (or has just ended: a kill then finds
    # nothing), and its exit line is read either way
    for _ in range(3):
        with pytest.raises(subprocess.TimeoutExpired) as caught:
            z.run(validate, env, ROOT, 0, None)
        assert b"command " in caught.value.stderr and b"zygote " in caught.value.stderr
    # the next command gets its own exit status and output, not an earlier one's
    after = z.run(validate, env, ROOT, 60, None)
    assert after.returncode == 0 and "allreduce.yaml: OK" in after.stdout, after


def test_a_new_set_of_start_up_variables_takes_the_least_recently_used_zygote(monkeypatch):
    monkeypatch.setattr(conftest, "_ZYGOTES", {})
    monkeypatch.setattr(conftest, "ZYGOTES", 2)
    base = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    envs = [{**base, "PYTHONPATH": f"{ROOT}{os.pathsep}/nowhere/{i}"} for i in range(3)]
    try:
        for env in envs:
            proc = run_kit("--version", env=env)
            assert proc.returncode == 0, proc.stderr
        # two alive, the first set's closed; every command was served by a zygote, none by a
        # whole interpreter of its own
        assert len(conftest._ZYGOTES) == 2
        paths = [dict(k)["PYTHONPATH"] for k in conftest._ZYGOTES]
        assert paths == [e["PYTHONPATH"] for e in envs[1:]]
        assert all(z.count == 1 for z in conftest._ZYGOTES.values())
    finally:
        for z in conftest._ZYGOTES.values():
            z.close()


def test_the_checkout_stands_once_on_the_commands_path():
    env = conftest._kit_env({"env": {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}})
    assert env["PYTHONPATH"] == str(ROOT)
