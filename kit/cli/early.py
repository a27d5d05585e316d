"""Stop signals while the `kit` command is still importing: one line and 128 + the signal.

Imported first by kit.cli, before typer and the library: a Ctrl-C or SIGTERM during those
seconds would otherwise be a traceback (SIGINT) or a silent death (SIGTERM). Nothing has been
written yet, so the process ends at once; kit.cli.errors.run replaces these handlers.
"""

from __future__ import annotations

import os
import signal
import sys

STOP = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _while_importing(signum: int, frame: object) -> None:
    os.write(2, f"kit: stopped by {signal.Signals(signum).name}\n".encode())
    os._exit(128 + signum)


def is_the_command() -> bool:
    """This process is `kit` (the console script, or python -m kit), not a program (a test)
    that imports kit.cli: only the command's own signals are taken over."""
    first = sys.argv[0] if sys.argv else ""
    if os.path.basename(first) == "kit" or first.endswith(os.path.join("kit", "__main__.py")):
        return True
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)  # python -m kit, any path
    return getattr(spec, "name", None) == "kit.__main__"


def install() -> None:
    """The import-time handler for each stop signal the shell left at its default (an ignored
    one, as `nohup` leaves SIGHUP, stays ignored)."""
    if not is_the_command():
        return
    for sig in STOP:
        if signal.getsignal(sig) in (signal.SIG_DFL, signal.default_int_handler):
            signal.signal(sig, _while_importing)


def installed(sig: int) -> bool:
    return signal.getsignal(sig) is _while_importing


install()
