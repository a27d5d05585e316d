"""Time `kit report` on every committed example bundle (a benchmark, not a test).

Each bundle is copied to a temporary directory first (rendering rewrites report.html/.pdf and the
manifest: never in place), then `python -m kit report COPY` runs N times in a fresh process
each, as a user would run it. Prints the machine, the command, the load average and a table of
medians: wall seconds, and CPU seconds (user + system of the child): the render is one thread,
so on a busy shared machine its CPU time is what the wall time would be on a quiet one.
It also says whether WeasyPrint found libharfbuzz-subset (font subsetting in C; without it
WeasyPrint subsets the fonts with fontTools in Python, about 1 s more per report).

    python scripts/bench_report.py [-n 3] [--reference CHECKOUT] [--profile BUNDLE_NAME]

--reference times another checkout of kit (e.g. `git worktree add /tmp/ref COMMIT`) on the same
bundle copies, interleaved run by run with this one, and prints each bundle's CPU-time ratio: on a
shared machine the ratio holds where the absolute times drift.
--profile runs the render once in-process under cProfile and prints the top costs.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import platform
import pstats
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "reports" / "examples"


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def bundles() -> list[Path]:
    return sorted(p for p in EXAMPLES.iterdir() if (p / "results.json").is_file())


def harfbuzz_subset() -> bool:
    """Whether WeasyPrint loads libharfbuzz-subset here (its fast font subsetting)."""
    code = (
        "import warnings; warnings.simplefilter('ignore');"
        "from weasyprint.text import ffi; print(ffi.harfbuzz_subset is not None)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    return out.stdout.strip() == "True"


def time_one(
    bundle: Path, repeats: int, roots: tuple[Path, ...] = (ROOT,)
) -> list[tuple[list[float], list[float]]]:
    """(wall times, CPU times) per kit checkout in `roots`, the checkouts taking turns."""
    out: list[tuple[list[float], list[float]]] = [([], []) for _ in roots]
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / bundle.name
        shutil.copytree(bundle, copy, symlinks=True)
        for _ in range(repeats):
            for (times, cpu), root in zip(out, roots, strict=True):
                t0 = time.perf_counter()
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                proc = subprocess.run(
                    [sys.executable, "-m", "kit", "report", str(copy)],
                    env={**os.environ, "PYTHONPATH": str(root)},
                    cwd=root,  # `python -m` puts the working directory first on sys.path
                    capture_output=True,
                    text=True,
                )
                times.append(time.perf_counter() - t0)
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
                if proc.returncode != 0:
                    raise SystemExit(
                        f"kit report {bundle.name} ({root}) failed: {proc.stderr.strip()[-500:]}"
                    )
    return out


def profile(name: str, top: int) -> None:
    from kit.cli import app  # imported here so its import time is part of the profile

    bundle = EXAMPLES / name
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / name
        shutil.copytree(bundle, copy, symlinks=True)
        prof = cProfile.Profile()
        prof.enable()
        try:
            app(["report", str(copy)], standalone_mode=False)
        finally:
            prof.disable()
    pstats.Stats(prof).sort_stats("cumulative").print_stats(top)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=3, help="repeats per bundle (median reported)")
    ap.add_argument("--reference", type=Path, help="another kit checkout to time alongside")
    ap.add_argument("--profile", metavar="BUNDLE", help="profile one bundle's render instead")
    ap.add_argument("--top", type=int, default=40)
    args = ap.parse_args()
    if args.profile:
        profile(args.profile, args.top)
        return
    print(
        f"machine: {cpu_model()}, {os.cpu_count()} logical CPUs, Python {platform.python_version()}"
    )
    print(f"command: {sys.executable} -m kit report COPY_OF_BUNDLE  (n={args.n}, fresh process)")
    print(f"libharfbuzz-subset found by WeasyPrint: {harfbuzz_subset()}")
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    roots = (ROOT,) if args.reference is None else (ROOT, args.reference.resolve())
    if args.reference is not None:
        print(f"reference: {roots[1]} (interleaved run by run; ratio = this CPU s / reference's)")
    ref_head = f" {'ref CPU s':>9s} {'ratio':>6s}" if len(roots) > 1 else ""
    print(f"{'bundle':32s} {'wall s':>7s} {'min':>6s} {'max':>6s} {'CPU s':>6s}{ref_head}")
    walls, cpus, ratios = [], [], []
    for b in bundles():
        (t, c), *ref = time_one(b, args.n, roots)
        walls.append(statistics.median(t))
        cpus.append(statistics.median(c))
        line = f"{b.name:32s} {walls[-1]:7.2f} {min(t):6.2f} {max(t):6.2f} {cpus[-1]:6.2f}"
        if ref:
            ref_cpu = statistics.median(ref[0][1])
            ratios.append(cpus[-1] / ref_cpu)
            line += f" {ref_cpu:9.2f} {ratios[-1]:6.2f}"
        print(line, flush=True)
    tail = f" {'':9s} {statistics.median(ratios):6.2f}" if ratios else ""
    print(f"{'median over bundles':32s} {statistics.median(walls):7.2f} {'':13s} "
          f"{statistics.median(cpus):6.2f}{tail}")  # fmt: skip
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
