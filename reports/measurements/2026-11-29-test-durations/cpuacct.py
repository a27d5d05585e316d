"""One-off instrument of the test-durations study (fifteenth session): each Python process's CPU at
exit, with the test that caused it (PYTEST_CURRENT_TEST). Installed into a clone's venv as
`_cpuacct.py` plus a `zz_cpuacct.pth` holding `import _cpuacct`; writes JSON lines to
$CPUACCT_LOG. Processes killed by a signal write nothing."""

import atexit
import json
import os
import resource
import sys
import time

_T0 = time.time()
_LOG = os.environ.get("CPUACCT_LOG", "/tmp/cpuacct.jsonl")
_done = []


def _log():
    if _done:
        return
    _done.append(1)
    try:
        r = resource.getrusage(resource.RUSAGE_SELF)
        rec = {
            "pid": os.getpid(),
            "ppid": os.getppid(),
            "argv": sys.argv[:6],
            "exe": sys.executable,
            "test": os.environ.get("PYTEST_CURRENT_TEST", ""),
            "u": round(r.ru_utime, 3),
            "s": round(r.ru_stime, 3),
            "wall": round(time.time() - _T0, 3),
            "torch": "torch" in sys.modules,
            "tf": "transformers" in sys.modules,
        }
        with open(_LOG, "a") as f:
            f.write(json.dumps(rec) + "\n")
    except Exception:
        pass


atexit.register(_log)
_orig_exit = os._exit


def _exit(code):
    _log()
    _orig_exit(code)


os._exit = _exit


def _child():
    _done.clear()
    global _T0
    _T0 = time.time()


os.register_at_fork(after_in_child=_child)
