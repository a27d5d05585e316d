"""What the kit writes to a terminal: never a control sequence that came from a bundle.

A bundle, a recipe or a label is written by someone else. A file name or a manifest line that
holds ESC, CR or an OSC sequence could move the cursor, erase the real error and print "OK" in
its place, or set the window title; a bidi override (U+202E) reorders what a reader sees. So
`kit` writes through `SafeStream` (installed on stdout and stderr by kit.cli.main): every
control character but newline and tab, every C1 control and every bidi or invisible format
character is written as an escape (`\\x1b`, `\\r`, `\\u202e`). The one sequence let through is
SGR (`ESC [ ... m`, colour), which rich writes for the kit's own coloured lines on a terminal;
strings from a bundle are escaped with `escape()` where they are formatted, so they never hold
one by then. `escape()` also escapes newline and tab: a name is one line.
"""

from __future__ import annotations

import re
import sys
from typing import Any, TextIO

# C0 but newline and tab, DEL, C1; bidi marks, embeddings, overrides and isolates; zero-width
# and other invisible format characters; line and paragraph separators
_UNSAFE = (
    "\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff\ufff9-\ufffb"
    "\ud800-\udfff"  # lone surrogates: undecodable bytes of a file name (os.fsdecode)
)
_STREAM = re.compile(rf"\x1b\[[0-9;]{{0,32}}m|[{_UNSAFE}]")
_ANY = re.compile(rf"[{_UNSAFE}\n\t]")


def _code(ch: str) -> str:
    if ch in "\n\r\t":
        return {"\n": "\\n", "\r": "\\r", "\t": "\\t"}[ch]
    n = ord(ch)
    return f"\\x{n:02x}" if n < 0x100 else f"\\u{n:04x}"


def escape(text: object) -> str:
    """`text` as one line with every control, bidi and invisible format character escaped."""
    return _ANY.sub(lambda m: _code(m.group()), str(text))


def _stream_sub(m: re.Match[str]) -> str:
    s = m.group()
    return s if len(s) > 1 else _code(s)


def escape_stream(text: str) -> str:
    """`text` as SafeStream writes it: newlines, tabs and SGR colour kept, the rest escaped."""
    return _STREAM.sub(_stream_sub, text)


class SafeStream:
    """A text stream that escapes what it is given (escape_stream) before writing it on.

    No `buffer` attribute: a writer that would go around the text layer (click looks for one)
    writes through this one instead.
    """

    def __init__(self, inner: TextIO) -> None:
        self._inner = inner

    def write(self, text: str) -> int:
        self._inner.write(escape_stream(text))
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        self._inner.flush()

    def isatty(self) -> bool:
        return self._inner.isatty()

    def fileno(self) -> int:
        return self._inner.fileno()

    def writable(self) -> bool:
        return True

    def readable(self) -> bool:
        return False

    @property
    def encoding(self) -> str:
        return getattr(self._inner, "encoding", None) or "utf-8"

    @property
    def errors(self) -> str:
        return getattr(self._inner, "errors", None) or "strict"

    @property
    def closed(self) -> bool:
        return self._inner.closed


def install() -> None:
    """Route sys.stdout and sys.stderr through SafeStream (once; kit.cli.main calls it)."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is not None and not isinstance(stream, SafeStream):
            setattr(sys, name, SafeStream(stream))
