"""One-off instrument of the test-durations study (twenty-sixth session): every 0.5 s, each new
process's parent, name, command line and PYTEST_CURRENT_TEST, as JSON lines, so that
`pacct_by_kind.py` can put the kernel's accounting records (which name no test) against the test
that started them. Usage: `python3 pacct_sampler.py OUT.jsonl &` beside a run under `accton`."""

import json
import os
import sys
import time


def sample(out, seen: set[tuple[str, str]]) -> None:
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
            rest = stat[stat.rindex(")") + 2 :].split()
            if (pid, rest[19]) in seen:  # the same process (pid and start time) seen before
                continue
            seen.add((pid, rest[19]))
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read()[:300].replace(b"\0", b" ").decode(errors="replace")
            test = None
            try:
                with open(f"/proc/{pid}/environ", "rb") as f:
                    for kv in f.read().split(b"\0"):
                        if kv.startswith(b"PYTEST_CURRENT_TEST="):
                            test = kv[20:].decode(errors="replace")
            except OSError:
                pass
            row = {
                "pid": int(pid),
                "ppid": int(rest[1]),
                "comm": stat[stat.index("(") + 1 : stat.rindex(")")],
                "cmd": cmd,
                "test": test,
            }
            out.write(json.dumps(row) + "\n")
        except (OSError, ValueError, IndexError):
            continue  # it exited while read


def main() -> None:
    seen: set[tuple[str, str]] = set()
    with open(sys.argv[1], "a", buffering=1) as out:
        while True:
            sample(out, seen)
            time.sleep(0.5)


if __name__ == "__main__":
    main()
