"""The machine as ordered: `kit report BUNDLE --ordered "4x H200 SXM 141GB 700W"`.

Without an order, page 1 can only check the machine against itself (every GPU the same model,
the same memory). With one, it checks the count, the model (by kit's datasheet table,
kit.shared.gpu_specs), the memory and the board power the buyer paid for. The words are the
ones a quote uses: a count (`4x`), a model, memory in GB as vendors write it (141GB for an H200,
whose driver reports 140.4 GiB usable), a power rating in W. Only the model is required.
`--ordered @FILE` reads the same words from a file (the quote's line kept beside the purchase
order): its lines joined, those starting with # left out.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass, replace
from pathlib import Path

from kit.io.errors import InputError
from kit.io.safe import kind
from kit.shared.gpu_specs import SPECS, GpuSpec, spec_for

MAX_TEXT = 200
MAX_FILE = 4096  # an order's words and its comments; a larger file is not one
COUNT = re.compile(r"^\s*(\d{1,4})\s*[x×]\s*", re.IGNORECASE)
MEMORY = re.compile(r"\b(\d{1,4}(?:\.\d+)?)\s*(?:GB|GiB)\b", re.IGNORECASE)
POWER = re.compile(r"\b(\d{2,5})\s*W\b")
MEMORY_SLACK = 0.03
"""How far under the ordered figure the driver's usable memory may read: it keeps a little
for itself (an H200 sold as 141 GB reports 140.4 GiB, an H100 sold as 80 GB 79.6 GiB)."""


@dataclass(frozen=True)
class Order:
    """What was ordered, as the user wrote it and as kit reads it."""

    text: str
    spec: GpuSpec
    count: int | None = None
    memory_gb: float | None = None
    power_w: float | None = None
    source: str = ""  # the file it was read from (`--ordered @FILE`); "" when given as words


def parse_order(text: str, option: str = "--ordered") -> Order:
    """An Order from a quote's words; one line naming what is wrong otherwise."""
    if not text.strip() or len(text) > MAX_TEXT or not text.isprintable():
        raise InputError(
            f'{option}: give the order in a quote\'s words, e.g. "4x H200 SXM 141GB 700W" '
            f"(at most {MAX_TEXT} printable characters)"
        )
    rest = text
    count = None
    if m := COUNT.match(rest):
        count = int(m.group(1))
        if count < 1:
            raise InputError(f"{option}: {text!r}: a count of {count} GPUs")
        rest = rest[m.end() :]
    memory = None
    if m := MEMORY.search(rest):
        memory = float(m.group(1))
        rest = rest[: m.start()] + rest[m.end() :]
    power = None
    if m := POWER.search(rest):
        power = float(m.group(1))
        rest = rest[: m.start()] + rest[m.end() :]
    model = " ".join(rest.split())
    spec = spec_for(model) if model else None
    if spec is None:
        known = ", ".join(s.key for s in SPECS)
        raise InputError(
            f"{option}: {text!r}: {model or 'no GPU model'} is not a GPU of kit's datasheet "
            f"table ({known})"
        )
    return Order(
        text=" ".join(text.split()), spec=spec, count=count, memory_gb=memory, power_w=power
    )


def read_order(value: str, option: str = "--ordered") -> Order:
    """The order from the option's value: its words, or `@FILE`'s (its lines joined, # lines left
    out); one line naming what is wrong with the file otherwise."""
    if not value.startswith("@"):
        return parse_order(value, option)
    name = value[1:]
    if not name:
        raise InputError(f"{option} @: name the file after @, e.g. {option} @order.txt")
    path = Path(name)
    try:
        st = os.stat(path)  # a link the user made to their order is followed
    except OSError as exc:
        raise InputError(f"{option} @{name}: cannot read it ({exc.strerror})") from None
    if not stat.S_ISREG(st.st_mode):
        raise InputError(f"{option} @{name}: not a regular file ({kind(st.st_mode)})")
    too_big = f"{option} @{name}: more than {MAX_FILE} bytes; an order's words fit in {MAX_FILE}"
    if st.st_size > MAX_FILE:
        raise InputError(too_big)
    try:  # O_NONBLOCK and a second look, as a recipe is read (kit.recipe.yamlfile.read_text):
        # a file swapped for a FIFO since the stat cannot hang
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise InputError(f"{option} @{name}: not a regular file")
            data = f.read(MAX_FILE + 1)
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        why = "not UTF-8 text" if isinstance(exc, UnicodeDecodeError) else exc.strerror
        raise InputError(f"{option} @{name}: cannot read it ({why})") from None
    if len(data) > MAX_FILE:  # grown since, or a /proc file, whose size reads 0
        raise InputError(too_big)
    words = " ".join(
        line.strip()
        for line in text.splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    )
    order = parse_order(words, f"{option} @{name}")
    return replace(order, source=name)
