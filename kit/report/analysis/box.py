"""The box: every GPU of the machine against the shipped figure of its own model and against the
box's other GPUs. Page 1's per-GPU table and the per-GPU section read `judge_box` and nothing
else (the payloads are read once, in kit.report.analysis.gpu_figures; the pairs in box_links).

Per GPU: HBM copy (device-local), host to device and device to host, the matmul ceiling of each
dtype held on the GPU alone (all at once where it was not held alone), its weakest GPU pair,
and hardware.json's power limit, ECC, clocks and NVLinks. Each figure is the median of its
repeats, and stands twice: (a) against kit/refs/per_gpu.json's figure for the GPU's model
(kit.refs.per_gpu.judge: kit.stats.acceptance's rule, PASS / FAIL / UNDECIDED by the interval, NOT
COMPARABLE without a figure for the model and conditions) and (b) against the median of the
box's other GPUs: more than the margin below it, the GPU is named with its UUID, bus id and
NVLinks. The others, not the whole box: with the GPU itself in the median, a 2-GPU box held each
GPU against the midpoint of the two, a figure neither measured (2x H200 with a planted load,
2026-11-29: "932 GB/s, 38% below the box's median 1,515", the healthy GPU "+38%"), and in a
3-GPU box two slow GPUs made the median and hid each other.
With fewer than 3 repeats the box is a screening: no PASS or FAIL, the slow ones still named.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kit.model import BundleData, Hardware, RunResult
from kit.model.hardware import Gpu, uncorrected_words
from kit.refs.per_gpu import GpuReference, Standing, judge
from kit.report.analysis.box_links import LinkRow, links_of, named_links, weakest_pair
from kit.report.analysis.gpu_figures import (
    HeldAgainstPeers,
    ceilings,
    copy_values,
    hardware_of,
    median,
    outlier_pct,
    silicon_runs,
)
from kit.report.analysis.grouping import build_benchmarks
from kit.report.analysis.model import Benchmark
from kit.shared.gpu_specs import spec_for
from kit.stats.acceptance import FAIL, MIN_RUNS, NOT_COMPARABLE, PASS, UNDECIDED, overall

COPY_MARGIN = 0.05
"""How far below its peers' median a copy figure (HBM, host link, a GPU pair) may read before the
GPU or link is named. One NVLink of the 18 an H100 or H200 has, down, costs its pairs 1/18 =
5.6% of their bandwidth: 5% names a single lane down. The noise sits well inside it: the kit and
nvbandwidth agreed to 1% on one H100, nvbandwidth with itself to 1.2% over two runs
(reports/measurements/2026-11-23-h100x1-silicon-vs-nvbandwidth), and a GPU's figure here is
the median of its repeats, each the median of its samples."""


def matmul_margin(mm: list[RunResult]) -> float | None:
    """The same for a matmul ceiling: the margin its runs named GPUs at (gpu_figures.outlier_pct:
    the silicon section says the same; why 10% by default: kit.workloads.matmul_ceiling.params);
    the model's reference judges every GPU on its own besides. None without a matmul run."""
    return outlier_pct(mm) / 100 if mm else None


COPY_FIGURES = (  # the copy worker's per-GPU figure, the words for it, the unit
    ("local_gbps", "HBM copy", "GB/s"),
    ("h2d_gbps", "host to device", "GB/s"),
    ("d2h_gbps", "device to host", "GB/s"),
)


@dataclass
class GpuFigure(HeldAgainstPeers):
    """One figure of one GPU: its value in each repeat, its standing against the model's
    reference, and the median of the box's other GPUs it is held against (None: no other GPU)."""

    key: str
    label: str
    unit: str
    values: list[float]
    standing: Standing
    margin: float
    others_median: float | None = None
    others: int = 0  # how many other GPUs have this figure

    @property
    def peers_median(self) -> float | None:
        return self.others_median

    @property
    def others_words(self) -> str:
        """ "the other GPU's 2,099", "the median of the 7 other GPUs, 702"."""
        if self.others == 1:
            return f"the other GPU's {_num(self.others_median)}"
        return f"the median of the {self.others} other GPUs, {_num(self.others_median)}"

    @property
    def vs_words(self) -> str | None:
        """ "-21% vs the others", "at the others' median" (within half a percent), None: no other
        GPU."""
        x = self.vs_peers
        if x is None:
            return None
        return "at the others' median" if abs(x) < 0.005 else f"{x:+.0%} vs the others"

    @property
    def vs_short(self) -> str:
        """Page 1's cell: "-21%", "" within half a percent of the others' median or without one."""
        x = self.vs_peers
        return "" if x is None or abs(x) < 0.005 else f"{x:+.0%}"


@dataclass
class GpuRow:
    """One GPU of the box: where it stood in the runs, which GPU of hardware.json that is,
    and its figures."""

    position: int  # CUDA's device number in the runs (the rank on the CPU)
    gpu: Gpu | None  # hardware.json's record; None on the CPU
    model: str | None
    figures: dict[str, GpuFigure] = field(default_factory=dict)
    weakest_pair: float | None = None  # GB/s, copy engine one way: its slowest pair
    weakest_pair_named: bool = False  # a pair it is in was named below the box's links
    busy_sm_mhz: float | None = None  # mean SM clock in the matmul runs while busy

    @property
    def name(self) -> str:
        return f"GPU {self.gpu.index}" if self.gpu else f"rank {self.position}"

    @property
    def verdict(self) -> str:
        """Its figures against the model's reference, together (kit.stats.acceptance.overall); NOT
        COMPARABLE when no figure had a reference to judge it."""
        judged = [
            f.standing.verdict
            for f in self.figures.values()
            if f.standing.verdict in (PASS, FAIL, UNDECIDED)
        ]
        return overall(judged) if judged else NOT_COMPARABLE

    @property
    def below(self) -> list[GpuFigure]:
        return [f for f in self.figures.values() if f.below]

    @property
    def nvlinks(self) -> str | None:
        """ "18 of 18 up" (the datasheet's count), "17 up", None when not read."""
        return nvlink_words(self.gpu)

    @property
    def identity(self) -> str:
        """The GPU by what a technician finds it by: UUID, serial (where recorded), bus id,
        NVLink lanes up."""
        g = self.gpu
        if g is None:
            return f"{self.name} (a gloo process on the CPU: no UUID, bus or NVLink)"
        parts = [g.uuid or "UUID not recorded", f"bus {g.pci_bus_id or 'not recorded'}"]
        if g.serial:
            parts.insert(1, f"serial {g.serial}")
        links = self.nvlinks
        parts.append(f"NVLinks {links}" if links else "NVLinks not read")
        return f"{self.name} ({', '.join(parts)})"

    @property
    def power(self) -> str | None:
        g = self.gpu
        if g is None or g.power_limit_w is None:
            return None
        dflt = g.power_default_limit_w
        return f"{g.power_limit_w:,.0f} W" + (f" of {dflt:,.0f}" if dflt else "")

    @property
    def ecc(self) -> str | None:
        e = self.gpu.ecc if self.gpu else None
        if e is None or e.mode_current is None:
            return None
        return ("on" if e.mode_current == 1 else "OFF") + (
            f", {uncorrected_words([e])}" if e.volatile_uncorrected is not None else ""
        )

    @property
    def settings(self) -> list[str]:
        """Page 1's cell: power limit, ECC and clocks, each where hardware.json has it."""
        named = (("power", self.power), ("ECC", self.ecc), ("", self.clocks))
        return [f"{k} {v}".strip() for k, v in named if v]

    @property
    def clocks(self) -> str | None:
        g = self.gpu
        top = (g.clocks_max_mhz or {}).get("sm") if g else None
        if top is None and self.busy_sm_mhz is None:
            return None
        words = f"SM max {top:,} MHz" if top else ""
        if self.busy_sm_mhz is not None:
            words += ("; " if words else "") + f"{self.busy_sm_mhz:,.0f} MHz mean in matmul"
        return words


def nvlink_words(gpu: Gpu | None) -> str | None:
    if gpu is None or (gpu.nvlinks is None and gpu.nvlink_active is None):
        return None
    up = sum(1 for x in gpu.nvlinks if x.active) if gpu.nvlinks is not None else gpu.nvlink_active
    spec = spec_for(gpu.name)
    return f"{up} of {spec.nvlink_links} up" if spec and spec.nvlink_links else f"{up} up"


@dataclass
class Box:
    """Every GPU and GPU pair of the box, judged; what page 1 and the per-GPU section print."""

    rows: list[GpuRow]
    links: list[LinkRow]
    columns: list[tuple[str, str, str]]  # (figure key, words, unit) in the table's order
    repeats: int  # the fewest repeats any figure of any GPU has
    smoke: bool = False
    notes: list[str] = field(default_factory=list)
    matmul: float | None = None  # the matmul ceilings' margin (matmul_margin); None: none ran

    @property
    def sources(self) -> str:
        """The runs its figures come from, in words: "copy-bandwidth and matmul-ceiling" (a
        decode-and-copy bundle has no matmul runs, and its section said it had)."""
        matmul = [k.startswith("tflops") for k, *_ in self.columns]
        kinds = (("copy-bandwidth", not all(matmul)), ("matmul-ceiling", any(matmul)))
        return " and ".join(words for words, ran in kinds if ran)

    @property
    def groups(self) -> list[tuple[str, list[str]]]:
        """Page 1's figure columns: (heading, figure keys), the host link's two directions in
        one column, so that one row a GPU fits an A4 page."""
        out: list[tuple[str, list[str]]] = []
        host = [k for k, *_ in self.columns if k in ("h2d_gbps", "d2h_gbps")]
        for key, label, unit in self.columns:
            if key in host:
                if key == host[0]:
                    out.append((f"host link {' / '.join(k[:3] for k in host)} ({unit})", host))
                continue
            out.append((f"{label.removeprefix('matmul ')} ({unit})", [key]))
        return out

    @property
    def references(self) -> list[GpuReference]:
        """The shipped per-GPU figures that judged a GPU here, each once."""
        found = {
            f.standing.reference.id: f.standing.reference
            for r in self.rows
            for f in r.figures.values()
            if f.standing.reference and f.standing.decision
        }
        return list(found.values())

    @property
    def margins(self) -> str:
        """The margins in words, as the page states them."""
        words = f"{COPY_MARGIN:.0%} for a copy"
        return words + (f", {self.matmul:.0%} for a matmul ceiling" if self.matmul else "")

    @property
    def screening(self) -> bool:
        """Fewer than 3 repeats: no interval, so no PASS or FAIL (kit.stats.acceptance.MIN_RUNS)."""
        return self.repeats < MIN_RUNS

    @property
    def outliers(self) -> list[str]:
        """One sentence per GPU named below the median of the box's other GPUs."""
        return [named_sentence(r) for r in self.rows if r.below]

    @property
    def link_outliers(self) -> list[str]:
        """One sentence per GPU the named pairs meet at (box_links.named_links)."""
        return named_links(self.links, [r.identity for r in self.rows])


def named_sentence(row: GpuRow) -> str:
    """ "GPU 1 (GPU-…, bus …, NVLinks 18 of 18 up): matmul bf16 alone 351 TFLOP/s, 50% below
    the median of the 3 other GPUs, 702 (named beyond 10%)"."""
    parts = [
        f"{f.label} {_num(f.median)} {f.unit}, {-(f.vs_peers or 0):.0%} below {f.others_words} "
        f"(named beyond {f.margin:.0%})"
        for f in row.below
    ]
    return f"{row.identity}: " + "; ".join(parts)


def _num(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"


def _busy_clock(runs: list[RunResult], uuid: str | None) -> float | None:
    """The mean SM clock of one GPU's telemetry samples that were busy (over half the period
    with a kernel running), over the matmul runs: a GPU held at a low clock shows here."""
    clocks = []
    for run in runs:
        for g in (run.telemetry.gpus if run.telemetry else None) or []:
            if uuid is None or g.get("uuid") != uuid:
                continue
            s = g.get("samples") or {}
            for util, mhz in zip(
                s.get("util_gpu") or [], s.get("sm_clock_mhz") or [], strict=False
            ):
                if isinstance(util, int | float) and util >= 50 and isinstance(mhz, int | float):
                    clocks.append(mhz)
    return sum(clocks) / len(clocks) if clocks else None


def _model(gpu: Gpu | None, names: list[str], i: int) -> str | None:
    if gpu is not None and gpu.name:
        return gpu.name
    return names[i] if i < len(names) and names[i] != "cpu" else None


def judge_box(benches: list[Benchmark], hardware: Hardware | None, smoke: bool) -> Box | None:
    """Every GPU's figures and standing, every pair's; None for a bundle without per-GPU
    checks (no copy or matmul run finished)."""
    copy, mm = silicon_runs(benches, "copy"), silicon_runs(benches, "matmul")
    if not copy and not mm:
        return None
    on_cpu = any(r.device == "cpu" for r in copy + mm)
    copies = copy_values(copy)
    dtypes = ceilings(mm)
    n = max([len(copies)] + [len(c.alone or c.together) for c in dtypes])
    gpus = hardware_of(copy or mm, hardware, n)
    names = (
        (copy[0].data.extra("names") if copy else None)
        or (mm[0].data.extra("gpus") if mm else None)
        or []
    )
    rows = [GpuRow(i, gpus[i], _model(gpus[i], names, i)) for i in range(n)]
    params = (copy[0].data.params or {}) if copy else {}
    cond = {k: params.get(k) for k in ("size_mib", "loop_count")}
    columns: list[tuple[str, str, str]] = []
    for key, label, unit in COPY_FIGURES:
        if not any(i < len(copies) and copies[i][key] for i in range(n)):
            continue
        columns.append((key, label, unit))
        for i, row in enumerate(rows):
            values = copies[i][key] if i < len(copies) else []
            standing = judge(row.model, key, values, cond, on_cpu, smoke, unit)
            row.figures[key] = GpuFigure(key, label, unit, values, standing, COPY_MARGIN)
    margin = matmul_margin(mm)
    for c in dtypes:
        per_gpu = c.alone or c.together  # one GPU all at once is that GPU alone
        held = "alone" if c.alone or len(per_gpu) == 1 else "all at once"
        shapes = {tuple(s) for s in c.shapes}
        # several: the reference's shape may be among them, so say why none is held against it
        shape = (
            list(shapes.pop())
            if len(shapes) == 1
            else f"not the same in every repeat ({c.shape_words})"
        )
        # a figure is either the one shape's (a reference that names it) or the best of one
        # search (a reference that names the search: which near-equal shape wins a search
        # changes from repeat to repeat, 2026-11-29 on one H200)
        cond = {"shape": shape, "search": c.search, "sustain_s": c.sustain_s, "held": held}
        key, label = f"tflops_{c.dtype}", f"matmul {c.dtype} {held}"
        columns.append((key, label, "TFLOP/s"))
        for i, row in enumerate(rows):
            values = per_gpu[i] if i < len(per_gpu) else []
            standing = judge(row.model, key, values, cond, on_cpu, smoke, "TFLOP/s")
            row.figures[key] = GpuFigure(key, label, "TFLOP/s", values, standing, margin or 0)
    for key, *_ in columns:  # each figure against the median of the box's other GPUs
        for r in rows:
            mids = [m for o in rows if o is not r and (m := o.figures[key].median) is not None]
            r.figures[key].others_median, r.figures[key].others = median(mids), len(mids)
    links = links_of(copy, gpus, hardware, COPY_MARGIN)
    for row in rows:
        row.weakest_pair, row.weakest_pair_named = weakest_pair(links, row.position)
        row.busy_sm_mhz = _busy_clock(mm, row.gpu.uuid if row.gpu else None)
    counts = [len(f.values) for r in rows for f in r.figures.values() if f.values]
    counts += [len(link.values) for link in links if link.values]
    box = Box(rows, links, columns, min(counts, default=0), smoke, matmul=margin)
    box.notes = _notes(box, n)
    return box


def judge_bundle(data: BundleData) -> Box | None:
    """The box of a bundle read (kit.model.load_bundle): `judge_box` over its benchmarks."""
    benches = build_benchmarks(data.results, data.recipe)
    return judge_box(benches, data.hardware, data.results.smoke)


def _notes(box: Box, n: int) -> list[str]:
    """What the table's reader needs besides the figures: the screening, one GPU, the
    references that did not apply and why (each reason once)."""
    out = []
    if box.screening:
        out.append(
            f"Screening: {box.repeats} repeat{'s' if box.repeats != 1 else ''} per figure, so "
            f"no PASS or FAIL against the model's reference (it takes {MIN_RUNS} for an "
            "interval); a GPU or link below the median of its peers is still named, from these runs."
        )
    if n == 1:
        out.append("One GPU: there is no other GPU in the box to hold it against.")
    seen: dict[str, list[str]] = {}
    for r in box.rows:
        for f in r.figures.values():
            if f.standing.verdict == NOT_COMPARABLE:
                seen.setdefault(f.standing.reason, []).append(f.label)
    for reason, labels in seen.items():
        figures = ", ".join(dict.fromkeys(labels))
        out.append(f"Not judged against a model's reference ({figures}): {reason}.")
    return out
