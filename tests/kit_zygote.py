"""One process that has imported the kit serves every `kit` command of a test worker.

Each command is still a process of its own, with its own argv, environment, working directory,
stdin, stdout, stderr and exit status: the zygote forks a child per command, and the child runs
`python -m kit` as a fresh interpreter would. What the children share is only the work of
importing the kit and its libraries, which the zygote did once: about 0.3-1.5 s a command, over
the ~900 commands the suite starts.

Run as a script (tests.conftest starts one per test worker, lazily). Protocol, one JSON object
a line on stdin: {"args", "env", "cwd", "stdin", "stdout", "stderr"} (file paths); answers on
stdout: "pid N", then "exit CODE" (subprocess's convention: minus the signal that killed it).
A command that must start its own interpreter (a test of start-up itself, of a variable Python
reads at start-up, of signals) uses tests.conftest.run_kit_fresh.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import runpy
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

PRELOAD = (
    "kit.cli",
    "kit.cli.bundle",
    "kit.bundle",
    "kit.bundle.intake",
    "kit.model",
    "kit.recipe",
    "kit.stats.acceptance",
    "kit.run.engine",
    "kit.run.rerun",
    "kit.run.seal",
    "kit.report.render",
    "kit.report.compare",
    "kit.refs.store",
    "kit.run.registry",
    "kit.inventory.cli",
    "kit.report.plots",
    "kit.report.pdf",
    "weasyprint",  # the PDF's 1 s of imports, once (a test that hides it gets its own zygote)
    "matplotlib.figure",
)
"""What most commands import; a module that fails to import here is imported by its command."""


def _read_line(fd: int) -> bytes:
    """One request line from fd, unbuffered (a child must inherit no half-read buffer)."""
    line = bytearray()
    while not line.endswith(b"\n"):
        chunk = os.read(fd, 1)
        if not chunk:
            return b""
        line += chunk
    return bytes(line)


def _exit_code(exc: SystemExit) -> int:
    """What the interpreter makes of SystemExit at the top: None 0, an int itself, else print 1."""
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code & 0xFF
    print(exc.code, file=sys.stderr)
    return 1


def _child(req: dict) -> None:
    os.chdir(req["cwd"])
    os.environ.clear()
    os.environ.update(req["env"])
    tempfile.tempdir = None  # TMPDIR as this command's environment names it
    for fd, path, flags in (
        (0, req["stdin"], os.O_RDONLY),
        (1, req["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
        (2, req["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
    ):
        opened = os.open(path, flags, 0o600)
        os.dup2(opened, fd)
        os.close(opened)
    sys.path[0] = os.getcwd()  # `python -m kit` puts its working directory first
    sys.argv = [os.path.join(os.path.dirname(sys.modules["kit"].__file__), "__main__.py")]
    sys.argv += req["args"]
    code = 0
    try:
        runpy.run_module("kit", run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        code = _exit_code(exc)
    except BaseException:  # as the interpreter would: the traceback, exit 1
        traceback.print_exc()
        code = 1
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed or broken stream: as at exit
            stream.flush()
    os._exit(code)


def _warm() -> None:
    """What each command would otherwise do again on first use, done once before the forks:
    the report's templates compiled (a `kit report` of a small bundle without its PDF, 1.1 s
    -> 0.7 s; a matplotlib figure drawn here as well saved nothing more), and every workload's
    spec built (the registry builds one when a command first asks for its kind). Nothing that
    starts a thread: a fork keeps only the thread that forked."""
    with contextlib.suppress(Exception):
        from kit.workloads import registry

        for kind in registry.KINDS:
            registry.spec(kind)
    with contextlib.suppress(Exception):  # a command that needs them does it and says so
        from kit.report.render import jinja_env

        env = jinja_env()
        for name in env.list_templates():
            env.get_template(name)


def main() -> None:
    sys.path[0] = os.getcwd()  # the checkout, as `python -m kit` run there has it; not tests/
    for name in PRELOAD:
        with contextlib.suppress(Exception):  # its command imports it and says what is wrong
            importlib.import_module(name)
    _warm()
    # nothing buffered may be inherited: the answers go out through os.write alone
    sys.stdout.flush()
    while True:
        line = _read_line(0)
        if not line:
            return
        req = json.loads(line)
        pid = os.fork()
        if pid == 0:
            try:
                _child(req)
            finally:
                os._exit(70)
        os.write(1, f"pid {pid}\n".encode())
        _, status = os.waitpid(pid, 0)
        os.write(1, f"exit {os.waitstatus_to_exitcode(status)}\n".encode())


if __name__ == "__main__":
    main()


STARTUP_VARS = ("PYTHON", "LANG", "LANGUAGE", "LC_")
"""Variables an interpreter reads as it starts: a command whose environment sets them otherwise
than the zygote's starts its own interpreter."""


def startup_env(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k.startswith(STARTUP_VARS)}


class Zygote:
    """The test side: one zygote process, started on first use and again if it died."""

    def __init__(self, root: Path, tmp: Path, env: dict[str, str]) -> None:
        self.root, self.tmp, self.env = root, tmp, env
        self.proc: subprocess.Popen[bytes] | None = None
        self.lines: AnswerLines | None = None
        self.count = 0

    def serves(self, env: dict[str, str]) -> bool:
        return startup_env(env) == startup_env(self.env)

    def _start(self) -> subprocess.Popen[bytes]:
        if self.proc is None or self.proc.poll() is not None:
            self.proc = subprocess.Popen(
                [sys.executable, __file__],
                cwd=self.root,
                # BLAS without its thread pool (numpy's and scipy's OpenBLAS each start one as
                # they load): a fork keeps only the forking thread, so the zygote has no other
                env={**self.env, "OPENBLAS_NUM_THREADS": "1"},
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
            assert self.proc.stdout is not None
            self.lines = AnswerLines(self.proc.stdout.fileno())
        return self.proc

    def _answer(self, deadline: float | None) -> str:
        assert self.lines is not None
        return self.lines.next(deadline)

    def run(
        self,
        args: list[str],
        env: dict[str, str],
        cwd: Path,
        timeout: float | None,
        stdin: bytes | None,
    ) -> subprocess.CompletedProcess[str]:
        self.count += 1
        self.tmp.mkdir(mode=0o700, exist_ok=True)  # close() removed it
        base = self.tmp / f"cmd{self.count}"
        files = {name: f"{base}.{name}" for name in ("stdin", "stdout", "stderr")}
        Path(files["stdin"]).write_bytes(stdin or b"")
        proc = self._start()
        assert proc.stdin is not None
        request = {"args": args, "env": env, "cwd": str(cwd), **files}
        proc.stdin.write((json.dumps(request) + "\n").encode())
        proc.stdin.flush()
        deadline = None if timeout is None else time.monotonic() + timeout
        pid = int(self._answer(None).split()[1])
        try:
            code = int(self._answer(deadline).split()[1])
        except TimeoutError:
            state = _state(pid), _state(proc.pid)
            with contextlib.suppress(ProcessLookupError):  # it may end as the deadline passes
                os.kill(pid, signal.SIGKILL)
            try:  # its exit line, so the next command reads its own answers
                self._answer(time.monotonic() + 30)
            except (TimeoutError, RuntimeError):  # the zygote itself is stuck: a new one next
                self.close()
            raise subprocess.TimeoutExpired(
                args, timeout or 0, stderr=f"command {state[0]}; zygote {state[1]}".encode()
            ) from None
        out, err = (_text(Path(files[n]).read_bytes()) for n in ("stdout", "stderr"))
        for path in files.values():
            os.unlink(path)
        return subprocess.CompletedProcess([sys.executable, "-m", "kit", *args], code, out, err)

    def close(self) -> None:
        """The zygote stopped and its folder of streams removed (a test session leaves nothing
        in the real TMPDIR)."""
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            for pipe in (self.proc.stdin, self.proc.stdout):
                with contextlib.suppress(OSError):
                    if pipe is not None:
                        pipe.close()
        self.proc, self.lines = None, None
        shutil.rmtree(self.tmp, ignore_errors=True)


class AnswerLines:
    """The zygote's answer lines, read from its stdout's descriptor with a buffer of our own.

    A buffered file's readline() may take "pid N" and "exit C" in one read when the command ends
    at once (`kit --version`); a select() on the descriptor then waits for a line already read,
    until the command's timeout (600 s in the suite, 2026-11-30). Here a line already buffered is
    answered without asking the descriptor."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buffer = b""

    def next(self, deadline: float | None) -> str:
        while b"\n" not in self.buffer:
            timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([self.fd], [], [], timeout)
            if not ready:
                raise TimeoutError
            chunk = os.read(self.fd, 4096)
            if not chunk:
                raise RuntimeError("the kit zygote died")
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line.decode().strip()


def _state(pid: int) -> str:
    """A process's state line from /proc (R running, S sleeping, T stopped, Z exited, unreaped),
    and what it waits in: what a timed-out command says of itself and of its zygote."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        wchan = Path(f"/proc/{pid}/wchan").read_text()
    except OSError:
        return f"{pid}: gone"
    state = next((line for line in status.splitlines() if line.startswith("State:")), "")
    return f"{pid}: {state.removeprefix('State:').strip()}, waiting in {wchan or '-'}"


def _text(data: bytes) -> str:
    """As subprocess.run(text=True) decodes: UTF-8 here, universal newlines."""
    return data.decode().replace("\r\n", "\n").replace("\r", "\n")
