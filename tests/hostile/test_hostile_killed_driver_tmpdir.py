"""A driver killed outright (SIGKILL) leaves its launch folder in TMPDIR (`kit-launch-*`, with
torchrun's torchelastic_* folders inside): nothing of it runs to remove it. The next
`kit reproduce` removes the folders of dead drivers, and only those: never one of a live process,
of another user or host, one the kit did not make, or a link.

The run is real (recipes/allreduce.yaml on the CPU, host runtime, its P2P variant: one launch a
run), killed mid-run; the sweep's decisions are checked on real folders and real processes
(kit.shared.scratch).
"""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from kit.shared import scratch
from tests.conftest import ROOT, one_variant, run_kit

# a live process that made its launch folder the kit's way, and holds it
HOLDER = ("import time; from kit.shared import scratch; print(scratch.make(), flush=True); "
          "time.sleep(600)")  # fmt: skip


def environment(tmp: Path, tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "TMPDIR": str(tmp), "MPLCONFIGDIR": str(tmp_path / "mpl"),
            "PYTHONPATH": str(ROOT)}  # fmt: skip


def descendants(pid: int) -> set[int]:
    """Every process below `pid` (torchrun, its ranks), read from /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            text = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(text[text.rfind(")") + 2 :].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def holders(folder: Path) -> set[int]:
    """The processes whose TMPDIR is `folder` (torchrun and its ranks inherit it)."""
    want = f"TMPDIR={folder}".encode()
    found = set()
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and want in (entry / "environ").read_bytes().split(b"\0"):
                found.add(int(entry.name))
        except OSError:
            continue
    return found


def gone(pids: set[int], within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if all(scratch.start_time(p) is None for p in pids):
            return True
        time.sleep(0.2)
    return False


def launch_folders(tmp: Path) -> set[str]:
    return {p.name for p in tmp.iterdir() if p.name.startswith(scratch.PREFIX)}


@pytest.fixture
def holder(tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    proc = subprocess.Popen([sys.executable, "-c", HOLDER], stdout=subprocess.PIPE, text=True,
                            env=environment(tmp, tmp_path))  # fmt: skip
    folder = Path(proc.stdout.readline().strip())
    yield tmp, folder
    proc.kill()
    proc.wait()


def test_a_killed_drivers_folders_are_removed_by_the_next_run_and_nothing_else(tmp_path, holder):
    tmp, live = holder
    assert live.parent == tmp and scratch.NAME.fullmatch(live.name), live
    (live / "rank-file").write_text("in use\n")
    # what the kit did not make: a look-alike by hand, torchrun's folder of an older kit
    (tmp / "kit-launch-by-hand").mkdir()
    (tmp / "torchelastic_older").mkdir()
    recipe = one_variant(tmp_path)
    found = sorted(p.name for p in tmp.iterdir())
    env = environment(tmp, tmp_path)

    driver = subprocess.Popen(
        [sys.executable, "-m", "kit", "reproduce", str(recipe), "--device", "cpu", "--smoke",
         "--repeats", "1", "--out", str(tmp_path / "killed")],
        env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip
    try:
        deadline, mine = time.monotonic() + 180, set()
        while time.monotonic() < deadline and driver.poll() is None:
            mine = launch_folders(tmp) - set(found)
            if any(any((tmp / m).glob("torchelastic_*")) for m in mine):
                break  # torchrun runs in the driver's launch folder
            time.sleep(0.2)
        assert driver.poll() is None and mine, "the run ended before its launch was seen"
        below = descendants(driver.pid)
    finally:
        os.killpg(driver.pid, signal.SIGKILL)
        driver.wait()
    # torchrun is in a session of its own: it ends because its driver died, not by this kill
    assert gone(below, 60), "the launch outlived its killed driver"
    (left,) = mine
    # and whatever it started after the look (a rank spawned late) holds the folder no longer
    assert gone(holders(tmp / left), 60), "a process still has the folder as its TMPDIR"
    assert any((tmp / left).glob("torchelastic_*")), "the killed driver left nothing to sweep"

    proc = run_kit("reproduce", str(recipe), "--device", "cpu", "--smoke", "--repeats", "1",
                   "--out", str(tmp_path / "next"), env=env, timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "removed 1 folder(s) of killed kit runs" in proc.stderr, proc.stderr
    # the dead driver's folder is gone; the live one, the others, and nothing new, stay
    assert sorted(p.name for p in tmp.iterdir()) == found
    assert (live / "rank-file").read_text() == "in use\n"


def test_a_normal_run_leaves_tmpdir_as_it_found_it(tmp_path, holder):
    """Nothing of a finished run stays in TMPDIR (torchrun's torchelastic_* folders once stayed
    after every run: each launch has its own folder, removed with it), another live kit's folder
    stays untouched, and nothing is said about killed runs when there were none."""
    tmp, live = holder
    recipe = one_variant(tmp_path)
    found = sorted(p.name for p in tmp.iterdir())
    proc = run_kit("reproduce", str(recipe), "--device", "cpu", "--smoke", "--repeats", "1",
                   "--out", str(tmp_path / "out"), env=environment(tmp, tmp_path),
                   timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "killed kit runs" not in proc.stderr
    assert sorted(p.name for p in tmp.iterdir()) == found == [live.name]


def named(tmp: Path, owner: scratch.Owner, suffix: str = "abcd1234") -> Path:
    folder = tmp / f"{scratch.PREFIX}{owner.tag()}-{suffix}"
    folder.mkdir()
    (folder / "torchelastic_x").mkdir()
    return folder


def _exec_done(proc: subprocess.Popen, tmpdir: Path, timeout_s: float = 30.0) -> None:
    """Until `proc` runs its own program: between fork and exec, /proc/PID/environ still shows
    the parent's variables (no TMPDIR of its own), so under load a sweep that came first saw
    its folder unused and removed it (5 removed, not 4)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with open(f"/proc/{proc.pid}/environ", "rb") as f:
            if b"\0TMPDIR=" + os.fsencode(str(tmpdir)) + b"\0" in b"\0" + f.read():
                return
        time.sleep(0.01)
    raise AssertionError(f"pid {proc.pid} did not exec within {timeout_s} s")


def test_the_sweep_removes_only_what_it_can_prove_abandoned(tmp_path):
    me = scratch.this_owner()
    assert me is not None  # Linux: the kit can tell its drivers apart
    finished = subprocess.Popen(["true"])
    finished.wait()
    gone_driver = dataclasses.replace(me, pid=finished.pid)
    # the driver is dead but what it started still runs (torchrun stopping its ranks, in
    # sessions of their own): the folder, or one below it, is their TMPDIR
    running = named(tmp_path, gone_driver, "running0")
    below = named(tmp_path, gone_driver, "below000")
    users = [subprocess.Popen(["sleep", "300"], env={**os.environ, "TMPDIR": str(where)})
             for where in (running, below / "torchelastic_x")]  # fmt: skip
    try:
        for user, where in zip(users, (running, below / "torchelastic_x"), strict=True):
            _exec_done(user, where)
        reused = named(tmp_path, dataclasses.replace(me, start="1"), "reused00")  # pid reused
        dead = named(tmp_path, gone_driver, "dead0000")
        # a Docker build's context, named the same way (the wheels copied into it)
        build = Path(tempfile.mkdtemp(prefix=scratch.prefix("build"), dir=tmp_path))
        dead_build = build.rename(build.parent / build.name.replace(me.tag(), gone_driver.tag()))
        live_build = Path(tempfile.mkdtemp(prefix=scratch.prefix("build"), dir=tmp_path))
        by_hand = tmp_path / "kit-build-cuda13-abcd1234"  # an older kit's: not attributable
        by_hand.mkdir()
        earlier_boot = named(tmp_path, dataclasses.replace(me, pid=os.getppid(), boot="0" * 8))
        alive = named(tmp_path, me, "alive000")
        other_host = named(tmp_path, dataclasses.replace(gone_driver, host="0" * 8))
        # a link named like a dead driver's folder, to a folder that must survive
        target = tmp_path / "target"
        target.mkdir()
        (target / "keep").write_text("x")
        link = tmp_path / f"{scratch.PREFIX}{dataclasses.replace(me, start='2').tag()}-link0000"
        link.symlink_to(target)
        stranger = None
        if os.geteuid() == 0:  # another user's folder, named like a dead driver's
            stranger = named(tmp_path, dataclasses.replace(me, start="3"), "strange0")
            os.chown(stranger, 65534, 65534)

        assert scratch.sweep(str(tmp_path)) == 4
        for folder in (reused, dead, earlier_boot, dead_build):
            assert not folder.exists(), folder.name
        assert live_build.is_dir() and by_hand.is_dir()
        for folder in (alive, other_host, running, below):
            assert (folder / "torchelastic_x").is_dir(), folder.name
        assert link.is_symlink() and (target / "keep").read_text() == "x"
        if stranger is not None:
            assert stranger.is_dir()
        for user in users:  # once what used them ended, they go too
            user.kill()
            user.wait()
        assert scratch.sweep(str(tmp_path)) == 2
        assert not running.exists() and not below.exists() and alive.is_dir()
    finally:
        for user in users:
            user.kill()
            user.wait()


def test_a_stop_while_torchrun_starts_leaves_no_launch_folder(tmp_path: Path, monkeypatch) -> None:
    """Ctrl-C that lands while the launch forks torchrun: no Process is returned to remove its
    folder later, so the launch removes it itself (the 5th black-box pass found it left)."""
    from kit.runtime.base import LaunchRequest
    from kit.runtime.containers import process
    from kit.shared import stop

    def interrupted(*args: object, **kwargs: object) -> None:
        raise stop.Interrupted  # as the kit's SIGINT handler raises it, mid-Popen

    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    monkeypatch.setattr(process.subprocess, "Popen", interrupted)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    req = LaunchRequest(run_dir, 1, {}, tmp_path / "log", 60, None, "cpu")
    with open(tmp_path / "log", "wb") as log, pytest.raises(KeyboardInterrupt):
        process.NoContainer().start(["true"], req, log)
    assert list(tmp.iterdir()) == []
