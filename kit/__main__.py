"""`kit` and `python -m kit`: the version answers before the CLI is built.

`kit --version` is what a script or a bug report asks first; building the CLI (typer, rich and
every command's signature) would take most of its time (issue 46). Everything else goes to
kit.cli, imported only then.
"""

from __future__ import annotations

import os
import signal
import sys

from kit import version_line


def _version() -> int:
    """The line, and the CLI's exit codes where it cannot be written: 1 when the reader left
    (`kit --version | true`), 2 with one line for any other write error (a full disk)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # a Ctrl-C ends it, never a traceback
    try:
        print(version_line(), flush=True)
    except OSError as exc:
        null = os.open(os.devnull, os.O_WRONLY)  # Python's own flush at exit fails no more
        os.dup2(null, 1)
        if isinstance(exc, BrokenPipeError):
            return 1
        print(f"kit: error: {exc.strerror or exc}", file=sys.stderr)
        return 2
    return 0


def main() -> None:
    if sys.argv[1:] == ["--version"]:
        sys.exit(_version())
    from kit.cli import main as cli  # the CLI's imports, only when it runs

    cli()


if __name__ == "__main__":
    main()
