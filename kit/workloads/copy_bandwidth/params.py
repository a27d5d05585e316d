"""Copy-bandwidth parameters: nvbandwidth's buffer size, copies per sample and sample count."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from kit.workloads.base import STRICT, check, check_sizes


@dataclass
class CopyBandwidthParams:
    """nvbandwidth -b SIZE_MIB --loopCount LOOP_COUNT -i SAMPLES, and the pair matrix's own.

    size_mib / loop_count / samples: host-to-device, device-to-host and device-local copies
    (nvbandwidth's defaults are 512 MiB, 16 copies a sample, 3 samples; the kit takes more
    samples, the median of many). plateau_min_mib: the smallest size of the plateau sweep on the
    first GPU (x plateau_factor up to size_mib), which shows where each bandwidth levels off.
    pair_*: every GPU pair (ordered for one way, unordered for both ways), copy engine and SM.
    staged_size_mib: the same pairs staged through pinned host memory (what P2P-off costs).
    latency_copies: back-to-back 4-byte copies per latency sample.
    """

    __pydantic_config__ = STRICT
    # The parameters that change how long or how often a figure is measured, never the figure:
    # a known machine that differs from a run only in these measured the same workload
    # (kit.refs matches on every other parameter, one this list lacks included, and names these).
    # How many samples are taken (each figure is their median); the copies inside one sample
    # (loop_count) are not among them: a sample's launch cost is spread over them.
    SAME_FIGURE: ClassVar[frozenset[str]] = frozenset({"samples", "pair_samples"})

    size_mib: int = 512
    loop_count: int = 16
    samples: int = 9
    plateau_min_mib: int = 1
    plateau_factor: int = 4
    pairs: bool = True
    pair_size_mib: int = 512
    pair_loop_count: int = 8
    pair_samples: int = 5
    staged: bool = True
    staged_size_mib: int = 64
    latency_copies: int = 100

    def __post_init__(self) -> None:
        check_sizes(self, ("size_mib", "loop_count", "samples"))
        check(1 <= self.plateau_min_mib <= self.size_mib, "plateau_min_mib", "1 to size_mib")
        check(self.plateau_factor >= 2, "plateau_factor", "at least 2")
        check_sizes(self, ("pair_size_mib", "pair_loop_count", "pair_samples"))
        check(
            1 <= self.staged_size_mib <= self.pair_size_mib, "staged_size_mib", "1 to pair_size_mib"
        )
        check(self.latency_copies >= 1, "latency_copies", "at least 1")

    def plateau_sizes(self) -> list[int]:
        """Sweep sizes in MiB: plateau_min_mib x plateau_factor^k below size_mib, then size_mib."""
        out, size = [], self.plateau_min_mib
        while size < self.size_mib:
            out.append(size)
            size *= self.plateau_factor
        return [*out, self.size_mib]
