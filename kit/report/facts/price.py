"""A price per GPU-hour with its currency and where it came from.

`--price-per-gpu-hour 3.50USD` (or `USD3.50`, `$3.50`, `3.50 EUR`); `--price-source` names where
it came from (a quote, a list price and its date). A cost printed without its currency and
source cannot be checked, so the report prints both, and says so when either is missing.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

from kit.io.errors import InputError

MAX_PRICE = 1000.0
SYMBOLS = {"$": "USD", "€": "EUR", "£": "GBP"}
PRICE = re.compile(
    r"^\s*(?:(?P<pre>[A-Za-z]{3})|(?P<sym>[$€£]))?\s*(?P<amount>[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)"
    r"\s*(?P<post>[A-Za-z]{3})?\s*$"
)


@dataclass(frozen=True)
class Price:
    """One GPU for one hour: `amount` in `currency` (ISO 4217 code; None: not given)."""

    amount: float
    currency: str | None = None
    source: str | None = None

    @property
    def words(self) -> str:
        """ "3.5 USD per GPU-hour (source: ...)" with what is missing said."""
        money = f"{self.amount:g} {self.currency}" if self.currency else f"{self.amount:g} "
        money += "" if self.currency else "(currency not given)"
        source = self.source or "not given (--price-source)"
        return f"{money} per GPU-hour, source: {source}"

    @property
    def unit(self) -> str:
        return self.currency or "currency units"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def check_priced_device(
    price: Price | float | None, device: str, where: object, option: str
) -> None:
    """A price per GPU-hour prices a GPU: a bundle that ran on the CPU (device cpu) used none, so
    a cost per unit of work from it would be a number with no meaning for a GPU buyer."""
    if price is not None and device != "cuda":
        raise InputError(
            f"{option}: {where} ran on the {device.upper()} (device {device}): it used no GPU, "
            "so a price per GPU-hour prices nothing in it"
        )


def _expected(value: object) -> str:
    """The one line for any price this parser cannot take: its form and its range at once."""
    return (
        f"--price-per-gpu-hour {str(value)[:40]!r}: expected the price of one GPU for one "
        f"hour, more than 0 and less than {MAX_PRICE:g}, such as 3.50USD, USD3.50 or 3.50"
    )


def parse_price(value: str | float | Price | None, source: str | None = None) -> Price | None:
    """The price from the command line (a number, with a currency code or symbol before or
    after it); an InputError naming --price-per-gpu-hour otherwise."""
    if value is None and source is not None:
        raise InputError(
            "--price-source: only with --price-per-gpu-hour (it says where that price came from)"
        )
    if value is None or isinstance(value, Price):
        return value
    if isinstance(value, int | float):
        amount, currency = float(value), None
    else:
        m = PRICE.match(str(value))
        if m is None or (m.group("pre") and (m.group("post") or m.group("sym"))):
            raise InputError(_expected(value))
        amount = float(m.group("amount"))
        code = m.group("pre") or m.group("post")
        currency = code.upper() if code else SYMBOLS.get(m.group("sym") or "")
    if not 0 < amount < MAX_PRICE:  # also NaN
        raise InputError(_expected(value))
    return Price(amount, currency, (source or "").strip() or None)
