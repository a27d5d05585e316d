#!/usr/bin/env python3
"""Check the kit's silicon recipe against the trusted tools, in one device call.

On a lent GPU machine (no package index, no Docker), from the repository root:

    python3 scripts/device/silicon_check.py            # carry: .whl .nvbandwidth

1. builds NVIDIA's nvbandwidth from the source tree in .nvbandwidth/src (a fetched public
   snapshot, never committed) with nvcc, against Boost program_options from the Debian .debs in
   .nvbandwidth/boost (unpacked here: a .deb is an ar archive holding data.tar.*);
2. runs nvbandwidth's host_to_device_memcpy_ce, device_to_host_memcpy_ce and device_local_copy
   with the recipe's buffer size, copies per sample and samples (-b, --loopCount, -i), -j JSON;
3. runs `kit reproduce recipes/silicon.yaml` on the host runtime with every visible GPU;
4. runs nvbandwidth again (a drift check: the reference is the median of its runs);
5. times a plain torch.matmul loop (host clock, a synchronize at each end) at the shape the kit
   found best for each dtype, on each GPU the kit held alone;
6. writes comparison.md / comparison.json: kit against reference, their ratio, PASS when within
   3%, and every raw output, under $OUT.

`--pairs` checks the GPU-pair matrix instead, on a machine with two or more GPUs:

    python3 scripts/device/silicon_check.py --pairs    # carry: .whl .nvbandwidth

it builds nvbandwidth, runs its four pair testcases (NVB_PAIR_TESTS) with the recipe's pair
buffer size, copies and samples (-b pair_size_mib, --loopCount pair_loop_count, -i pair_samples),
runs the kit with a recipe holding only the copy_bandwidth benchmark on every GPU, runs
nvbandwidth again, and writes one row per pair and testcase: one way per ordered pair (row =
source), both ways per unordered pair (nvbandwidth's Total: the two directions' sum, measured
for (a, b) and for (b, a), both taken as reference samples). The kit's pair latency is not
compared: nvbandwidth's device_to_device_latency_sm is an SM pointer chase, not a 4-byte copy.

`--cpu` runs the same steps that make sense without a GPU (no nvbandwidth: there is no GPU to
copy to; the kit's CPU smoke recipe; an fp32 matmul loop; with --pairs, the pair rows read "not
run": a CPU has no GPU pair), so the script's own code is tested on the CPU. Standard library,
PyYAML and torch only: the machine's own Python runs it.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import io
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
TOLERANCE = 0.03
NVB_TESTS = {  # nvbandwidth testcase -> the kit's per-GPU field of the copy_bandwidth run
    "host_to_device_memcpy_ce": "h2d_gbps",
    "device_to_host_memcpy_ce": "d2h_gbps",
    "device_local_copy": "local_gbps",
}
NVB_PAIR_TESTS = {  # nvbandwidth pair testcase -> the kit's matrix in the run's data["pairs"]
    "device_to_device_memcpy_write_ce": "ce_one_way",
    "device_to_device_bidirectional_memcpy_write_ce": "ce_both_ways",
    "device_to_device_memcpy_write_sm": "sm_one_way",
    "device_to_device_bidirectional_memcpy_write_sm": "sm_both_ways",
}
NVB_TIMEOUT_S = 150  # one nvbandwidth invocation; a hung one costs its rows, not the whole call
PAIRS_KIT_TIMEOUT_S = 120  # --pairs: the kit's copy run (about 25 s on 2 GPUs), in a ~4 min call
NVB_SOURCES = [
    "testcase.cpp",
    "testcases_ce.cpp",
    "testcases_sm.cpp",
    "kernels.cu",
    "memcpy.cpp",
    "nvbandwidth.cpp",
    "multinode_memcpy.cpp",
    "multinode_testcases.cpp",
    "output.cpp",
    "json_output.cpp",
    "json/jsoncpp.cpp",
]
SAFE_ENV = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
    "PYTHONUNBUFFERED": "1",
}


class Log:
    """Everything printed, also kept for $OUT/check.log."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.write_text("")

    def __call__(self, text: str) -> None:
        print(text, flush=True)
        with self.path.open("a") as f:
            f.write(text + "\n")


# ---- .deb unpacking (no dpkg needed) -------------------------------------------------------


def ar_members(blob: bytes) -> dict[str, bytes]:
    """The members of a Unix ar archive (a .deb's outer format): name -> bytes."""
    if not blob.startswith(b"!<arch>\n"):
        raise ValueError("not an ar archive (no !<arch> magic)")
    out, pos = {}, 8
    while pos + 60 <= len(blob):
        header = blob[pos : pos + 60]
        name = header[:16].decode().strip().rstrip("/")
        size = int(header[48:58].decode().strip())
        out[name] = blob[pos + 60 : pos + 60 + size]
        pos += 60 + size + (size % 2)  # members are 2-byte aligned
    return out


def unpack_deb(deb: Path, dest: Path) -> None:
    """Extract a .deb's data.tar.* into dest (as dpkg-deb -x does), refusing paths that leave it."""
    members = ar_members(deb.read_bytes())
    data = next((v for k, v in members.items() if k.startswith("data.tar")), None)
    if data is None:
        raise ValueError(f"{deb.name}: no data.tar member")
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as tar:
        if hasattr(tarfile, "data_filter"):  # Python 3.11.4 and later
            tar.extractall(dest, filter="data")
            return
        root = dest.resolve()  # older Pythons (Debian 12's 3.11.2): the same refusals by hand
        for m in tar.getmembers():
            target = (root / m.name).resolve()
            linked = (target.parent / m.linkname).resolve() if m.issym() else target
            if m.islnk():
                linked = (root / m.linkname).resolve()
            kinds = m.isfile() or m.isdir() or m.issym() or m.islnk()
            if not kinds or not target.is_relative_to(root) or not linked.is_relative_to(root):
                raise tarfile.TarError(f"{deb.name}: {m.name} would leave {dest} or is no file")
        tar.extractall(dest)


# ---- nvbandwidth ----------------------------------------------------------------------------


def find_nvcc() -> Path | None:
    found = shutil.which("nvcc")
    candidates = [found] if found else []
    candidates += [
        "/usr/local/cuda/bin/nvcc",
        *sorted(map(str, Path("/usr/local").glob("cuda*/bin/nvcc"))),
        # a toolkit installed as Python wheels beside torch
        *sorted(map(str, Path(sys.prefix).glob("lib/python3*/site-packages/nvidia/*/bin/nvcc"))),
    ]
    return next((Path(c) for c in candidates if c and Path(c).is_file()), None)


def link_dirs(nvcc: Path) -> list[Path]:
    """Where libcuda / libnvidia-ml can be linked from: the toolkit's stubs, the driver folder."""
    cuda = nvcc.resolve().parent.parent
    dirs = [
        cuda / "lib64/stubs",
        cuda / "lib/stubs",
        cuda / "targets/x86_64-linux/lib/stubs",
        Path("/usr/local/nvidia/lib64"),
        Path("/usr/local/nvidia/lib"),
    ]
    return [d for d in dirs if d.is_dir()]


def nvcc_commands(
    nvcc: Path, src: Path, boost: Path, work: Path, arch: str, version: str
) -> tuple[list[list[str]], list[str]]:
    """One compile command per source (run in parallel), then the link: nvcc straight over the
    sources, as nvbandwidth's CMakeLists lists them (CMake 4 has no FindBoost module)."""
    common = [
        str(nvcc),
        "-O3",
        "-std=c++17",
        f"-arch=sm_{arch}",
        f"-I{src}",
        f"-I{boost / 'usr/include'}",
        f'-DGIT_VERSION="{version}"',
    ]
    compiles, objects = [], []
    for name in NVB_SOURCES:
        obj = work / (name.replace("/", "_") + ".o")
        compiles.append([*common, "-c", str(src / name), "-o", str(obj)])
        objects.append(str(obj))
    lib = next(boost.glob("usr/lib/*/libboost_program_options.a"), None)
    if lib is None:
        raise FileNotFoundError(f"no libboost_program_options.a under {boost}/usr/lib")
    link = [
        str(nvcc),
        f"-arch=sm_{arch}",
        *objects,
        str(lib),
        *(f"-L{d}" for d in link_dirs(nvcc)),
        "-lnvidia-ml",
        "-lcuda",
        "-o",
        str(work / "nvbandwidth"),
    ]
    return compiles, link


def build_nvbandwidth(tree: Path, work: Path, arch: str, log: Log) -> Path:
    """Unpack Boost, compile every source, link; the build log under work/."""
    nvcc = find_nvcc()
    if nvcc is None:
        raise FileNotFoundError("no nvcc on PATH or under /usr/local/cuda*")
    boost = work / "boost"
    for deb in sorted((tree / "boost").glob("*.deb")):
        unpack_deb(deb, boost)
    version = (
        (tree / "src/COMMIT").read_text().strip()[:12]
        if (tree / "src/COMMIT").is_file()
        else "unknown"
    )
    compiles, link = nvcc_commands(nvcc, tree / "src", boost, work, arch, version)
    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 4) as pool:
        done = list(pool.map(lambda c: subprocess.run(c, capture_output=True, text=True), compiles))
    done.append(subprocess.run(link, capture_output=True, text=True))
    with (work / "build.log").open("w") as f:
        for cmd, res in zip([*compiles, link], done, strict=True):
            f.write(f"$ {' '.join(cmd)}\n{res.stdout}{res.stderr}(exit {res.returncode})\n")
    failed = [r for r in done if r.returncode != 0]
    if failed:
        raise RuntimeError(f"nvbandwidth build failed: {failed[0].stderr.strip()[-800:]}")
    log(f"nvbandwidth built with {nvcc} for sm_{arch} in {time.monotonic() - t0:.1f} s")
    return work / "nvbandwidth"


Matrix = list[list[float | None]]  # [row][column], None: nvbandwidth's N/A


def cells(rows: list[list[str]]) -> Matrix:
    """nvbandwidth's JSON matrix rows (numbers as strings, "N/A") as floats and None."""
    return [[None if v == "N/A" else float(v) for v in r] for r in rows]


def parse_nvbandwidth(doc: dict[str, Any]) -> dict[str, list[float | None]]:
    """nvbandwidth -j output -> testcase name -> its first matrix row as floats (None: N/A).

    The host-link and device-local testcases print one row with a column per GPU."""
    out: dict[str, list[float | None]] = {}
    for case in doc["nvbandwidth"]["testcases"]:
        if case.get("status") != "Passed":
            raise RuntimeError(
                f"nvbandwidth {case.get('name')}: {case.get('status')} "
                f"{case.get('error', '')}".strip()
            )
        out[case["name"]] = cells(case["bandwidth_matrix"][:1])[0]
    return out


def pair_matrix(case: dict[str, Any], n: int) -> Matrix:
    """A pair testcase's N x N matrix (row = source GPU, column = destination; N/A diagonal).

    json_output.cpp's addTestcaseResults appends every matrix a testcase adds to the one
    bandwidth_matrix list and overwrites its description and sum: a bidirectional testcase holds
    three N x N blocks (Write1, Write2, then Total) under the Total's description, so the last
    block is the one the description names."""
    rows = case["bandwidth_matrix"]
    if not rows or len(rows) % n or any(len(r) != n for r in rows):
        raise ValueError(f"{case.get('name')}: not {n} x {n} blocks ({len(rows)} rows)")
    if len(rows) > n and "Total" not in case.get("bandwidth_description", ""):
        raise ValueError(f"{case.get('name')}: {len(rows) // n} blocks and no Total description")
    return cells(rows[-n:])


def parse_pairs(doc: dict[str, Any]) -> tuple[dict[str, Matrix], dict[str, str]]:
    """nvbandwidth -j output -> (pair testcase -> its matrix, testcase -> why it has none).

    N is the number of GPUs nvbandwidth listed; a testcase it waived (no peer pair) or failed is
    named with its status, and its rows read "not run"."""
    nvb = doc["nvbandwidth"]
    found, missing = {}, {}
    for case in nvb["testcases"]:
        name = case.get("name", "?")
        if case.get("status") != "Passed":
            missing[name] = f"{case.get('status')} {case.get('error', '')}".strip()
            continue
        n = len(nvb.get("GPU Device list") or case["bandwidth_matrix"][0])
        found[name] = pair_matrix(case, n)
    return found, missing


def nvbandwidth_args(size_mib: int, loop_count: int, samples: int, tests: list[str]) -> list[str]:
    return ["-b", str(size_mib), "--loopCount", str(loop_count), "-i", str(samples), "-t", *tests]


def run_nvbandwidth(exe: Path, args: list[str], out: Path, tag: str) -> dict[str, Any]:
    """nvbandwidth with `args`, as text then as JSON; both kept under out/; the JSON document."""
    env = {
        **os.environ,
        "LD_LIBRARY_PATH": ":".join(
            filter(
                None,
                [
                    "/usr/local/nvidia/lib64",
                    "/usr/local/nvidia/lib",
                    os.environ.get("LD_LIBRARY_PATH"),
                ],
            )
        ),
    }
    text = subprocess.run(
        [str(exe), *args],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        timeout=NVB_TIMEOUT_S,
    )
    (out / f"nvbandwidth-{tag}.txt").write_text(
        f"$ {exe} {' '.join(args)}\n{text.stdout}{text.stderr}"
    )
    res = subprocess.run(
        [str(exe), *args, "-j"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        timeout=NVB_TIMEOUT_S,
    )
    (out / f"nvbandwidth-{tag}.json").write_text(res.stdout)
    return json.loads(res.stdout[res.stdout.find("{") :])


NVB_ERRORS = (
    OSError,
    RuntimeError,
    ValueError,
    KeyError,
    subprocess.CalledProcessError,
    subprocess.TimeoutExpired,
)


def reference_copies(
    exe: Path | None, p: dict[str, Any], raw: Path, tag: str, log: Log
) -> list[dict[str, list]]:
    """One nvbandwidth run as a list (empty when it could not run; the log says why)."""
    if exe is None:
        return []
    args = nvbandwidth_args(p["size_mib"], p["loop_count"], p["samples"], list(NVB_TESTS))
    try:
        found = parse_nvbandwidth(run_nvbandwidth(exe, args, raw, tag))
    except NVB_ERRORS as exc:
        log(f"nvbandwidth {tag} failed: {exc}")
        return []
    log((raw / f"nvbandwidth-{tag}.txt").read_text())
    return [found]


def reference_pairs(
    exe: Path | None, p: dict[str, Any], raw: Path, tag: str, log: Log
) -> list[dict[str, Matrix]]:
    """One run of nvbandwidth's pair testcases with the recipe's pair sizes, as a list (empty
    when it could not run; the log says why, and names any testcase it waived)."""
    if exe is None:
        return []
    args = nvbandwidth_args(
        p["pair_size_mib"], p["pair_loop_count"], p["pair_samples"], list(NVB_PAIR_TESTS)
    )
    try:
        found, missing = parse_pairs(run_nvbandwidth(exe, args, raw, tag))
    except NVB_ERRORS as exc:
        log(f"nvbandwidth {tag} failed: {exc}")
        return []
    log((raw / f"nvbandwidth-{tag}.txt").read_text())
    for name, why in missing.items():
        log(f"nvbandwidth {tag}: {name} {why}: its rows read not run")
    return [found]


# ---- the kit's run ----------------------------------------------------------------------------


def recipe_for(
    recipe: Path, gpus: int, dest: Path, only: str | None = None, timeout_s: float | None = None
) -> Path:
    """The recipe with `gpus` set to what this machine has (the recipe is written for 8); with
    `only`, just that benchmark kind; with `timeout_s`, that limit per run (a hung run then
    costs its rows, and the call still writes its comparison and raw outputs). Its
    `verified_on` is dropped: it tells of the recipe as written, not of this derived one."""
    import yaml

    data = yaml.safe_load(recipe.read_text())
    data.pop("verified_on", None)
    data["gpus"] = gpus
    if timeout_s is not None:
        data["timeout_s"] = timeout_s
    if only is not None:
        data["benchmarks"] = [b for b in data["benchmarks"] if b["kind"] == only]
        if not data["benchmarks"]:
            raise ValueError(f"{recipe}: no {only} benchmark")
    path = dest / recipe.name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def run_kit(recipe: Path, device: str, bundle: Path, log: Log) -> dict[str, Any]:
    """`kit reproduce` on the host runtime; the bundle's results.json."""
    env = {**os.environ, **SAFE_ENV}
    env["PYTHONPATH"] = os.pathsep.join(
        filter(None, ["/tmp/site", str(ROOT), env.get("PYTHONPATH")])
    )
    cmd = [
        sys.executable,
        "-m",
        "kit",
        "reproduce",
        str(recipe),
        "--device",
        device,
        "--runtime",
        "host",
        "--out",
        str(bundle),
    ]
    if device == "cuda":
        cmd.append("--full")
    log(f"$ {' '.join(cmd)}")
    t0 = time.monotonic()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    log(proc.stdout + proc.stderr)
    log(f"kit reproduce: exit {proc.returncode} in {time.monotonic() - t0:.1f} s")
    results = bundle / "results.json"
    if not results.is_file():
        raise RuntimeError(f"kit reproduce wrote no results.json (exit {proc.returncode})")
    return json.loads(results.read_text())


def kit_run(results: dict[str, Any], kind: str) -> dict[str, Any]:
    run = next((r for r in results["runs"] if r["kind"] == kind), None)
    if run is None or run.get("status") != "ok":
        raise RuntimeError(f"the kit's {kind} run did not finish: {run and run.get('error')}")
    return run


# ---- a plain matmul loop ------------------------------------------------------------------------


def plain_matmul(dtype: str, shape: list[int], count: int, trials: int, device: str) -> list[float]:
    """TFLOP/s of `count` plain a @ b per trial (host clock, synchronized at both ends)."""
    import torch

    m, n, k = shape
    gen = torch.Generator(device=device).manual_seed(1)
    matmul = torch.backends.cuda.matmul
    if hasattr(matmul, "fp32_precision"):
        matmul.fp32_precision = "tf32" if dtype == "tf32" else "ieee"
    else:
        matmul.allow_tf32 = dtype == "tf32"
    if dtype == "fp8":
        a = torch.randn(m, k, device=device, generator=gen).to(torch.float8_e4m3fn)
        b = torch.randn(n, k, device=device, generator=gen).to(torch.float8_e4m3fn).t()
        one = torch.ones((), device=device)

        def op() -> Any:
            return torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    else:
        dt = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(dtype, torch.float32)
        a = torch.randn(m, k, device=device, dtype=dt, generator=gen)
        b = torch.randn(k, n, device=device, dtype=dt, generator=gen)

        def op() -> Any:
            return torch.matmul(a, b)

    def sync() -> None:
        if device != "cpu":
            torch.cuda.synchronize(device)

    if device == "cpu":
        torch.set_num_threads(1)  # as each of the kit's ranks runs (torchrun: OMP_NUM_THREADS=1)
    for _ in range(3):
        op()
    out = []
    for _ in range(trials):
        sync()
        t0 = time.perf_counter()
        for _ in range(count):
            op()
        sync()
        out.append(2.0 * m * n * k * count / (time.perf_counter() - t0) / 1e12)
    return out


# ---- the comparison ---------------------------------------------------------------------------


def row(
    what: str, unit: str, kit: float | None, ref: float | None, ref_runs: list
) -> dict[str, Any]:
    """One line of the table: PASS when the kit is within TOLERANCE of the reference."""
    ratio = kit / ref if kit is not None and ref else None
    verdict = (
        "not run"
        if ratio is None
        else ("PASS" if round(abs(ratio - 1), 9) <= TOLERANCE else "FAIL")
    )
    return {
        "what": what,
        "unit": unit,
        "kit": kit,
        "reference": ref,
        "reference_runs": ref_runs,
        "ratio": ratio,
        "verdict": verdict,
    }


def copy_rows(copy_run: dict[str, Any], nvb_runs: list[dict[str, list]]) -> list[dict[str, Any]]:
    """Per GPU and testcase: the kit's median against the median of nvbandwidth's runs."""
    rows = []
    for test, field in NVB_TESTS.items():
        for gpu in copy_run["data"]["per_gpu"]:
            i = gpu["device"]
            refs = [r[test][i] for r in nvb_runs if test in r and r[test][i] is not None]
            ref = statistics.median(refs) if refs else None
            rows.append(row(f"{test} GPU {i}", "GB/s", gpu[field], ref, refs))
    return rows


def pair_rows(
    pairs: dict[str, Any] | None, n: int, nvb_runs: list[dict[str, Matrix]]
) -> list[dict[str, Any]]:
    """Per nvbandwidth pair testcase and GPU pair: the kit's median against the median of
    nvbandwidth's cells over its runs. One way: each ordered pair (row = source). Both ways: each
    unordered pair; the kit measures it once (both cells hold it), nvbandwidth measures (a, b)
    and (b, a) apart, the same two copies at once, so both cells of every run are its samples."""
    rows = []
    for test, key in NVB_PAIR_TESTS.items():
        both = key.endswith("both_ways")
        kit_m = (pairs or {}).get(key)
        for a, b in (itertools.combinations if both else itertools.permutations)(range(n), 2):
            where = [(a, b), (b, a)] if both else [(a, b)]
            refs = [
                v
                for run in nvb_runs
                if test in run
                for i, j in where
                if (v := run[test][i][j]) is not None
            ]
            ref = statistics.median(refs) if refs else None
            pair = f"{a} <-> {b}" if both else f"{a} -> {b}"
            kit = kit_m[a][b] if kit_m else None
            r = row(f"{key} GPU {pair}", "GB/s", kit, ref, refs)
            rows.append({"pair": pair, "test": key, "nvbandwidth_test": test, **r})
    return rows


def pair_table(rows: list[dict[str, Any]]) -> str:
    """pair_rows as a table: pair, test (the kit's and nvbandwidth's names), both GB/s, ratio."""

    def num(v: float | None, f: str) -> str:
        return "-" if v is None else format(v, f)

    lines = [
        "| pair | test (kit / nvbandwidth) | kit GB/s | nvbandwidth GB/s | kit / nvbandwidth "
        f"| within {TOLERANCE:.0%} |",
        "|---|---|---:|---:|---:|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['pair']} | {r['test']} / {r['nvbandwidth_test']} | {num(r['kit'], '.2f')} | "
            f"{num(r['reference'], '.2f')} | {num(r['ratio'], '.4f')} | {r['verdict']} |"
        )
    return "\n".join(lines)


def drift(rows: list[dict[str, Any]]) -> float | None:
    """nvbandwidth against itself: the largest spread of a row's reference samples, relative to
    their median (the before/after drift, and for both ways the (a, b) / (b, a) difference)."""
    spreads = [
        (max(r["reference_runs"]) - min(r["reference_runs"])) / r["reference"]
        for r in rows
        if len(r["reference_runs"]) > 1 and r["reference"]
    ]
    return max(spreads) if spreads else None


def matmul_rows(mm_run: dict[str, Any], device: str, trials: int, log: Log) -> list[dict[str, Any]]:
    """Per dtype and GPU the kit held alone: its median trial against a plain loop's median."""
    rows = []
    for dtype, found in mm_run["data"]["dtypes"].items():
        held = found["alone"] or (found["together"] if len(found["together"]) == 1 else [])
        for i, got in enumerate(held):
            dev = "cpu" if device == "cpu" else f"cuda:{i}"
            refs = plain_matmul(dtype, found["best_shape"], got["matmuls"], trials, dev)
            shape = "x".join(map(str, found["best_shape"]))
            log(f"plain loop {dtype} {shape} on {dev}: {[round(v, 2) for v in refs]} TFLOP/s")
            who = f"rank {i}" if device == "cpu" else f"GPU {i}"
            rows.append(
                row(
                    f"matmul {dtype} {shape} {who}",
                    "TFLOP/s",
                    got["tflops"],
                    statistics.median(refs),
                    refs,
                )
            )
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    def num(v: float | None, f: str) -> str:
        return "-" if v is None else format(v, f)

    lines = [
        f"| what | kit | reference | kit / reference | within {TOLERANCE:.0%} |",
        "|---|---:|---:|---:|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['what']} | {num(r['kit'], '.2f')} {r['unit']} | "
            f"{num(r['reference'], '.2f')} {r['unit']} | {num(r['ratio'], '.4f')} | "
            f"{r['verdict']} |"
        )
    return "\n".join(lines)


# ---- main -------------------------------------------------------------------------------------


def install_wheels(log: Log) -> None:
    """The driver's pure-Python wheels carried in .whl/ (no package index on the device)."""
    wheels = sorted((ROOT / ".whl").glob("*.whl"))
    if wheels and not Path("/tmp/site").is_dir():
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "-q",
                "--no-index",
                "--no-deps",
                "--no-compile",
                "--no-cache-dir",
                "--upgrade",
                "--target",
                "/tmp/site",
                *map(str, wheels),
            ],
            check=True,
        )
        log(f"installed {len(wheels)} wheels from .whl into /tmp/site")


def gpu_count() -> int:
    import torch

    return torch.cuda.device_count()


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cpu", action="store_true", help="CPU smoke: no nvbandwidth, kit on gloo")
    ap.add_argument(
        "--pairs",
        action="store_true",
        help="the GPU-pair matrix against nvbandwidth's pair testcases (two or more GPUs)",
    )
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "/tmp/out")))
    ap.add_argument("--recipe", type=Path, default=ROOT / "recipes/silicon.yaml")
    ap.add_argument("--nvbandwidth", type=Path, default=ROOT / ".nvbandwidth")
    ap.add_argument("--work", type=Path, default=Path("/tmp/silicon-check"))
    ap.add_argument("--gpus", type=int, default=0, help="GPUs for the kit (default: all; CPU: 2)")
    ap.add_argument("--matmul-trials", type=int, default=5)
    args = ap.parse_args(argv)
    out, work = args.out, args.work
    out.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(work, ignore_errors=True)
    (work / "raw").mkdir(parents=True)
    log = Log(out / "check.log")
    if not args.cpu:  # the CPU machine has the driver's packages; the device gets them carried
        install_wheels(log)
    device = "cpu" if args.cpu else "cuda"
    gpus = args.gpus or (2 if args.cpu else gpu_count())
    if not args.cpu and gpus == 0:
        print(
            "silicon_check: no GPU visible to torch; use --cpu for the smoke test", file=sys.stderr
        )
        return 2
    if args.pairs and gpus < 2:
        print(f"silicon_check: --pairs needs two or more GPUs, found {gpus}", file=sys.stderr)
        return 2
    raw, t_start = work / "raw", time.monotonic()
    for cmd in (
        ["nvidia-smi", "-L"],
        ["nvidia-smi", "topo", "-m"],
        ["nvidia-smi", "-q", "-d", "CLOCK,POWER"],
        ["nvcc", "--version"],
    ):
        if shutil.which(cmd[0]):
            res = subprocess.run(cmd, capture_output=True, text=True)
            (raw / f"{'_'.join(cmd).replace('-', '').replace(',', '_')}.txt").write_text(
                res.stdout + res.stderr
            )

    recipe = (
        recipe_for(args.recipe, gpus, work, "copy_bandwidth", PAIRS_KIT_TIMEOUT_S)
        if args.pairs
        else recipe_for(args.recipe, gpus, work)
    )
    import yaml

    bench = {b["kind"]: b for b in yaml.safe_load(recipe.read_text())["benchmarks"]}
    copy_params = bench["copy_bandwidth"]["params"]
    reference = reference_pairs if args.pairs else reference_copies
    nvb_runs: list[dict[str, Any]] = []
    exe = None
    if not args.cpu:  # a failed build or run costs the nvbandwidth rows, not the whole call
        import torch

        major, minor = torch.cuda.get_device_capability(0)
        try:
            exe = build_nvbandwidth(args.nvbandwidth, work, f"{major}{minor}", log)
        except (OSError, RuntimeError, ValueError) as exc:
            log(f"nvbandwidth NOT built: {exc}")
        if (work / "build.log").is_file():
            shutil.copy(work / "build.log", raw / "nvbandwidth-build.log")
        nvb_runs += reference(exe, copy_params, raw, "before", log)

    try:
        results = run_kit(recipe, device, work / "bundle", log)
    except RuntimeError as exc:
        if not args.pairs:
            raise
        log(f"kit: {exc}")  # --pairs: the kit's rows read not run beside nvbandwidth's figures
        results = {"runs": []}
    if exe is not None:
        nvb_runs += reference(exe, copy_params, raw, "after", log)

    if args.pairs:
        try:
            kit_pairs = kit_run(results, "copy_bandwidth")["data"].get("pairs")
        except RuntimeError as exc:
            log(str(exc))
            kit_pairs = None
        rows = pair_rows(kit_pairs, gpus, nvb_runs)
        text = pair_table(rows)
        spread = drift(rows)
        title = f"kit GPU pairs vs nvbandwidth ({device}, {gpus} GPU(s))"
        notes = (
            "Reference: the median of nvbandwidth's runs before and after the kit's "
            f"(-b {copy_params['pair_size_mib']} --loopCount {copy_params['pair_loop_count']} "
            f"-i {copy_params['pair_samples']}, the recipe's pair_* parameters; "
            "device_to_device_*_write_*: the copy runs on the source GPU, as the kit's). "
            "One way: row = source. Both ways: nvbandwidth's Total (both directions at once, "
            "summed), its (a, b) and (b, a) cells both taken as samples. nvbandwidth's largest "
            "spread across its samples of one row: "
            f"{'-' if spread is None else format(spread, '.1%')}. Not compared: the kit's pair "
            "latency (a 4-byte copy engine copy; nvbandwidth's device_to_device_latency_sm is an "
            "SM pointer chase) and its staged-through-host copies (nvbandwidth has none).\n"
        )
    else:
        rows = copy_rows(kit_run(results, "copy_bandwidth"), nvb_runs) if not args.cpu else []
        rows += matmul_rows(kit_run(results, "matmul_ceiling"), device, args.matmul_trials, log)
        text = table(rows)
        spread = None
        title = f"kit silicon vs nvbandwidth and a plain matmul loop ({device}, {gpus} GPU(s))"
        notes = (
            "Reference: the median of nvbandwidth's runs before and after the kit's "
            "(-b/--loopCount/-i as the recipe), and of a plain torch.matmul loop's trials.\n"
        )
    summary = {
        "mode": "pairs" if args.pairs else "silicon",
        "device": device,
        "gpus": gpus,
        "tolerance": TOLERANCE,
        "rows": rows,
        "all_pass": all(r["verdict"] == "PASS" for r in rows) and bool(rows),
        "nvbandwidth_runs": len(nvb_runs),
        "nvbandwidth_spread": spread,
        "wall_s": time.monotonic() - t_start,
        "command": " ".join(["python3", *sys.argv]),
    }
    (out / "comparison.json").write_text(json.dumps(summary, indent=2) + "\n")
    (out / "comparison.md").write_text(f"# {title}\n\n{text}\n\n{notes}")
    log(text)
    if (work / "bundle").is_dir():
        with tarfile.open(out / "bundle.tar.gz", "w:gz") as tar:
            tar.add(work / "bundle", arcname="bundle")
    with tarfile.open(out / "raw.tar.gz", "w:gz") as tar:
        tar.add(raw, arcname="raw")
    log(
        f"silicon_check: {len(rows)} comparisons, all pass: {summary['all_pass']}, "
        f"{summary['wall_s']:.0f} s"
    )
    return 0 if summary["all_pass"] or args.cpu else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
