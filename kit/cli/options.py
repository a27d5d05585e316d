"""Options that more than one command takes, declared once (their help cannot drift apart)."""

from __future__ import annotations

from typing import Annotated

import typer

PricePerGpuHour = Annotated[
    str | None,
    typer.Option(
        help="Price of one GPU for one hour with its currency (3.50USD; > 0, < 1000): adds "
        "cost per 1M units of work."
    ),
]
PriceSource = Annotated[
    str | None,
    typer.Option(help="Where the price comes from (a quote, a list price and its date)."),
]
