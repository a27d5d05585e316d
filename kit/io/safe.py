"""Files inside a bundle, written safely and read strictly.

A bundle may come from anyone (a vendor, a colleague, a stranger): the kit never writes through
a link it finds there, never reads through one, and never mistakes a FIFO, a device or a socket
for a file. Every write creates a new file under a temporary name in the same folder
(O_CREAT|O_EXCL|O_NOFOLLOW), fsyncs it and renames it over the old name, so a link planted at
that name is replaced, not followed, and a reader never sees half a file. A failed write (a full
disk) removes its temporary file and is one line.

Standard library only.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kit.io.errors import InputError, KitError
from kit.shared.atomic import write_atomic

MAX_READ_BYTES = 256 << 20  # no bundle file the kit reads is anywhere near this


def _check_parents(path: Path) -> None:
    """Refuse a write whose folder (below an existing real one) is a link or not a folder."""
    parent = path.parent
    try:
        st = os.lstat(parent)
    except FileNotFoundError:
        raise KitError(f"{parent}: no such folder") from None
    if stat.S_ISLNK(st.st_mode):
        raise InputError(f"{parent}: is a symbolic link; the kit writes nothing through links")
    if not stat.S_ISDIR(st.st_mode):
        raise InputError(f"{parent}: not a folder")


def write_bytes(path: Path, data: bytes) -> None:
    """Create `path` anew with `data` (kit.shared.atomic: temp file, fsync, rename into place),
    its folder checked first; a failure is one line."""
    path = Path(path)
    _check_parents(path)
    try:
        write_atomic(path, data)
    except OSError as exc:
        why = "the disk is full" if exc.errno in (errno.ENOSPC, errno.EDQUOT) else exc.strerror
        raise KitError(f"{path}: not written: {why}") from None


def write_text(path: Path, text: str) -> None:
    write_bytes(path, text.encode("utf-8"))


def read_bytes(path: Path, limit: int = MAX_READ_BYTES) -> bytes:
    """A regular file's bytes, never through a link, never blocking on a FIFO or a device."""
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise InputError(f"{path}: is a symbolic link; the kit reads no links") from None
        raise InputError(f"{path}: cannot read ({exc.strerror})") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise InputError(f"{path}: not a regular file ({kind(st.st_mode)})")
        if st.st_size > limit:
            raise InputError(f"{path}: {st.st_size} bytes is more than the {limit} the kit reads")
        return f.read(limit + 1)[:limit]


_KINDS = (  # the test, its word, and the phrase a bundle file's reader says (kit.model.files)
    (stat.S_ISLNK, "symbolic link", "a symlink"),
    (stat.S_ISFIFO, "FIFO", "a FIFO"),
    (stat.S_ISSOCK, "socket", "a socket"),
    (stat.S_ISCHR, "character device", "a device"),
    (stat.S_ISBLK, "block device", "a device"),
    (stat.S_ISDIR, "folder", "a directory"),
    (stat.S_ISREG, "file", "not a regular file"),
)


def kind(mode: int) -> str:
    """A file type in words, for error messages."""
    return next((word for test, word, _ in _KINDS if test(mode)), "unknown file type")


def bundle_kind(mode: int) -> str:
    """A file type as a bundle file's reader names what stands where it expected another
    ("is a symlink, expected a regular file")."""
    return next((said for test, _, said in _KINDS if test(mode)), "not a regular file")


def stat_or_refuse(path: Path, missing: str, failed: Callable[[str], str]) -> os.stat_result:
    """`path`'s stat, links followed, for a path the user named: nothing there is the one line
    `missing`, any other failure the line `failed` makes of the system's reason."""
    try:
        return os.stat(path)
    except FileNotFoundError:
        raise InputError(missing) from None
    except OSError as exc:
        raise InputError(failed(exc.strerror)) from None


@dataclass
class Tree:
    """Every entry under a folder, found without following links: what the manifest must cover."""

    files: list[str] = field(default_factory=list)  # regular files, relative POSIX paths
    empty_dirs: list[str] = field(default_factory=list)  # "name/"
    odd: list[str] = field(default_factory=list)  # "name (symbolic link)" and the like

    def odd_line(self) -> str:
        return ", ".join(self.odd)


def _bad_name(name: str) -> bool:
    return any(ord(c) < 32 or c in "\\\x7f" for c in name)


def scan(root: Path) -> Tree:
    """Walk `root` with lstat only: links, FIFOs, devices, sockets and odd names are `odd`."""
    tree = Tree()

    def walk(folder: Path, rel: str) -> int:
        count = 0
        with os.scandir(folder) as entries:
            for entry in sorted(entries, key=lambda e: e.name):
                name = f"{rel}{entry.name}"
                count += 1
                try:
                    mode = entry.stat(follow_symlinks=False).st_mode
                except FileNotFoundError:  # removed or renamed away while it was listed
                    raise InputError(
                        f"{Path(root) / name}: changed while it was read (gone "
                        "as it was listed); read it again when nothing writes "
                        "there"
                    ) from None
                if _bad_name(entry.name):
                    tree.odd.append(f"{name!a} (a name with control characters)")
                elif stat.S_ISDIR(mode):
                    if walk(Path(entry.path), name + "/") == 0:
                        tree.empty_dirs.append(name + "/")
                elif stat.S_ISREG(mode):
                    tree.files.append(name)
                else:
                    tree.odd.append(f"{name} ({kind(mode)})")
        return count

    walk(Path(root), "")
    return tree


def check_folder(root: Path) -> None:
    """Refuse a bundle path that is not a folder, and a bundle holding links, FIFOs or devices."""
    root = Path(root)
    if not root.is_dir():
        raise InputError(f"{root}: not a kit bundle (not a folder)")
    odd = scan(root).odd
    if odd:
        raise InputError(
            f"{root}: holds entries that are not regular files or folders: {', '.join(odd)}; "
            "the kit reads no links, FIFOs, devices or sockets in a bundle"
        )
