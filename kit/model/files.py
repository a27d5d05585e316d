"""Reading one file of an untrusted bundle: no links followed, nothing but regular files, bounded.

Every path is opened component by component below the bundle's directory with O_NOFOLLOW, so a
symlink anywhere inside the bundle (a file, `runs/`, a run's folder) is refused rather than
followed; O_NONBLOCK keeps a FIFO from hanging the open, and fstat refuses anything that is not
a regular file. Each problem is one InputError line naming the file.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from kit.io.errors import InputError
from kit.io.safe import bundle_kind

MAX_JSON_BYTES = 64 << 20
"""Largest JSON file a bundle may hold (the largest committed results.json is under 1 MiB)."""
MAX_YAML_BYTES = 1 << 20
"""Largest recipe.yaml (the same cap as a recipe file: kit.recipe.MAX_RECIPE_BYTES)."""
MAX_DEPTH = 64
"""Deepest nesting of JSON arrays and objects (the kit writes at most about 8)."""

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)


def _open_dir(parent_fd: int, name: str, shown: Path) -> int:
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=parent_fd)
    except OSError as exc:
        raise InputError(f"{shown}: {_why(exc, parent_fd, name, 'a directory')}") from None


def _why(exc: OSError, parent_fd: int, name: str, expected: str) -> str:
    """One phrase for a failed open: what is there instead of what was expected."""
    if exc.errno == errno.ENOENT:
        return "missing"
    try:
        mode = os.lstat(name, dir_fd=parent_fd).st_mode
    except OSError:
        return exc.strerror or "cannot be opened"
    if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK) or stat.S_ISLNK(mode):
        return f"is {bundle_kind(mode)}, expected {expected}"
    return exc.strerror or "cannot be opened"


_RECORDED: ContextVar[tuple[Path, dict[str, str]] | None] = ContextVar("recorded", default=None)


@contextmanager
def as_recorded(root: Path, recorded: dict[str, str]) -> Iterator[None]:
    """Inside this block every file read from `root` is hashed as read and must match
    `recorded` (its manifest): a file swapped after the manifest check is refused, never read
    as valid (kit.bundle.intake.receive)."""
    token = _RECORDED.set((Path(root), recorded))
    try:
        yield
    finally:
        _RECORDED.reset(token)


def _check_recorded(root: Path, rel: str, data: bytes) -> None:
    held = _RECORDED.get()
    if held is None or held[0] != Path(root):
        return
    want = held[1].get(rel)
    if want is None or hashlib.sha256(data).hexdigest() != want:
        how = "is not in its manifest" if want is None else "does not match its manifest"
        raise InputError(
            f"{root / rel}: changed while it was read (what was read {how}); "
            "the bundle changed after its check, nothing of it was used"
        )


def read_bytes(root: Path, rel: str, limit: int) -> bytes:
    """The bytes of `root/rel`, refusing links, non-regular files and files over `limit` bytes."""
    shown = root / rel
    parts = rel.split("/")
    try:
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise InputError(f"{root}: not a bundle directory ({exc.strerror})") from None
    try:
        for i, part in enumerate(parts[:-1]):
            nxt = _open_dir(fd, part, root.joinpath(*parts[: i + 1]))
            os.close(fd)
            fd = nxt
        try:
            file_fd = os.open(parts[-1], _FILE_FLAGS, dir_fd=fd)
        except OSError as exc:
            raise InputError(f"{shown}: {_why(exc, fd, parts[-1], 'a regular file')}") from None
    finally:
        os.close(fd)
    info = os.fstat(file_fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(file_fd)
        raise InputError(f"{shown}: is {bundle_kind(info.st_mode)}, expected a regular file")
    with os.fdopen(file_fd, "rb") as f:
        if info.st_size > limit:
            raise InputError(f"{shown}: {info.st_size} bytes is over the {limit}-byte limit")
        data = f.read(limit + 1)
    if len(data) > limit:
        raise InputError(f"{shown}: over the {limit}-byte limit")
    _check_recorded(root, rel, data)
    return data


def decode(data: bytes, shown: Path) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise InputError(
            f"{shown}:{line}: not valid UTF-8 (byte 0x{data[exc.start]:02x})"
        ) from None


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


MAX_NUMBER = 1e30
"""Largest magnitude of a number in a bundle. No measurement comes near it (a FLOP count per
step is about 1e17); past it, a median's sum or a ratio overflows to infinity, which is not
JSON and prints as "inf"."""


def _finite_float(text: str) -> float:
    value = float(text)
    if not abs(value) <= MAX_NUMBER:
        raise ValueError(
            f"{text[:20]} is beyond ±{MAX_NUMBER:g} (no measured number is that large)"
        )
    return value


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > 30:  # more than 1e30: the same bound as a float
        raise ValueError(
            f"{text[:20]}... is beyond ±{MAX_NUMBER:g} (no measured number is that large)"
        )
    return int(text)


_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
CONTROL = re.compile(r"[\x00-\x1f\x7f]")
"""C0 controls and DEL: line breaks, NUL, ESC, tab."""


def one_line(text: str) -> str:
    """`text` with control characters escaped: a hostile name cannot break the one-line rule."""
    return CONTROL.sub(lambda m: repr(m.group())[1:-1], text)


def _depth(text: str) -> int:
    """The deepest bracket nesting, outside strings (checked before parsing: no RecursionError)."""
    depth = deepest = 0
    for ch in _NOT_BRACKET.sub("", _STRING.sub("", text)):
        if ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth -= 1
    return deepest


def parse_json(text: str, shown: Path) -> Any:
    """Strict JSON: no NaN or Infinity, no number beyond ±MAX_NUMBER, no duplicate keys at any
    depth, nesting at most MAX_DEPTH."""
    if _depth(text) > MAX_DEPTH:
        raise InputError(f"{shown}: nested deeper than {MAX_DEPTH} levels")
    try:
        return json.loads(
            text,
            parse_constant=_refuse_constant,
            parse_float=_finite_float,
            parse_int=_bounded_int,
            object_pairs_hook=_no_duplicates,
        )
    except json.JSONDecodeError as exc:
        raise InputError(
            f"{shown}:{exc.lineno}: not valid JSON ({exc.msg}, column {exc.colno})"
        ) from None
    except ValueError as exc:
        raise InputError(f"{shown}: not valid JSON ({exc})") from None
    except RecursionError:
        raise InputError(f"{shown}: nested too deeply to read") from None


MAX_TEXT = 1 << 16
"""Longest text in a bundle's JSON (a key, a value, an item of a list): no field the kit writes
comes near it (the longest seen, an image's CUDA requirement, is about 2,200 characters), and a
megabyte-long name would stall every page that prints it."""


def _long(text: Any) -> bool:
    return isinstance(text, str) and len(text) > MAX_TEXT


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {key[:40]!r}")
        texts = value if isinstance(value, list) else [value]
        if _long(key) or any(_long(t) for t in texts):
            raise ValueError(
                f"a text of more than {MAX_TEXT:,} characters at {key[:40]!r} "
                "(no field the kit writes is that long)"
            )
        out[key] = value
    return out


def read_json(root: Path, rel: str) -> Any:
    """`root/rel` read safely and parsed strictly."""
    shown = root / rel
    return parse_json(decode(read_bytes(root, rel, MAX_JSON_BYTES), shown), shown)


def list_dir(root: Path, rel: str) -> list[str]:
    """Names in `root/rel` (a real directory, not a link), sorted; [] when it is absent."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
    try:
        for i, part in enumerate(rel.split("/")):
            try:
                nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                return []
            except OSError as exc:
                shown = root.joinpath(*rel.split("/")[: i + 1])
                raise InputError(f"{shown}: {_why(exc, fd, part, 'a directory')}") from None
            os.close(fd)
            fd = nxt
        return sorted(os.listdir(fd))
    finally:
        os.close(fd)
