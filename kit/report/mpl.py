"""matplotlib, imported with stop signals held: every report module takes its names from here.

matplotlib's compiled parts (ft2font, _path, _image) are pybind11 modules. A stop signal whose
handler raises (the kit's, kit.shared.stop) while one of them initializes becomes "ImportError:
initialization failed": the seal then says the report's libraries are missing, and the half-made
module aborts the interpreter as it exits (SIGABRT instead of 130; CI, 2026-11-30, a SIGINT one
second into `kit reproduce` on a loaded machine). Held, the signal is delivered once the import
has ended, and the command stops with 128 + the signal as at any other moment.
"""

from __future__ import annotations

from kit.shared import stop

with stop.held():
    import matplotlib
    from matplotlib.colors import to_hex, to_rgb
    from matplotlib.figure import Figure  # not pyplot: no global figure registry, no GUI backend
    from matplotlib.patches import Patch
    from matplotlib.ticker import (
        FixedLocator,
        FuncFormatter,
        MaxNLocator,
        NullFormatter,
        NullLocator,
    )

__all__ = [
    "Figure",
    "FixedLocator",
    "FuncFormatter",
    "MaxNLocator",
    "NullFormatter",
    "NullLocator",
    "Patch",
    "matplotlib",
    "to_hex",
    "to_rgb",
]
