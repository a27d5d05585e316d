"""What `kit accept` judges a bundle against, as the command line gives it: `--against` (a
published figure's id, a bundle directory, or a number with its unit) and `--tolerance`."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kit.io.errors import InputError
from kit.refs.published import Figure, by_id, figures

NUMBER = re.compile(
    r"^\s*((?:[0-9]{1,3}(?:[_,][0-9]{3})+|[0-9]+)(?:\.[0-9]+)?) ?([A-Za-z/%]+)?\s*$", re.ASCII
)
"""330GB/s, 14,000tokens/s, 14_000 tokens/s: separators only between groups of three digits, the
unit one word as the metric catalog writes it (not "GB / s", no other space than one ASCII one)."""


@dataclass
class Against:
    """What the bundle is judged against."""

    what: str  # "figure" | "bundle" | "number"
    label: str
    figure: Figure | None = None
    bundle: Path | None = None
    value: float | None = None
    unit: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"what": self.what, "label": self.label}
        if self.figure is not None:
            out["figure"] = self.figure.to_dict()
        if self.bundle is not None:
            out["bundle"] = str(self.bundle)
            out.update(self.detail)
        if self.value is not None:
            out.update({"value": self.value, "unit": self.unit})
        return out


def parse_against(text: str) -> Against:
    """A published figure's id, a bundle directory, or a number with its unit."""
    if any(f.id == text for f in figures()):
        f = by_id(text)
        return Against("figure", f.title, figure=f)
    path = Path(text)
    if path.is_dir():
        if not (path / "results.json").is_file():
            raise InputError(f"--against {text}: a directory, but not a kit bundle")
        return Against("bundle", path.name, bundle=path)
    m = NUMBER.match(text)
    if m:
        value = float(m.group(1).replace(",", "").replace("_", ""))
        unit = (m.group(2) or "").strip()
        if not unit:
            raise InputError(
                f"--against {text!r}: a number needs its unit (330GB/s, 14000tokens/s), so that "
                "it judges only the metric it names"
            )
        if value <= 0:
            raise InputError(f"--against {text!r}: a reference must be more than 0")
        return Against("number", text.strip(), value=value, unit=unit)
    raise InputError(
        f"--against {text!r}: not a published figure's id (kit refs published), a bundle "
        "directory, or a number with its unit such as 330GB/s"
    )


def parse_tolerances(items: list[str]) -> tuple[float | None, dict[str, float]]:
    """(for every metric, per metric) from "0.05" and "metric=0.03" items; a malformed item
    ("=0.1", "a=0.1=0.2") or one given twice is a usage error, never half-read."""
    every, per = None, {}
    for item in items:
        name, eq, raw = item.partition("=")
        if not eq:
            name, raw = "", item
        if (eq and not name) or "=" in raw or any(c.isspace() for c in item):  # as written: 0.05
            raise InputError(f"--tolerance {item!r}: a fraction (0.05) or METRIC=FRACTION")
        try:
            if "_" in raw or not raw.isascii():  # float() reads 0.0_5 and full-width ０.０５
                raise ValueError(raw)
            value = float(raw)
        except ValueError:
            raise InputError(
                f"--tolerance {item!r}: a fraction (0.05) or METRIC=FRACTION"
            ) from None
        if not 0 <= value < 1:
            raise InputError(f"--tolerance {item!r}: the fraction must be in [0, 1)")
        if (name in per) if name else (every is not None):
            what = f"for {name}" if name else "for every metric"
            raise InputError(f"--tolerance {item!r}: a tolerance {what} was already given")
        if name:
            per[name] = value
        else:
            every = value
    return every, per
