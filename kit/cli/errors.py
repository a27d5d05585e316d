"""How the `kit` command ends: every error one line on stderr and an exit code, never a traceback.

typer/click usage errors are run with standalone_mode=False and mapped here, so they print one
line and exit 2 like the library's InputError, instead of click's usage block.
"""

from __future__ import annotations

import contextlib
import signal
import sys

import typer

from kit.cli import early
from kit.cli.argv import check_argv
from kit.io.errors import InputError, KitError
from kit.shared import stop


def one_line(text: object) -> str:
    """`text` on one line (every run of whitespace, line breaks included, one space): how every
    error and every path the user gave is shown (a path `a<newline>b.yaml` as `a b.yaml`)."""
    return " ".join(str(text).split())


def error_line(exc: object) -> str:
    """The one line on stderr that a user error is."""
    return f"kit: error: {one_line(exc)}"


def _click_exceptions() -> tuple[tuple[type[BaseException], ...], ...]:
    """Exit, Abort, UsageError and ClickException of click, and of the copy newer typer
    releases vendor (typer._click): typer raises its own, which are not click's classes."""
    import importlib

    mods = []
    for name in ("typer._click.exceptions", "click.exceptions"):
        try:
            mods.append(importlib.import_module(name))
        except ImportError:
            continue

    def each(name: str) -> tuple[type[BaseException], ...]:
        return tuple(getattr(m, name) for m in mods if hasattr(m, name))

    return (
        (typer.Exit, *each("Exit")),
        (typer.Abort, *each("Abort")),
        each("UsageError"),
        each("ClickException"),
    )


def _contradictions(argv: list[str]) -> None:
    """Flags that cancel each other are refused, not silently resolved by the last one."""
    args = argv[: argv.index("--")] if "--" in argv else argv
    if "--smoke" in args and "--full" in args:
        raise InputError("--smoke and --full together: choose one")


class _Stopped(BaseException):
    """SIGTERM or SIGHUP outside a run (a report rendering, a comparison): one line, not a
    silent death. A run installs its own handlers (kit.run.engine) and seals what finished."""

    def __init__(self, signum: int) -> None:
        self.signum = signum


def _stop(signum: int, frame: object) -> None:
    stop.note(signum)  # kept even where the exception below is swallowed (kit.shared.stop)
    raise _Stopped(signum)


def say(line: str) -> None:
    """A last line on stderr; a terminal that is gone (a closed pty: EIO) takes nothing."""
    with contextlib.suppress(OSError, ValueError):
        print(line, file=sys.stderr, flush=True)


def run(app: typer.Typer) -> int:
    """Run the app; every error is one line on stderr and an exit code, never a traceback.

    Usage errors (click's: unknown option or command, bad or missing value) and KitError's
    InputError exit 2; a failed run 1; an interruption 130, SIGTERM 143, SIGHUP 129. A stop
    signal wins over the error it caused (a connection it cut, a write to the terminal that
    closed): the command ends as stopped, not as that error, even one _run does not know: a stop
    raised while a module loads can surface as another exception (Python 3.11 wraps an exception
    raised in a class's __set_name__, a dataclass field's, in RuntimeError).
    """
    try:
        code = _run(app)
    except Exception:
        if stop.pending is None:
            raise  # a bug: its traceback is the report
        code = None
    if stop.pending is not None and code != 128 + stop.pending:
        say(stopped_line(stop.pending))
        return 128 + stop.pending
    return code


def stopped_line(signum: int) -> str:
    """Ctrl-C is "aborted"; SIGTERM and SIGHUP name themselves."""
    return (
        "kit: aborted"
        if signum == signal.SIGINT
        else f"kit: stopped by {signal.Signals(signum).name}"
    )


def _run(app: typer.Typer) -> int:
    """run's body: the exit code, the one line printed (none for an error a stop caused)."""
    exits, aborts, usage, click_errors = _click_exceptions()
    stop.quiet_unraisable((_Stopped, KeyboardInterrupt))  # its signal is recorded: one line
    try:  # the handlers are swapped inside: a Ctrl-C at any moment from here on is one line
        for sig in (signal.SIGTERM, signal.SIGHUP):
            if signal.getsignal(sig) == signal.SIG_DFL or early.installed(sig):
                signal.signal(sig, _stop)
        if early.installed(signal.SIGINT):  # Ctrl-C: a KeyboardInterrupt again, 130 below
            signal.signal(signal.SIGINT, stop.interrupt)
        _contradictions(sys.argv[1:])
        # the click command is built once (building it reads every command's signature: a
        # third of `kit --version`); app() would build it again (issue 46)
        command = typer.main.get_command(app)
        check_argv(command, sys.argv[1:])
        # in this mode click returns the exit code of typer.Exit instead of exiting
        code = command(standalone_mode=False, prog_name="kit")
        if stop.pending is not None and code != 128 + stop.pending:  # its exception was lost
            raise _Stopped(stop.pending)
    except KitError as exc:
        if stop.pending is None:  # else the error is the stop's doing: run() says stopped
            say(error_line(exc))
        return exc.exit_code
    except exits as exc:
        return exc.exit_code
    except (_Stopped, stop.Terminated) as exc:  # Terminated: a run's stop before its bundle
        stop.note(exc.signum)  # a later signal than the first: run() names the first
        if stop.pending == exc.signum:
            say(stopped_line(exc.signum))
        return 128 + exc.signum
    except (*aborts, KeyboardInterrupt):  # Ctrl-C (click turns it into Abort inside a command;
        # before the command runs, while typer builds it, it is KeyboardInterrupt itself)
        stop.note(signal.SIGINT)
        if stop.pending == signal.SIGINT:
            say(stopped_line(signal.SIGINT))
        return 130
    except usage as exc:
        ctx = getattr(exc, "ctx", None)
        where = ctx.command_path if ctx else "kit"
        message = one_line(exc.format_message()).strip() or "no command given"
        say(f"kit: error: {where}: {message} (see {where} --help)")
        return 2
    except click_errors as exc:
        say(f"kit: error: {one_line(exc.format_message())}")
        return 2
    except OSError as exc:  # a path the user gave: read-only, under a file, a name too long
        where = f"{one_line(exc.filename)}: " if exc.filename else ""
        if stop.pending is None:
            say(f"kit: error: {where}{exc.strerror or one_line(exc)}")
        return 2
    except RecursionError:
        say("kit: error: input nested too deeply")
        return 2
    return code if isinstance(code, int) else 0
