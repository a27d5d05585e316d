"""What the kit writes to a terminal: never a control sequence that came from a bundle.

A bundle, a recipe or a label is written by someone else. A file name or a manifest line that
holds ESC, CR or an OSC sequence could move the cursor, erase the real error and print "OK" in
its place, set the window title, or hide text (SGR conceal); a bidi override (U+202E) reorders
what a reader sees. So `kit` writes through `SafeStream` (installed on stdout and stderr by
kit.cli.main): every control character but newline and tab, every C1 control and every bidi or
invisible format character is written as an escape (`\\x1b`, `\\r`, `\\u202e`), ESC included.

The kit's own colours come from rich, through `console()`: a rich Console that escapes the text
of everything it renders (markup, tables, any string) the same way, then adds its own styles and
writes to the stream beneath SafeStream. `escape()` also escapes newline and tab: a name is one
line.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import sys
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from rich.console import Console

# C0 but newline and tab, DEL, C1; bidi marks, embeddings, overrides and isolates; zero-width
# and other invisible format characters; line and paragraph separators
_UNSAFE = (
    "\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff\ufff9-\ufffb"
    "\ud800-\udfff"  # lone surrogates: undecodable bytes of a file name (os.fsdecode)
)
_STREAM = re.compile(rf"[{_UNSAFE}]")
_ANY = re.compile(rf"[{_UNSAFE}\n\t]")


def _code(ch: str) -> str:
    if ch in "\n\r\t":
        return {"\n": "\\n", "\r": "\\r", "\t": "\\t"}[ch]
    n = ord(ch)
    return f"\\x{n:02x}" if n < 0x100 else f"\\u{n:04x}"


def escape(text: object) -> str:
    """`text` as one line with every control, bidi and invisible format character escaped."""
    return _ANY.sub(lambda m: _code(m.group()), str(text))


def escape_stream(text: str) -> str:
    """`text` as SafeStream writes it: newlines and tabs kept, every other control escaped."""
    return _STREAM.sub(lambda m: _code(m.group()), text)


def printed(value: Any) -> Any:
    """A value a page prints (the report's templates' `finalize`), escaped as escape_stream does;
    markup the kit made (anything with `__html__`) stays markup of the same type."""
    if hasattr(value, "__html__"):
        return type(value)(escape_stream(str(value)))
    return escape_stream(value) if isinstance(value, str) else value


class SafeStream:
    """A text stream that escapes what it is given (escape_stream) before writing it on.

    No `buffer` attribute: a writer that would go around the text layer (click looks for one)
    writes through this one instead.
    """

    def __init__(self, inner: TextIO) -> None:
        self._inner = inner

    @property
    def inner(self) -> TextIO:
        """The stream beneath: only `console()` writes to it, after escaping its text."""
        return self._inner

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


def settle() -> None:
    """Flush stdout and stderr before the exit; a stream whose terminal is gone (a closed pty:
    EIO) is pointed at /dev/null, so that Python's own flush at exit cannot turn the command's
    exit code into 120."""
    for name, fd in (("stdout", 1), ("stderr", 2)):
        stream = getattr(sys, name)
        if stream is None:
            continue
        try:
            stream.flush()
        except (OSError, ValueError):
            with contextlib.suppress(OSError):
                null = os.open(os.devnull, os.O_WRONLY)
                os.dup2(null, fd)
                os.close(null)


class _Beneath:
    """The stream beneath SafeStream (sys.stdout or sys.stderr, looked up at each write)."""

    def __init__(self, stderr: bool) -> None:
        self._stderr = stderr

    def _stream(self) -> TextIO:
        stream = sys.stderr if self._stderr else sys.stdout
        return stream.inner if isinstance(stream, SafeStream) else stream

    def write(self, text: str) -> int:
        return self._stream().write(text)

    def flush(self) -> None:
        self._stream().flush()

    def isatty(self) -> bool:
        return self._stream().isatty()

    def fileno(self) -> int:
        return self._stream().fileno()

    @property
    def encoding(self) -> str:
        return getattr(self._stream(), "encoding", None) or "utf-8"


@functools.cache
def _safe_console() -> type[Console]:
    """A rich Console that escapes the text of every segment it renders (escape_stream) before
    it adds its own styles: the colours are the kit's, the text can hold no control sequence.
    rich is imported here, when the kit first colours something: `kit --help` and `kit recipes
    validate` never do (40 ms of their start-up, issue 46)."""
    from rich.console import Console
    from rich.segment import Segment

    class SafeConsole(Console):
        def _render_buffer(self, buffer: Any) -> str:
            safe = (s if s.control else Segment(escape_stream(s.text), s.style) for s in buffer)
            return super()._render_buffer(safe)

    return SafeConsole


def console(stderr: bool = True, **options: Any) -> Console:
    """The kit's rich console: coloured on a terminal, every rendered text escaped."""
    return _safe_console()(file=_Beneath(stderr), **options)  # type: ignore[arg-type]
