"""One-off instrument of the test-durations study (twenty-sixth session): the CPU of every process
that exited during a run, from the kernel's BSD process accounting (`accton FILE`: exact, at exit,
killed processes and container processes included; daemons that outlive the run are not), by kind
of process and by the test file that started it (`pacct_sampler.py`'s map, climbing parents).
Usage: `python3 pacct_by_kind.py PACCT SAMPLES.jsonl` (needs `dump-acct`, Debian's acct)."""

import collections
import json
import subprocess
import sys


def read_acct(path: str) -> list[dict]:
    out = subprocess.run(["dump-acct", path], capture_output=True, text=True, check=True).stdout
    rows = []
    for line in out.splitlines():
        f = [x.strip() for x in line.split("|")]
        if len(f) >= 11:  # comm|v3|utime|stime|etime|uid|gid|mem|io|pid|ppid|... (1/100 s)
            cpu = (float(f[2]) + float(f[3])) / 100
            rows.append({"comm": f[0], "cpu": cpu, "pid": int(f[9]), "ppid": int(f[10])})
    return rows


def main() -> None:
    acct = read_acct(sys.argv[1])
    seen = {}
    with open(sys.argv[2]) as f:
        for line in f:
            row = json.loads(line)
            seen[row["pid"]] = row
    parent = {r["pid"]: r["ppid"] for r in acct} | {p: r["ppid"] for p, r in seen.items()}
    comm = {r["pid"]: r["comm"] for r in acct} | {p: r["comm"] for p, r in seen.items()}

    def ancestors(pid: int) -> list[int]:
        out = []
        while pid and len(out) < 40:
            out.append(pid)
            pid = parent.get(pid, 0)
        return out

    def test_of(pid: int) -> str:
        for a in ancestors(pid):
            if seen.get(a, {}).get("test"):
                return seen[a]["test"].split("::")[0]
        return "(no test: a fixture's or an inherited environment)"

    def kind(pid: int, name: str) -> str:
        cmd = seen.get(pid, {}).get("cmd", "")
        if any(
            comm.get(a, "").startswith(("containerd-shim", "conmon")) for a in ancestors(pid)[1:]
        ):
            return "in a container (image builds, container runs)"
        if "sys.stdin.readline()" in cmd or "-m pytest" in cmd:  # execnet's bootstrap: a worker
            return "pytest (its workers: the tests in process)"
        if "torch.distributed.run" in cmd or "torchrun" in cmd:
            return "torchrun agent"
        if "kit.worker" in cmd:
            return "rank (kit.worker)"
        if "kit-zygote" in cmd or "kit_zygote" in cmd:
            return "kit command forked from a zygote"
        if "bin/kit" in cmd or "-m kit " in cmd:
            return "kit command"
        if name.startswith(("python", "pt_")):
            return "other Python (a rank not sampled, a test's script)"
        return f"tool: {name}"

    by_kind, count, by_test = collections.Counter(), collections.Counter(), collections.Counter()
    for r in acct:
        by_kind[kind(r["pid"], r["comm"])] += r["cpu"]
        count[kind(r["pid"], r["comm"])] += 1
        by_test[test_of(r["pid"])] += r["cpu"]
    print(f"{sum(by_kind.values()):.0f} s of CPU in {len(acct)} processes that exited")
    for name, cpu in by_kind.most_common(12):
        print(f"{cpu:8.1f}  {count[name]:5d}  {name}")
    print()
    for name, cpu in by_test.most_common(20):
        print(f"{cpu:8.1f}  {name}")


if __name__ == "__main__":
    main()
