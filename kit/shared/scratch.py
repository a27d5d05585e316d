"""A host launch's own TMPDIR (`kit-launch-*`) and a Docker build's context (`kit-build-*`),
named for the driver that made them, and the sweep that removes those of drivers that died.

torchrun leaves its torchelastic_* folders in TMPDIR, so each host launch gets a folder of its
own there (TMPDIR of torchrun and its ranks), removed when the launch ends. A driver killed
outright (SIGKILL) runs nothing more: its folder stays. The folder's name says who made it
(the driver's pid and start time, this host and this boot); a later `kit reproduce` removes it
only when that driver is gone and no live process has the folder as its TMPDIR (torchrun and its
ranks, which may outlive the driver by seconds while they stop). A build context is the same:
a driver killed during `docker build` leaves it, with the wheels copied into it.
What the kit cannot prove abandoned (a folder of a live process, of another host or user, one
whose name is not the kit's) it leaves alone.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

PREFIX = "kit-launch-"
KINDS = ("launch", "build")  # a host launch's TMPDIR; a Docker build's context (kit.runtime.images)
# kit-KIND-PID-START-HOST-BOOT-XXXXXXXX (mkdtemp's eight characters)
NAME = re.compile(
    r"kit-(?:launch|build)-"
    r"(?P<pid>[1-9][0-9]{0,9})-(?P<start>[0-9]{1,20})-(?P<host>[0-9a-f]{8})-(?P<boot>[0-9a-f]{8})"
    r"-[a-z0-9_]{8}"
)


@dataclass(frozen=True)
class Owner:
    """A process on this host, this boot: what a folder's name records of its driver."""

    pid: int
    start: str  # /proc/PID/stat's starttime (clock ticks after boot): a reused pid differs
    host: str
    boot: str

    def tag(self) -> str:
        return f"{self.pid}-{self.start}-{self.host}-{self.boot}"


def _short(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def start_time(pid: int) -> str | None:
    """When process `pid` started (Linux: clock ticks after boot), None when there is none."""
    try:
        stat_line = Path(f"/proc/{pid}/stat").read_text()
    except (OSError, ValueError):
        return None
    fields = stat_line[stat_line.rfind(")") + 2 :].split()  # the name may hold spaces, ')'
    return fields[19] if len(fields) > 19 and fields[0] not in ("Z", "X") else None


def this_owner() -> Owner | None:
    """This process as an Owner; None where it cannot be told (not Linux): then folders are
    made without an owner and never swept."""
    start = start_time(os.getpid())
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return None
    if start is None or not boot:
        return None
    return Owner(os.getpid(), start, _short(os.uname().nodename), _short(boot))


def prefix(kind: str = "launch") -> str:
    """The start of a folder's name that says which driver made it (kit-KIND-PID-START-HOST-
    BOOT-), for tempfile's `prefix`; just kit-KIND- where the driver cannot be told."""
    assert kind in KINDS, kind
    owner = this_owner()
    return f"kit-{kind}-{owner.tag()}-" if owner else f"kit-{kind}-"


def make() -> str:
    """A new launch folder in TMPDIR, named for this driver (OSError when TMPDIR cannot hold
    one: full, unwritable)."""
    return tempfile.mkdtemp(prefix=prefix("launch"))


def in_use() -> set[str]:
    """The TMPDIR of every live process this user can read (/proc/PID/environ, resolved): a
    launch's torchrun and its ranks (each in a session of its own) hold their folder while any
    of them runs, also after their driver died."""
    found = set()
    try:
        pids = [e.name for e in os.scandir("/proc") if e.name.isdigit()]
    except OSError:
        return found
    for pid in pids:
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                variables = f.read().split(b"\0")  # a zombie's is empty
        except OSError:  # gone, or another user's
            continue
        for var in variables:
            if var.startswith(b"TMPDIR="):
                found.add(os.path.realpath(os.fsdecode(var[len(b"TMPDIR=") :])))
                break
    return found


def abandoned(folder: Path, me: Owner, used: set[str]) -> bool:
    """True only for a launch folder of a driver of this host that is gone, that no live
    process has as its TMPDIR (`used`: in_use's)."""
    m = NAME.fullmatch(folder.name)
    if m is None or m["host"] != me.host:
        return False  # not the kit's name, or another host's (a TMPDIR shared between hosts)
    try:
        st = folder.lstat()
    except OSError:
        return False
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
        return False  # a link, a file, or another user's
    if m["boot"] == me.boot and start_time(int(m["pid"])) == m["start"]:
        return False  # its driver still runs
    where = os.path.realpath(folder)
    return not any(u == where or u.startswith(where + os.sep) for u in used)


def sweep(root: str | None = None) -> int:
    """Remove the folders in TMPDIR (or `root`) that drivers killed outright left (launch
    folders, build contexts); the number removed."""
    me = this_owner()
    if me is None:
        return 0
    try:
        entries = [Path(e.path) for e in os.scandir(root or tempfile.gettempdir())]
    except OSError:
        return 0
    candidates = [f for f in entries if f.name.startswith(tuple(f"kit-{k}-" for k in KINDS))]
    used = in_use() if candidates else set()
    removed = 0
    for folder in candidates:
        if abandoned(folder, me, used):
            shutil.rmtree(folder, ignore_errors=True)
            removed += not os.path.lexists(folder)
    return removed
