"""The driver's reaper: removes the containers its driver made when the driver dies, SIGKILL included.

The engine removes each container as it exits (AutoRemove) and the container's guard stops it when
the driver's heartbeat stops; but a container the driver created and never started (killed
between the two calls) never runs, so nothing in it can end it. The reaper is a small process in
a session of its own (a signal to the driver's process group does not reach it), started before
the driver's first container: the driver names each container to it before creating it
("+NAME") and after removing it ("-NAME") through a pipe; when the pipe closes (the driver ended,
however) it removes the named containers still there, then exits. A driver that removed its own
leaves it nothing to do: it exits without asking the engine.

    python -m kit.runtime.containers.reaper ENGINE    (ENGINE: docker or podman; names on stdin)
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import uuid
from typing import IO, Any

from kit.runtime.containers.client import docker_client, podman_client, remove_container
from kit.runtime.launch import with_kit
from kit.shared.engines import Engine

_lock = threading.Lock()
_pipes: dict[str, IO[bytes]] = {}  # engine name -> the pipe to its reaper, one per driver process
_reapers: list[subprocess.Popen] = []  # kept so that the pipes stay open until the driver ends


def new_name() -> str:
    """A container name chosen by the driver, so that the reaper knows it before it exists."""
    return f"kit-{uuid.uuid4().hex[:20]}"


def _pipe(engine: str) -> IO[bytes] | None:
    """The pipe to this driver's reaper for `engine`, started on the first use; None when it
    cannot start (the next kit run then removes what a killed driver left)."""
    with _lock:
        if engine in _pipes:
            return _pipes[engine]
        env = with_kit(os.environ)
        try:
            proc = subprocess.Popen(
                [sys.executable, "-m", "kit.runtime.containers.reaper", engine],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
                close_fds=True,
            )
        except OSError:
            return None
        _reapers.append(proc)
        _pipes[engine] = proc.stdin  # type: ignore[assignment]
        return _pipes[engine]


def _say(engine: str, line: str) -> None:
    pipe = _pipe(engine)
    if pipe is None:
        return
    with _lock, contextlib.suppress(OSError, ValueError):  # a reaper that died: best effort
        pipe.write(f"{line}\n".encode())
        pipe.flush()


def watch(engine: str, name: str) -> None:
    """Tell the reaper of a container about to be created."""
    _say(engine, f"+{name}")


def forget(engine: str, name: str) -> None:
    """Tell the reaper a container is gone (removed by the driver or by the engine)."""
    _say(engine, f"-{name}")


def _connect(engine: str) -> Any:
    return podman_client() if engine == Engine.PODMAN else docker_client()


def main(argv: list[str]) -> int:
    engine = argv[0] if argv else Engine.DOCKER
    names: set[str] = set()
    for raw in sys.stdin.buffer:  # until the driver's end of the pipe closes
        line = raw.decode(errors="replace").strip()
        if line.startswith("+"):
            names.add(line[1:])
        elif line.startswith("-"):
            names.discard(line[1:])
    if not names:
        return 0
    try:
        client = _connect(engine)
    except Exception:
        return 1
    for name in names:
        with contextlib.suppress(Exception):  # gone already, or the engine fails: nothing to do
            remove_container(client.containers.get(name))
    return 0


if __name__ == "__main__":
    import signal

    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):  # its work is the driver's end
        signal.signal(sig, signal.SIG_IGN)
    sys.exit(main(sys.argv[1:]))
