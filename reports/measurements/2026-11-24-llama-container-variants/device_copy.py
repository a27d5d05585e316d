"""Edits to the kit's source for an experiment, made only in a device call's copy of the tree.

The device scripts that switch things on for one experiment (container_variants.py,
step_stats.py) share this: refuse outside a copy (KIT_DEVICE_COPY=1), do nothing twice, and
change nothing unless every line to change is found exactly once.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path


def edit_copy(
    script: str,
    path: Path,
    edits: list[tuple[str, str]],
    marker: str,
    what: str,
    also: Callable[[], None] | None = None,
) -> int:
    """Apply `edits` (old, new) to `path`; `marker` in the file means they are in already.
    `also` runs once the edits are known to apply (a module of the experiment's own, say).
    The exit status: 0 done or already done, 2 refused or a line not found."""
    if os.environ.get("KIT_DEVICE_COPY") != "1":
        print(
            f"{script} edits the kit's source: run it only in a device call's copy "
            "(KIT_DEVICE_COPY=1)",
            file=sys.stderr,
        )
        return 2
    text = path.read_text()
    if marker in text:
        print(f"{path}: {what} already in")
        return 0
    for old, new in edits:
        if text.count(old) != 1:
            print(f"{path}: cannot find the line to change: {old.strip()[:80]}", file=sys.stderr)
            return 2
        text = text.replace(old, new)
    if also is not None:
        also()
    path.write_text(text)
    print(f"{path}: {what} in")
    return 0
