"""Reading recipe YAML strictly: regular files only, no aliases, no deep nesting, no duplicate
keys, and a map from every value's path to its line so that errors can point at it."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import yaml

from kit.io.errors import InputError
from kit.io.safe import kind, stat_or_refuse

MAX_RECIPE_BYTES = 1 << 20
MAX_DEPTH = 32  # YAML nesting; a recipe needs about 6


def shown_tag(tag: str) -> str:
    """A tag as it was written: `!!int`, not `tag:yaml.org,2002:int`."""
    return tag.replace("tag:yaml.org,2002:", "!!")


class StrictLoader(yaml.SafeLoader):
    """SafeLoader that also refuses aliases: a recipe never needs them, and they make bombs."""

    depth = 0

    def compose_node(self, parent, index):  # type: ignore[no-untyped-def]
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.MarkedYAMLError(
                problem="YAML aliases (*name) are not allowed in recipes",
                problem_mark=event.start_mark,
            )
        if self.depth >= MAX_DEPTH:
            raise yaml.MarkedYAMLError(
                problem=f"nested more than {MAX_DEPTH} levels deep",
                problem_mark=self.peek_event().start_mark,
            )
        event = self.peek_event()
        if getattr(event, "tag", None) is not None:  # `!!int '1'` turns a word into a number
            raise yaml.MarkedYAMLError(
                problem=f"YAML tags are not allowed in recipes ('{shown_tag(event.tag)}'): write the value "
                "itself",
                problem_mark=event.start_mark,
            )
        self.depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


def line_map(node: yaml.Node, path: tuple = (), out: dict | None = None) -> dict[tuple, int]:
    """Map each value's path (keys and list indices) to its 1-based line; reject duplicate keys."""
    out = {} if out is None else out
    out[path] = node.start_mark.line + 1
    _check_tag(node, path)
    if isinstance(node, yaml.MappingNode):
        seen: set = set()
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):  # `? [a, b]`: a list or map as a key
                raise LocatedError(
                    key_node.start_mark.line + 1,
                    ".".join(map(str, path)) or "(top)",
                    "a key must be a plain word, not a list or a mapping",
                )
            _check_tag(key_node, path)
            key = key_node.value
            if key in seen:
                raise LocatedError(
                    key_node.start_mark.line + 1, ".".join(map(str, (*path, key))), "duplicate key"
                )
            seen.add(key)
            out[(*path, key)] = key_node.start_mark.line + 1
            line_map(value_node, (*path, key), out)
            out[(*path, key)] = key_node.start_mark.line + 1
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            line_map(item, (*path, i), out)
    return out


PLAIN_TAGS = {
    f"tag:yaml.org,2002:{t}" for t in ("str", "int", "float", "bool", "null", "seq", "map")
}
"""What a recipe holds: words, numbers, booleans, nulls, lists and mappings; no `!!binary`,
`!!set`, `!!timestamp` or any other tag."""


MAX_INT_CHARS = 40
"""Longest integer written in a recipe: every count is bounded far below (Python also refuses to
read one of more than 4,300 digits, with an error that is no line of the kit's)."""


def _check_tag(node: yaml.Node, path: tuple) -> None:
    where = ".".join(map(str, path)) or "(top)"
    if node.tag not in PLAIN_TAGS:
        raise yaml.MarkedYAMLError(
            problem=f"YAML tags that construct objects are not allowed ('{node.tag}')",
            problem_mark=node.start_mark,
        )
    if node.tag.endswith(":int") and len(str(node.value)) > MAX_INT_CHARS:
        raise LocatedError(
            node.start_mark.line + 1,
            where,
            f"{str(node.value)[:20]}...: a number of {len(str(node.value)):,} characters (no "
            "count in a recipe comes near it)",
        )
    if node.tag.endswith(":float"):
        try:
            value = float(
                str(node.value).replace("_", "").replace(".inf", "inf").replace(".nan", "nan")
            )
        except ValueError:
            return
        if value != value or value in (float("inf"), float("-inf")):
            raise LocatedError(
                node.start_mark.line + 1, where, f"{node.value}: not a finite number"
            )


class LocatedError(Exception):
    def __init__(self, line: int, field: str, message: str) -> None:
        self.line, self.field, self.message = line, field, message


def read_text(path: Path) -> str:
    """The recipe's text; a FIFO, device or folder is refused before it is opened (no hang)."""
    st = stat_or_refuse(path, f"{path}: no such file", lambda why: f"{path}: cannot read ({why})")
    if stat.S_ISDIR(st.st_mode):
        raise InputError(f"{path}: is a directory, expected a recipe YAML file")
    if not stat.S_ISREG(st.st_mode):
        raise InputError(f"{path}: not a regular file ({kind(st.st_mode)}); expected a recipe")
    size = st.st_size
    if size > MAX_RECIPE_BYTES:
        raise InputError(
            f"{path}: {size} bytes is too large for a recipe (limit {MAX_RECIPE_BYTES})"
        )
    try:  # O_NONBLOCK and a second look: a file swapped for a FIFO in between still cannot hang
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror})") from None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise InputError(f"{path}: not a regular file; expected a recipe")
        raw = f.read(MAX_RECIPE_BYTES + 1)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise InputError(f"{path}:{line}: not valid UTF-8 (byte 0x{raw[exc.start]:02x})") from None
