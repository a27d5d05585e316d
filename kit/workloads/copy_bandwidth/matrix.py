"""The pair matrix, independent of any GPU: which pairs to measure, and nvbandwidth's layout.

Standard library only: the worker fills matrices with it, the report prints and draws them,
and the tests drive it with any number of devices (a GPU pair cannot exist on the CPU).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from itertools import combinations, permutations

Matrix = list[list[float | None]]  # [row][column], None: not measured (nvbandwidth's N/A)

TITLES = {  # each measurement's heading, in nvbandwidth's words where nvbandwidth has it
    "h2d_gbps": "memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)",
    "d2h_gbps": "memcpy CE CPU(row) <- GPU(column) bandwidth (GB/s)",
    "local_gbps": "memcpy local GPU(column) bandwidth (GB/s)",
    "ce_one_way": "memcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)",
    "ce_both_ways": "memcpy CE GPU(row) <-> GPU(column) Total bandwidth (GB/s)",
    "sm_one_way": "memcpy SM GPU(row) -> GPU(column) bandwidth (GB/s)",
    "sm_both_ways": "memcpy SM GPU(row) <-> GPU(column) Total bandwidth (GB/s)",
    "latency_us": "memcpy CE GPU(row) -> GPU(column) latency of a 4-byte copy (us)",
    "staged_one_way": "staged through pinned host memory GPU(row) -> GPU(column) bandwidth (GB/s)",
}


def one_way(n: int, measure: Callable[[int, int], float | None]) -> Matrix:
    """measure(src, dst) for every ordered pair of distinct devices; the diagonal stays N/A.

    Row = source, column = destination (nvbandwidth's "GPU(row) -> GPU(column)")."""
    out: Matrix = [[None] * n for _ in range(n)]
    for src, dst in permutations(range(n), 2):
        out[src][dst] = measure(src, dst)
    return out


def both_ways(n: int, measure: Callable[[int, int], float | None]) -> Matrix:
    """measure(a, b) once per unordered pair (both directions at once, total GB/s); symmetric."""
    out: Matrix = [[None] * n for _ in range(n)]
    for a, b in combinations(range(n), 2):
        out[a][b] = out[b][a] = measure(a, b)
    return out


def render(title: str, matrix: Matrix, labels: list[str] | None = None) -> str:
    """The matrix as nvbandwidth prints it: a title line, columns 10 wide, 2 decimals, N/A,
    then `SUM key total` (nvbandwidth's own layout, so the two outputs read side by side)."""
    rows = len(matrix)
    cols = len(matrix[0]) if matrix else 0
    labels = labels or [str(i) for i in range(rows)]
    width = max(2, *(len(s) for s in labels)) if labels else 2
    lines = [title, " " * width + "".join(f"{c:>10}" for c in range(cols))]
    for label, row in zip(labels, matrix, strict=True):
        cells = "".join(f"{'N/A':>10}" if v is None else f"{v:>10.2f}" for v in row)
        lines.append(f"{label:>{width}}{cells}")
    total = sum(v for row in matrix for v in row if v is not None)
    return "\n".join([*lines, "", f"SUM {total:.2f}"])


def off_diagonal(matrix: Matrix) -> list[float]:
    """Every measured value (the pairs), row by row."""
    return [v for row in matrix for v in row if v is not None]


@dataclass(frozen=True)
class PairTest:
    """One pair matrix: "one" way (ordered pairs) or "both" ways (unordered), its measurement,
    and whether it needs peer access both ways (the staged path does not)."""

    shape: str
    measure: Callable[[int, int], float]
    needs_peer: bool = True


def measure_all(
    n: int,
    peer: list[list[bool]],
    tests: dict[str, PairTest],
    notes: list[str],
    log: Callable[[str], None],
) -> dict[str, Matrix | None]:
    """Every test's matrix. A pair without peer access both ways is N/A where peer access is
    needed; a test the machine refuses (a RuntimeError) loses its matrix, with a note, and the
    others still run."""
    out: dict[str, Matrix | None] = {}
    for name, t in tests.items():

        def gated(a: int, b: int, t: PairTest = t) -> float | None:
            return t.measure(a, b) if not t.needs_peer or (peer[a][b] and peer[b][a]) else None

        try:
            out[name] = (one_way if t.shape == "one" else both_ways)(n, gated)
        except RuntimeError as exc:
            out[name] = None
            notes.append(f"pairs {name} not measured: {str(exc).splitlines()[0][:200]}")
            continue
        log(f"pairs {name}: {[round(v, 2) for v in off_diagonal(out[name] or [])]}")
    return out
