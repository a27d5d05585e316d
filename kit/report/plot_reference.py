"""Page 1's chart: every workload against its same-model reference, as a factor of it (1 = the
reference), with the interval's whiskers and the run count; only references that judge this
machine (kit.stats.acceptance.mismatches) are drawn, so no bar stands against another model."""

from __future__ import annotations

from typing import Any

from kit.report.mpl import Patch
from kit.report.plots import _figure, to_svg

COLOURS = {"PASS": "#1b7a36", "FAIL": "#b03a2e"}
UNDECIDED_COLOUR = "#8a8f98"
"""Each bar in its verdict's colour (the page's words beside it): a bar at 0.94x whose interval
reaches below the threshold is UNDECIDED, not a failure."""


def reference_rows(expectations: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """(label, factor, low, high, n) per comparable, measured reference; times inverted so that
    over 1 is always better than the reference."""
    rows = []
    for bench, refs in expectations.items():
        for e in refs:
            if not e.get("comparable") or e.get("measured") is None or not e["value"]:
                continue
            hib = e.get("higher_is_better", True)
            ref = e["value"]

            def norm(x: float | None, ref: float = ref, hib: bool = hib) -> float | None:
                return None if x is None or x <= 0 else (x / ref if hib else ref / x)

            lo, hi = norm(e.get("low")), norm(e.get("high"))
            rows.append(
                {
                    "label": f"{bench} / {e.get('variant', '-')} ({e['label']})",
                    "verdict": e.get("verdict"),
                    "factor": norm(e["measured"]),
                    "low": min(lo, hi) if lo and hi else None,
                    "high": max(lo, hi) if lo and hi else None,
                    "n": e.get("n"),
                    "threshold": 1 - e["tolerance"],
                }
            )
    return rows


def against_reference(rows: list[dict[str, Any]], salt: str) -> str | None:
    """Horizontal bars of the factor, whiskers for the interval, a line at the reference."""
    if not rows:
        return None
    fig, ax = _figure(0.5 + 0.38 * len(rows))
    ys = list(range(len(rows)))[::-1]
    for y, r in zip(ys, rows, strict=True):
        colour = COLOURS.get(r.get("verdict") or "", UNDECIDED_COLOUR)
        ax.barh(y, r["factor"], color=colour, alpha=0.55, height=0.55)
        if r["low"] is not None:
            ax.errorbar(
                r["factor"],
                y,
                xerr=[[r["factor"] - r["low"]], [r["high"] - r["factor"]]],
                fmt="none",
                ecolor="#222",
                capsize=3,
                lw=1,
            )
        interval = "" if r["low"] is not None else ", no interval"
        ax.text(
            r["factor"],
            y + 0.32,
            f" {r['factor']:.2f}x, n={r['n']}{interval}",
            fontsize=7,
            va="center",
        )
        ax.plot([r["threshold"]] * 2, [y - 0.3, y + 0.3], color="#555", ls=":", lw=1)
    ax.axvline(1.0, color="#222", lw=1)
    ax.set_yticks(ys)
    ax.set_yticklabels([r["label"] for r in rows], fontsize=7)
    top = max(max(r["high"] or r["factor"] for r in rows), 1.0) * 1.15
    ax.set_xlim(0, top)
    ax.set_xlabel("factor of the same-model reference (1 = reference; dotted: its threshold)")
    shown = dict.fromkeys(r.get("verdict") or "UNDECIDED" for r in rows)
    handles = [Patch(color=COLOURS.get(v, UNDECIDED_COLOUR), alpha=0.55, label=v) for v in shown]
    ax.legend(
        handles=handles,
        fontsize=7,
        frameon=False,
        loc="lower right",
        ncol=len(handles),
        bbox_to_anchor=(1.0, 1.0),
        borderaxespad=0.1,
    )  # above the bars, never on one
    return to_svg(fig, salt)
