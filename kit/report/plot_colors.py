"""The figures' colours: p2p and no-p2p keep theirs in every report and comparison, a
comparison's machines shade them, and the other series take a palette, then evenly spaced hues."""

from __future__ import annotations

from kit.report.mpl import matplotlib, to_hex, to_rgb

FIXED_COLORS = {"p2p": "#1f5fa8", "no-p2p": "#d9822b"}
OTHER_COLORS = ["#3a923a", "#8c4fb0", "#c03d3d", "#6b6b6b", "#b59b00", "#1b9e9e"]


def colors(variants: list[str]) -> dict[str, str]:
    """A colour per series: p2p and no-p2p keep theirs, in the report and in a comparison alike
    (a comparison's "MACHINE p2p" series take p2p's hue, one shade per machine); the rest take
    the palette, and past it (a comparison of a fleet: dozens of machines) evenly spaced hues,
    none repeated."""
    shades: dict[str, str] = {}
    for fixed, hue in FIXED_COLORS.items():
        named = [v for v in dict.fromkeys(variants) if v.endswith(f" {fixed}")]
        ks = SHADES[1:] if fixed in variants else SHADES  # the hue itself is taken already
        if named and len(named) <= len(ks):
            shades.update({v: _shade(hue, k) for v, k in zip(named, ks, strict=False)})
    others = [v for v in dict.fromkeys(variants) if v not in FIXED_COLORS and v not in shades]
    if len(others) <= len(OTHER_COLORS):
        spare = OTHER_COLORS[: len(others)]
    else:
        ramp = matplotlib.colormaps["turbo"]
        spare = [to_hex(ramp(0.05 + 0.9 * i / (len(others) - 1))) for i in range(len(others))]
    picked = dict(zip(others, spare, strict=True))
    return {v: FIXED_COLORS.get(v) or shades.get(v) or picked[v] for v in variants}


SHADES = (0.0, -0.45, 0.45, -0.7, 0.65)
"""Machine k of a comparison draws a fixed variant's hue mixed this far towards black (< 0) or
white (> 0): the first machine in the report's own colour."""


def _shade(hue: str, k: float) -> str:
    r, g, b = to_rgb(hue)
    target = 1.0 if k > 0 else 0.0
    return to_hex(tuple(c + (target - c) * abs(k) for c in (r, g, b)))
