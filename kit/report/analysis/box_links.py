"""The box's GPU pairs: each pair's copy-engine bandwidth (one way per ordered pair, both ways per
unordered one) against the median of the box's other pairs that take the same path (the others:
on 2 GPUs a median with the pair itself in it is the midpoint of the two directions). Pairs on different
paths are never held against each other: on a PCIe box, or a bridged NVLink one, a pair across
the CPUs is slower by design (hardware.json's topology, in nvidia-smi topo -m words: every NV#
is the NVLink path, so a pair with a lane down, NV17 among NV18s, is held against the others)."""

from __future__ import annotations

from dataclasses import dataclass

from kit.model import Hardware, RunResult
from kit.model.hardware import Gpu
from kit.report.analysis.gpu_figures import HeldAgainstPeers, median, pair_values

LINK_TESTS = (  # the pair matrix, its words, how a pair is written
    ("ce_one_way", "copy engine one way", "->"),
    ("ce_both_ways", "copy engine both ways", "<->"),
)


@dataclass
class LinkRow(HeldAgainstPeers):
    """One GPU pair in one test: its value in each repeat, its path, and the median of the
    box's other pairs on that path in that test."""

    a: int  # positions in the runs (kit.report.analysis.gpu_figures)
    b: int
    test: str
    label: str
    arrow: str
    path: str | None  # "NV18", "PIX", "SYS"; None: no topology recorded
    values: list[float]
    margin: float
    class_median: float | None = None
    others: int = 0  # how many other pairs took its path in its test

    @property
    def path_class(self) -> str:
        """The path pairs are compared within: "NVLink" for any NV#, else the PCIe word."""
        if self.path is None:
            return "GPU pair"
        return "NVLink" if self.path.startswith("NV") else self.path

    @property
    def peers_median(self) -> float | None:
        return self.class_median

    def words(self, identities: list[str]) -> str:
        """ "GPU 0 -> GPU 3 (NV18) copy engine one way 300 GB/s, 19% below the median of the 11
        other pairs on its path, 370 GB/s"."""
        path = f" ({self.path})" if self.path else ""
        others = (
            "the other pair on its path"
            if self.others == 1
            else f"the median of the {self.others} other pairs on its path"
        )
        return (
            f"{self.pair_words(identities)}{path} {self.label} {median_words(self.median)} GB/s, "
            f"{-(self.vs_peers or 0):.0%} below {others}, {median_words(self.class_median)} GB/s"
        )

    def pair_words(self, identities: list[str]) -> str:
        def short(i: int) -> str:
            return identities[i].split(" (")[0] if i < len(identities) else f"GPU {i}"

        return f"{short(self.a)} {self.arrow} {short(self.b)}"


def median_words(x: float | None) -> str:
    return "-" if x is None else (f"{x:,.0f}" if x >= 100 else f"{x:.3g}")


def _path(hardware: Hardware | None, ga: Gpu | None, gb: Gpu | None) -> str | None:
    matrix = hardware.topology.matrix if hardware and hardware.topology else []
    if ga is None or gb is None or max(ga.index, gb.index) >= len(matrix):
        return None
    row = matrix[ga.index]
    return row[gb.index] if gb.index < len(row) else None


def links_of(
    copy_runs: list[RunResult], gpus: list[Gpu | None], hardware: Hardware | None, margin: float
) -> list[LinkRow]:
    """Every measured pair of LINK_TESTS, each with the median of its path's other pairs."""
    out: list[LinkRow] = []
    for test, label, arrow in LINK_TESTS:
        cells = pair_values(copy_runs, test) or []
        found = []
        for a, row in enumerate(cells):
            for b, values in enumerate(row):
                if a == b or not values or (arrow == "<->" and b < a):
                    continue
                ga = gpus[a] if a < len(gpus) else None
                gb = gpus[b] if b < len(gpus) else None
                found.append(
                    LinkRow(a, b, test, label, arrow, _path(hardware, ga, gb), values, margin)
                )
        for link in found:
            same = [
                m
                for x in found
                if x is not link and x.path_class == link.path_class and (m := x.median) is not None
            ]
            link.class_median, link.others = median(same), len(same)
        out += found
    return out


def weakest_pair(links: list[LinkRow], position: int) -> tuple[float | None, bool]:
    """A GPU's slowest pair, copy engine one way (as source or destination), and whether any
    pair it is in was named below its path's other pairs."""
    mine = [x for x in links if position in (x.a, x.b)]
    one_way = [m for x in mine if x.test == "ce_one_way" and (m := x.median) is not None]
    return (min(one_way) if one_way else None), any(x.below for x in mine)


def named_links(links: list[LinkRow], identities: list[str]) -> list[str]:
    """One sentence per GPU the named pairs meet at: a lane down on an NVSwitch box slows every
    pair of one GPU, and page 1 names that GPU once with its pairs, not each pair with both
    ends. The GPU in the most named pairs first; each end's UUID, bus id and NVLinks said."""
    named = [x for x in links if x.below]
    out = []
    while named:
        counts: dict[int, int] = {}
        for x in named:
            for end in (x.a, x.b):
                counts[end] = counts.get(end, 0) + 1
        hub = max(sorted(counts), key=lambda end: counts[end])
        mine = [x for x in named if hub in (x.a, x.b)]
        named = [x for x in named if hub not in (x.a, x.b)]
        others = sorted({end for x in mine for end in (x.a, x.b)} - {hub})
        ends = "; ".join(identities[i] for i in others if i < len(identities))
        who = identities[hub] if hub < len(identities) else f"GPU {hub}"
        if len(mine) == 1:
            (x,) = mine
            both = "; ".join(identities[i] for i in (x.a, x.b) if i < len(identities))
            out.append(f"{x.words(identities)} (named beyond {x.margin:.0%}); its ends: {both}")
            continue
        out.append(
            f"{who} is in {len(mine)} pair figures more than {mine[0].margin:.0%} below the "
            "other pairs on the same path: "
            + "; ".join(x.words(identities) for x in mine)
            + f"; the other end{'s' if len(others) > 1 else ''}: {ends}"
        )
    return out
