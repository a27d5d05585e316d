"""The stop signal this process received, kept where no library can swallow it.

A handler that only raises loses its signal when the exception surfaces where Python ignores
it (inside logging's lock release, a finalizer, a callback: "Exception ignored in ..."). So every
stop handler of the driver first records the signal here, then raises; the stage boundaries (each
run, the wait loops, the seal, the command's exit) check the record, so a signal received at any
moment ends the command with 128 + the signal and a bundle that records the interruption.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Iterator
from typing import Any

pending: int | None = None
"""The first stop signal received (SIGTERM, SIGHUP, SIGINT), or None."""


class Terminated(Exception):
    """SIGTERM or SIGHUP during the runs: the exit code is 128 + the signal, as at every other
    stage (kit.cli.errors); Ctrl-C (KeyboardInterrupt) is 130."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


class Interrupted(KeyboardInterrupt):
    """Ctrl-C, raised by the kit's own SIGINT handler instead of KeyboardInterrupt itself.

    CPython marks a KeyboardInterrupt of exactly that class that passes through code run by
    exec or eval of a string (dataclasses, namedtuple and typing do so while importing) as
    unhandled, even when a caller catches it; `python -m kit` then kills itself with SIGINT
    at exit (status -2) after printing its one line and choosing 130. A subclass is not marked.
    """


def interrupt(signum: int, frame: Any) -> None:
    """The SIGINT handler of the command and of a run: record the signal, then raise."""
    note(signum)
    raise Interrupted


def note(signum: int) -> None:
    """Record a stop signal (the first one wins: it is the one the exit code names)."""
    global pending
    if pending is None:
        pending = signum


def check() -> None:
    """Raise Terminated when a stop signal was received, whether or not its exception surfaced."""
    if pending is not None:
        raise Terminated(pending)


def quiet_unraisable(stops: tuple[type[BaseException], ...]) -> None:
    """Where Python swallows an exception ("Exception ignored in ...": a finalizer, logging's lock
    release), a stop's exception is not printed: its signal is recorded above and is acted on at
    the next check, with the command's one line. Any other swallowed exception prints as before."""
    previous = sys.unraisablehook

    def hook(unraisable: Any) -> None:
        if isinstance(unraisable.exc_value, (Terminated, *stops)) and pending is not None:
            return
        previous(unraisable)

    sys.unraisablehook = hook


STOPS = frozenset({signal.SIGINT, signal.SIGTERM, signal.SIGHUP})


@contextlib.contextmanager
def held() -> Iterator[None]:
    """Stop signals wait while the block runs (a bundle's record written whole, never half);
    one that came meanwhile is delivered, and its handler raises, as the block ends.

    The wait is kept in Python, not in the signal mask: a process-directed signal goes to any
    thread that does not block it (a log pump, a library's pool), and CPython then runs the
    handler in the main thread whatever that thread's mask says. So the block's handlers only
    record the signal, and the first one recorded is raised again once they are restored."""
    if threading.current_thread() is not threading.main_thread():
        yield  # handlers can only be swapped in the main thread, where the driver seals
        return
    deferred: list[int] = []

    def wait(signum: int, frame: Any) -> None:
        deferred.append(signum)

    previous = {sig: signal.signal(sig, wait) for sig in STOPS}
    try:
        yield
    finally:
        for sig, handler in previous.items():  # None: one set outside Python; the default then
            signal.signal(sig, signal.SIG_DFL if handler is None else handler)
        if deferred:
            signal.raise_signal(deferred[0])


def start_thread(thread: threading.Thread) -> None:
    """Start a driver thread with stop signals held. A handler that raises while Thread.start
    runs, just after the new thread exists, makes start() drop the thread from threading's table
    as if it had never started; the new thread then dies on a KeyError ("Exception ignored in
    thread started by ... kit-heartbeat", a SIGTERM under load, 2026-11-29). Held, the signal's
    handler runs once start() has returned."""
    with held():
        thread.start()
