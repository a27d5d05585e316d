"""nccl-tests output as a per-size reference for a kit sweep.

`parse` reads what all_reduce_perf (and the other *_perf programs) print: the devices and, per
size, the time and busbw out of place and in place; a kit sweep is compared with the column of
the placement it timed (its all-reduce is in place). kit/refs/nccl_tests/*.txt ship the runs made beside
the committed examples (same machine, same session, same NCCL), so a report can name the sizes
where the kit's own reading falls below nccl-tests', rather than leave a dip unexplained.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

ROW = re.compile(
    r"^\s*(?P<bytes>\d+)\s+(?P<count>\d+)\s+(?P<type>\w+)\s+(?P<redop>\w+)\s+(?P<root>-?\d+)"
    r"\s+(?P<time>[\d.]+)\s+(?P<algbw>[\d.]+)\s+(?P<busbw>[\d.]+)\s+(?P<wrong>\S+)"
    r"(?:\s+(?P<itime>[\d.]+)\s+(?P<ialgbw>[\d.]+)\s+(?P<ibusbw>[\d.]+)\s+(?P<iwrong>\S+))?"
)
DEVICE = re.compile(r"^#\s+Rank\s+\d+ .* device\s+\d+ \[[^\]]*\] (?P<name>.+?)\s*$")
TEST = re.compile(r"Collective test starting: (?P<test>\w+)")
HEADER = re.compile(r"warmup iters: (?P<warmup>\d+) iters: (?P<iters>\d+) .*?graph: (?P<graph>\d+)")
LIBRARY = re.compile(r"nccl-library=(?P<lib>\d+)")
Curve = dict[int, dict[str, Any]]
"""A sweep's curve as the report holds it: size in bytes -> the kit's point (busbw, timing)."""
BELOW = 0.95
"""A size is named when the kit reads below this share of a shipped nccl-tests run's busbw."""
ABOVE = 1.05
"""A size is named, with the reason (SPIN_HELD_WHY), when the kit's spin-held busbw reads above
this multiple of a shipped nccl-tests run's taken without -G."""
SAME_CALL_FLOOR = 0.97
"""A size is named when the kit's busbw reads below this share of nccl-tests' run in the same
device call (`kit refs nccl-tests`; scripts/device/collectives_check.py's PASS line)."""
SAME_CALL_FROM = 1 << 20
"""From this size up busbw is held to SAME_CALL_FLOOR; below it the time is what matters."""
SAME_CALL_TIME = 1.10
"""A size is named when the kit's time per call is over this multiple of nccl-tests'."""
SAME_CALL_ABOVE = 1.03
"""A size is named, with the reason, when the kit's spin-held busbw reads above this multiple of
nccl-tests' without -G (the launches are in nccl-tests' time, not in the kit's)."""
SPIN_HELD_WHY = (
    "the kit queues each batch of calls behind a GPU spin (spin-held timing), so the host's "
    "launches are not in its time per call, while nccl-tests without -G launches each call as "
    "it goes and its time holds them (timing: graph against nccl-tests -G compares like for like)"
)
"""Why a spin-held kit figure reads above nccl-tests' taken without -G: the reason said beside
every such size, against a shipped run or one of the same device call."""


@dataclass(frozen=True)
class NcclTestsRun:
    """One nccl-tests run: its program, GPUs and, per size, (time us, busbw GB/s) out of place
    (`sizes`) and in place (`in_place`: nccl-tests prints both columns)."""

    name: str
    test: str
    gpus: list[str]
    sizes: dict[int, tuple[float, float]]
    in_place: dict[int, tuple[float, float]] = field(default_factory=dict)
    # the header's counts (-w, -n, -G; None where it printed none), NCCL's library version
    # (22809 = 2.28.9) and #wrong per size, out of place and in place
    warmup: int | None = None
    iters: int | None = None
    graph: int | None = None
    nccl_library: int | None = None
    wrong: dict[int, int | None] = field(default_factory=dict)
    wrong_in_place: dict[int, int | None] = field(default_factory=dict)

    def column(self, placement: str) -> dict[int, tuple[float, float]]:
        """The column a kit sweep timed with this placement compares with."""
        return self.in_place if placement == "in-place" else self.sizes

    def wrong_of(self, placement: str) -> dict[int, int | None]:
        return self.wrong_in_place if placement == "in-place" else self.wrong

    @property
    def mode(self) -> str:
        """The timing mode it compares with: a -G run with the kit's graph mode only."""
        return "cuda-graph" if self.graph else "eager"

    @property
    def nccl_call(self) -> str:
        """The NCCL API the program called (nccl-tests' src/*.cu: alltoall_perf calls
        ncclAlltoAll from NCCL 2.28, a group of ncclSend/ncclRecv before)."""
        if self.test == "alltoall_perf":
            if self.nccl_library is None:
                return "ncclAlltoAll or ncclSend/ncclRecv (NCCL version not printed)"
            return "ncclAlltoAll" if self.nccl_library >= 22800 else "ncclSend/ncclRecv group"
        return NCCL_CALLS.get(self.test, "not known")

    @property
    def gpu(self) -> str:
        return self.gpus[0] if len(set(self.gpus)) == 1 else ", ".join(sorted(set(self.gpus)))


NCCL_CALLS = {
    "all_reduce_perf": "ncclAllReduce",
    "all_gather_perf": "ncclAllGather",
    "reduce_scatter_perf": "ncclReduceScatter",
}


def _wrong(text: str | None) -> int | None:
    """#wrong as printed; None where nccl-tests did not check (-c 0 prints N/A)."""
    return int(text) if text and text.isdigit() else None


def parse(text: str, name: str = "") -> NcclTestsRun:
    """The run as nccl-tests printed it (ValueError when no size row is there)."""
    gpus, sizes, in_place, test = [], {}, {}, ""
    wrong, wrong_in = {}, {}
    counts: dict[str, int] = {}
    lib = None
    for line in text.splitlines():
        if m := TEST.search(line):
            test = m["test"]
        elif m := DEVICE.match(line):
            gpus.append(m["name"])
        elif m := ROW.match(line):
            size = int(m["bytes"])
            sizes[size] = (float(m["time"]), float(m["busbw"]))
            wrong[size] = _wrong(m["wrong"])
            if m["ibusbw"] is not None:
                in_place[size] = (float(m["itime"]), float(m["ibusbw"]))
                wrong_in[size] = _wrong(m["iwrong"])
        if m := HEADER.search(line):
            counts = {k: int(v) for k, v in m.groupdict().items()}
        if (m := LIBRARY.search(line)) and lib is None:
            lib = int(m["lib"])
    if not sizes:
        raise ValueError(f"{name or 'text'}: no nccl-tests size rows")
    return NcclTestsRun(
        name,
        test,
        gpus,
        sizes,
        in_place,
        warmup=counts.get("warmup"),
        iters=counts.get("iters"),
        graph=counts.get("graph"),
        nccl_library=lib,
        wrong=wrong,
        wrong_in_place=wrong_in,
    )


@cache
def shipped() -> dict[str, NcclTestsRun]:
    """The nccl-tests runs shipped with kit, by file name (kit/refs/nccl_tests/*.txt)."""
    folder = resources.files("kit.refs").joinpath("nccl_tests")
    return {
        f.name: parse(f.read_text(), f.name)
        for f in sorted(folder.iterdir(), key=lambda p: p.name)
        if f.name.endswith(".txt")
    }


SHIPPED_VARIANTS = {"p2p": "p2p", "no-p2p": "no-p2p"}
"""A kit variant -> the word in a shipped file's name: nccl-tests-{word}-{n}gpu.txt."""


def reference_for(
    test: str, gpu: str | None, gpus: int | None, variant: str
) -> NcclTestsRun | None:
    """The shipped nccl-tests run of the same program, GPU model and count, and variant."""
    word = SHIPPED_VARIANTS.get(variant)
    if word is None or not gpu or not gpus:
        return None
    run = shipped().get(f"nccl-tests-{word}-{gpus}gpu-{_slug(gpu)}.txt")
    return run if run is not None and run.test == test and len(run.gpus) == gpus else None


def below(curve: Curve, ref: NcclTestsRun, placement: str) -> list[tuple[int, float]]:
    """(size, kit busbw / nccl-tests busbw) for every size both measured where the kit reads
    below BELOW of nccl-tests' column of the same placement (sizes where nccl-tests reads
    under 1 GB/s are left out: there the figure is latency, and the time table says it
    better)."""
    return [(size, ratio) for size, ratio, _ in _ratios(curve, ref, placement) if ratio < BELOW]


def above(curve: Curve, ref: NcclTestsRun, placement: str) -> list[tuple[int, float]]:
    """(size, ratio) for every size where the kit's spin-held busbw reads above ABOVE of a run
    nccl-tests took without -G (its time holds the host's launches: SPIN_HELD_WHY), as `below`
    counts sizes."""
    if ref.mode != "eager":
        return []
    return [
        (size, ratio)
        for size, ratio, point in _ratios(curve, ref, placement)
        if ratio > ABOVE and "spin-held" in point.get("timing", ())
    ]


def _ratios(
    curve: Curve, ref: NcclTestsRun, placement: str
) -> list[tuple[int, float, dict[str, Any]]]:
    """(size, kit busbw / nccl-tests busbw, the kit's point) at every size both measured where
    nccl-tests moved 1 GB/s or more, in one timing mode (`other_mode` names the rest)."""
    out = []
    column, apart = ref.column(placement), set(other_mode(curve, ref, placement))
    for size, point in sorted(curve.items()):
        theirs = column.get(size)
        if theirs and theirs[1] >= 1.0 and point.get("busbw") is not None and size not in apart:
            out.append((size, point["busbw"] / theirs[1], point))
    return out


def other_mode(curve: Curve, ref: NcclTestsRun, placement: str) -> list[int]:
    """The sizes the kit timed in another mode than `ref` was taken in, where nccl-tests moved 1
    GB/s or more: a CUDA-graph size (in any repeat) against a run without -G, any other against
    a -G run. Neither is held against it: the Method says a graph-timed size is compared with
    nccl-tests -G only, as the same-call check pairs them (kit.report.analysis.same_call)."""
    graph, column = ref.mode == "cuda-graph", ref.column(placement)
    return [
        size
        for size, point in sorted(curve.items())
        if ("cuda-graph" in point.get("timing", ())) != graph
        and (column.get(size) or (0.0, 0.0))[1] >= 1.0
    ]


def size_words(n: int) -> str:
    """A message size in binary units as nccl-tests' sizes read (8 B, 256 KiB, 1 MiB, 1.5 GiB):
    the report's sentences, the published-figure comparison and the device scripts print it."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:g} {unit}"
    return f"{n} B"


def _slug(gpu: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", gpu.lower().replace("nvidia", "")).strip("-")
