"""Hardware inventory: what the machine is, from NVML and the operating system.

nvml.py and host.py record raw answers (a snapshot), topology.py interprets a snapshot (pure),
placement.py suggests GPU sets, collect.py ties them together. The names below are the package's
entry points for the rest of the driver.
"""

from kit.inventory.collect import collect_snapshot, measure
from kit.inventory.placement import suggest_gpu_sets
from kit.inventory.topology import build_inventory, summary_line

__all__ = [
    "build_inventory",
    "collect_snapshot",
    "measure",
    "suggest_gpu_sets",
    "summary_line",
]
