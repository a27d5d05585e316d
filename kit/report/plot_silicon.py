"""The silicon section's figures: the GPU-pair heat maps, the copy-bandwidth plateau and the
matmul ceilings (drawn in the page's style, kit.report.plots)."""

from __future__ import annotations

import math
from typing import Any

from kit.report.mpl import matplotlib
from kit.report.plot_colors import OTHER_COLORS
from kit.report.plots import RC, _figure, _size_axis, fmt_num, text, to_svg


def heatmap(m: list[list[float | None]], title: str, unit: str, salt: str) -> str | None:
    """A GPU-pair matrix as a heat map, row = source, column = destination, each cell labelled;
    N/A cells (the diagonal, pairs without peer access) left blank."""
    n = len(m)
    if n < 2:
        return None
    values = [v for row in m for v in row if v is not None]
    if not values:
        return None
    with matplotlib.rc_context(RC):
        fig, ax = _figure(min(1.2 + 0.45 * n, 5.5))
        grid = [[math.nan if v is None else v for v in row] for row in m]
        image = ax.imshow(grid, cmap="viridis", vmin=0, vmax=max(values), aspect="equal")
        for i, row in enumerate(m):
            for j, v in enumerate(row):
                label = "N/A" if v is None else fmt_num(v)
                bright = v is not None and v > 0.6 * max(values)
                ax.text(
                    j,
                    i,
                    label,
                    ha="center",
                    va="center",
                    fontsize=7,
                    color="#000" if bright else ("#999" if v is None else "#fff"),
                )
        ax.set_xticks(range(n))
        ax.set_yticks(range(n))
        ax.set_xlabel("destination GPU")
        ax.set_ylabel("source GPU")
        ax.grid(False)
        fig.colorbar(image, ax=ax, label=text(unit), shrink=0.8)
        ax.set_title(text(title, lines=2))
        return to_svg(fig, salt)


def plateau(rows: list[dict[str, Any]], title: str, salt: str) -> str | None:
    """Copy bandwidth against buffer size on one GPU: where each copy levels off."""
    keys = {
        "h2d_gbps": "host to device",
        "d2h_gbps": "device to host",
        "local_gbps": "device-local",
    }
    if len(rows) < 2:
        return None
    with matplotlib.rc_context(RC):
        fig, ax = _figure(2.8)
        xs = [r["mib"] * 2**20 for r in rows]
        for (key, label), color in zip(keys.items(), OTHER_COLORS, strict=False):
            pts = [(x, r[key]) for x, r in zip(xs, rows, strict=True) if r.get(key) is not None]
            if pts:
                ax.plot(*zip(*pts, strict=True), marker="o", markersize=3, color=color, label=label)
        _size_axis(ax, xs)
        ax.set_xlabel("buffer size (log2 scale)")
        ax.set_yscale("log")
        ax.set_ylabel("GB/s (log scale)")
        ax.legend(loc="best")
        ax.set_title(text(title, lines=2))
        return to_svg(fig, salt)


def ceilings(rows: list[dict[str, Any]], title: str, salt: str) -> str | None:
    """Per dtype, one bar per GPU (all GPUs at once): a weak or throttled GPU stands out."""
    rows = [r for r in rows if r.get("together")]
    if not rows:
        return None
    with matplotlib.rc_context(RC):
        fig, ax = _figure(0.5 * len(rows) * max(1, len(rows[0]["together"])) ** 0.5 + 1.2)
        n = max(len(r["together"]) for r in rows)
        width = 0.8 / n
        for i in range(n):
            xs = [k + i * width for k in range(len(rows))]
            ys = [r["together"][i] if i < len(r["together"]) else 0 for r in rows]
            ax.bar(
                xs,
                ys,
                width=width * 0.95,
                color=OTHER_COLORS[i % len(OTHER_COLORS)],
                label=f"GPU {i}",
            )
        ax.set_xticks([k + 0.4 - width / 2 for k in range(len(rows))])
        ax.set_xticklabels([text(r["dtype"]) for r in rows])
        ax.set_ylabel("TFLOP/s per GPU (all at once)")
        if n <= 8:
            ax.legend(loc="best", ncol=min(n, 4))
        ax.set_title(text(title, lines=2))
        return to_svg(fig, salt)
