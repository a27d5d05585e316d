"""A drawn figure of the report (an SVG, inlined or as a data: URI for WeasyPrint) and the
silicon section's figures: kept apart from kit.report.render so that the renderer stays one
reading of the page, and compare draws with the same Figure."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

from kit.model.hardware import Hardware
from kit.report import analysis, plot_silicon

FIRST_PAGE = ("decode",)
"""Figure kinds drawn on page 1 beside their benchmark's table (a decode report's tokens/s
against batch), their section pointing there."""


@dataclass
class Figure:
    key: str
    caption: str
    svg: str

    @property
    def first(self) -> bool:
        return self.key in FIRST_PAGE

    @property
    def uri(self) -> str:
        """The SVG as a data: URI: WeasyPrint draws it as one image, much faster than inline."""
        return "data:image/svg+xml;base64," + base64.b64encode(self.svg.encode()).decode()


def silicon_view(benches: list[analysis.Benchmark], hardware: Hardware) -> dict[str, Any] | None:
    """The silicon section: its facts (analysis.silicon) and its figures, or None."""
    facts = analysis.silicon(benches, hardware)
    if facts is None:
        return None
    figures = []
    for m in facts.matrices:
        unit = "us" if m["key"] == "latency_us" else "GB/s"
        svg = plot_silicon.heatmap(m["matrix"], m["title"], unit, f"silicon-{m['key']}")
        if svg:
            figures.append(Figure(m["key"], f"GPU pairs: {m['title']}, row = source", svg))
    svg = plot_silicon.plateau(
        facts.plateau, "copy bandwidth against buffer size, first GPU", "silicon-plateau"
    )
    if svg:
        figures.append(
            Figure(
                "plateau",
                "copy bandwidth against buffer size on the first GPU (median of samples)",
                svg,
            )
        )
    svg = plot_silicon.ceilings(
        facts.ceilings, "matmul ceiling per GPU, all GPUs at once", "silicon-ceilings"
    )
    if svg:
        figures.append(
            Figure(
                "ceilings", "best sustained matmul TFLOP/s per dtype and GPU, all GPUs at once", svg
            )
        )
    return {"facts": facts, "figures": figures}
