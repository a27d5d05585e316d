"""Placement: GPU sets that differ in topology (same switch, same socket, across sockets)."""

from __future__ import annotations

from itertools import combinations

from kit.inventory.topology import link_rank
from kit.model.hardware import Hardware

# --------------------------------------------------------------------------------------------
# Placement: GPU sets that differ in topology
# --------------------------------------------------------------------------------------------


def suggest_gpu_sets(inv: Hardware, size: int = 2, max_combos: int = 20000) -> list[dict]:
    """One GPU set of `size` per distinct worst link inside the set, best link first.

    On 8 PCIe GPUs over two sockets this gives e.g. [0,1] over PIX, [0,2] over NODE and [0,4]
    over SYS: the placement experiment (same socket vs across sockets) as recipe variants. The
    lowest GPU indices win ties, so the suggestion is stable.
    """
    matrix = inv.topology.matrix if inv.topology else []
    n = len(matrix)
    if size < 2 or size > n:
        return []
    found: dict[str, list[int]] = {}
    for k, combo in enumerate(combinations(range(n), size)):
        if k >= max_combos:
            break
        worst = max((matrix[a][b] for a, b in combinations(combo, 2)), key=link_rank)
        found.setdefault(worst, list(combo))
    out = []
    for word in sorted(found, key=link_rank):
        ids = found[word]
        numa = sorted({str(inv.gpus[i].numa_node) for i in ids})
        out.append(
            {
                "gpu_ids": ids,
                "link": word,
                "numa_nodes": numa,
                "why": _placement_why(word, len(numa) > 1),
                "variant": {
                    "name": f"gpus-{'-'.join(map(str, ids))}-{word.lower()}",
                    "gpu_ids": ids,
                },
            }
        )
    return out


def _placement_why(word: str, cross_numa: bool) -> str:
    if word.startswith("NV"):
        return f"every pair joined by {word[2:]} NVLink links"
    where = "across NUMA nodes" if cross_numa else "within one NUMA node"
    return f"PCIe ({word}), {where}"
