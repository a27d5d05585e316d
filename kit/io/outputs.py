"""Files the user asks for (`kit accept --json FILE`, `kit compare --out DIR`): written only as
regular files in places the user named, checked before the work and after every write.

Inside a bundle, kit.io.safe replaces whatever stands at a name (a planted link is replaced, not
followed). A path the user names is different: what is there is the user's. A device
(`/dev/full`, `/dev/null`), a FIFO, a socket, a symbolic link or a folder at that name is refused,
never renamed over; so is a folder that is a bundle (its manifest would no longer match). The
folder must exist and be writable, and a write that fails (a full disk) or leaves a file of
another size is one line. All of these are exit 2: `kit accept` uses 1 for FAIL.

A folder is a bundle by what makes one (`is_bundle`): its results.json beside its manifest
(sealed) or beside its recipe.yaml (a run in progress writes both before the manifest); a
results.json of the user's own in a project folder makes no bundle.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path

from kit.io.errors import InputError, KitError
from kit.io.safe import kind, stat_or_refuse, write_bytes
from kit.shared import files
from kit.shared.atomic import write_atomic

# a bundle holds results.json and one of these: the manifest (sealed) or the recipe (in progress)
BUNDLE_MARKS = (files.MANIFEST, files.RECIPE)


def is_bundle(folder: Path) -> bool:
    """Whether `folder` is a kit bundle, sealed or being written (names only, links not
    followed: nothing of the folder is opened)."""
    folder = Path(folder)
    return os.path.lexists(folder / files.RESULTS) and any(
        os.path.lexists(folder / mark) for mark in BUNDLE_MARKS
    )


def check_file(path: Path, option: str) -> None:
    """Before the work: `path` is absent or a regular file, in a writable folder."""
    path = Path(path)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise InputError(f"{option} {path}: {e.strerror}") from None
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise InputError(
            f"{option} {path}: is a {kind(st.st_mode)}; the kit writes only a regular file there"
        )
    _check_folder(path.parent if str(path.parent) else Path("."), option, path)
    _refuse_bundle(path.parent, option, path)


def _refuse_bundle(folder: Path, option: str, path: Path) -> None:
    """No output inside a bundle: any folder up the path (links followed) that is one, sealed
    or not."""
    here = Path(folder).resolve()
    for d in (here, *here.parents):
        if is_bundle(d):
            raise InputError(
                f"{option} {path}: is inside the bundle {d}; the kit never writes into a bundle"
            )


def refuse_inside_bundle(path: Path, option: str) -> None:
    """Before anything is made: `path` (to be created, with its parents) is not inside a bundle
    nor one, judged from the first folder up the path (itself included) that exists."""
    path = Path(path)
    first = next((p for p in (path, *path.parents) if p.is_dir()), Path("."))
    _refuse_bundle(first, option, path)


def check_bundle_dir(path: Path, option: str = "--out") -> None:
    """Before the work: a new bundle's folder is what `check_dir` takes (absent or a real
    folder, never a link the kit would write through, not inside a bundle, under a writable
    folder), and empty. Unlike other outputs, a bundle's folder is made with its parents."""
    check_dir(path, option, make_parents=True)
    if Path(path).is_dir() and any(Path(path).iterdir()):
        raise InputError(f"{option} {path}: already exists and is not empty; choose another --out")


def _check_folder(folder: Path, option: str, path: Path) -> None:
    st = stat_or_refuse(
        folder,
        f"{option} {path}: no such folder {folder}",
        lambda why: f"{option} {path}: {folder}: {why}",
    )
    if not stat.S_ISDIR(st.st_mode):
        raise InputError(f"{option} {path}: {folder} is not a folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise InputError(f"{option} {path}: the folder {folder} is not writable for you")


def check_dir(
    path: Path, option: str, names: tuple[str, ...] = (), make_parents: bool = False
) -> None:
    """Before the work: an output folder that is absent (made later) or a real folder that is no
    bundle, whose `names` are absent or regular files. The folder that holds it exists and is
    writable (with `make_parents`, a new bundle's: the first existing folder up the path), and a
    folder can be made there (not so in /proc)."""
    path = Path(path)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        parent = path.parent if str(path.parent) else Path(".")
        if make_parents and not parent.exists():
            parent = next((p for p in path.parents if p.exists()), Path("."))
        _refuse_bundle(parent if parent.exists() else _first_existing(parent), option, path)
        _check_folder(parent, option, path)
        _probe(parent, path, option)
        return
    except OSError as e:  # under a file (/dev/null/x), a name too long, no permission
        raise InputError(f"{option} {path}: {e.strerror}") from None
    if not stat.S_ISDIR(st.st_mode):
        raise InputError(f"{option} {path}: is a {kind(st.st_mode)}, not a folder")
    if is_bundle(path):
        raise InputError(f"{option} {path}: is a bundle; the kit never writes into one")
    _check_folder(path, option, path)
    _refuse_bundle(path, option, path)
    for name in names:
        check_file(path / name, option)


def _first_existing(path: Path) -> Path:
    return next((p for p in (path, *path.parents) if p.is_dir()), Path("."))


def _probe(parent: Path, path: Path, option: str) -> None:
    """Make and remove the folder the kit will make in `parent` (the first missing one of
    `path`), so that a place where none can be made (/proc, a read-only mount) is refused
    before any notice or work, not after."""
    first = next((p for p in (path, *path.parents) if p.parent == parent), None)
    if first is None:
        return
    try:
        os.mkdir(first)
    except FileExistsError:  # made meanwhile: checked again where it is written
        return
    except OSError as e:
        raise InputError(f"{option} {path}: cannot make a folder there ({e.strerror})") from None
    os.rmdir(first)


def write(path: Path, data: bytes, option: str) -> None:
    """Write `data` to the user's `path` (checked again: it may have changed during the work),
    then check that the file there is a regular file of that size."""
    check_file(path, option)
    try:
        write_bytes(path, data)
    except KitError as e:
        raise InputError(f"{option} {e}") from None
    _check_written(path, len(data), option)


def _check_written(path: Path, size: int, option: str) -> None:
    try:
        st = os.lstat(path)
    except OSError as e:
        raise InputError(f"{option} {path}: not written ({e.strerror})") from None
    if not stat.S_ISREG(st.st_mode) or st.st_size != size:
        raise InputError(f"{option} {path}: not written whole ({st.st_size} of {size} bytes)")


class _SourceFailed(Exception):
    """What the chunks' source raised, carried past the file's OSError handling: the Docker SDK's
    errors are OSErrors too (requests' exceptions derive from IOError), and a daemon's "no space
    left on device" must reach the caller as the daemon's words, not as "not written: None"."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(error)
        self.error = error


def _marked(chunks: Iterable[bytes]) -> Iterator[bytes]:
    source = iter(chunks)
    while True:
        try:
            chunk = next(source)
        except StopIteration:
            return
        except Exception as e:
            raise _SourceFailed(e) from e
        yield chunk


def write_stream(path: Path, chunks: Iterable[bytes], option: str) -> None:
    """Write `chunks` (too many bytes to hold: an image archive) to the user's `path`, checked
    before, again just before the temporary file beside it is renamed into place, and after.
    An error of the file is one line here; an error of the source is raised as it came (its
    caller words it), the temporary file removed either way."""
    check_file(path, option)
    try:
        size = write_atomic(path, _marked(chunks), check=lambda: check_file(path, option))
    except _SourceFailed as e:
        raise e.error from None
    except OSError as e:
        why = "the disk is full" if e.errno in (errno.ENOSPC, errno.EDQUOT) else e.strerror
        raise InputError(f"{option} {path}: not written: {why or e}") from None
    _check_written(path, size, option)


def write_text(path: Path, text: str, option: str) -> None:
    write(path, text.encode("utf-8"), option)


def to_stdout(lines: Iterable[str], what: str) -> None:
    """Print `lines` and flush them, or refuse in one line (InputError, exit 2) when standard
    output is closed or its reader went away (`| true`, `>&-`): a verdict that was not written
    must not read as one (accept's exit codes are its verdicts)."""
    import sys

    out = sys.stdout
    try:
        if out is None:
            raise BrokenPipeError(errno.EBADF, "closed")
        for line in lines:
            out.write(line)
        out.flush()
    except (OSError, ValueError) as exc:
        with contextlib.suppress(OSError, ValueError, AttributeError):  # nothing more to flush
            os.dup2(os.open(os.devnull, os.O_WRONLY), out.fileno())  # at exit
        raise InputError(
            f"standard output is closed or nobody reads it: {what} was not "
            f"written ({getattr(exc, 'strerror', None) or exc})"
        ) from None
