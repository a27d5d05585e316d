"""`kit compare`: bundles side by side (the work is kit.report.compare)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kit.cli.options import (
    AllowedSigners,
    AllowUnsigned,
    PricePerGpuHour,
    PriceSource,
    ReadBrokenSignature,
)


def compare(
    bundles: Annotated[list[Path], typer.Argument(help="Two or more bundle directories.")],
    baseline: Annotated[
        str,
        typer.Option(
            help="The bundle the others are compared with: its position (1-based) or path."
        ),
    ] = "1",
    out: Annotated[
        Path | None, typer.Option(help="Output directory (default reports/compare-TIME).")
    ] = None,
    label: Annotated[
        list[str] | None,
        typer.Option(
            help="Name a machine: POSITION=TEXT or BUNDLE=TEXT, e.g. --label 2=vendor-x "
            "(repeatable; shown beside its hardware, e.g. 'vendor-x (4x H200 NV18)')."
        ),
    ] = None,
    price_per_gpu_hour: PricePerGpuHour = None,
    price: Annotated[
        list[str] | None,
        typer.Option(
            help="One machine's price per GPU-hour: POSITION=PRICE, BUNDLE=PRICE or "
            "LABEL=PRICE, e.g. --price 2=3.50USD (repeatable; one currency): cost per 1M "
            "units of work at each machine's own price."
        ),
    ] = None,
    price_source: PriceSource = None,
    allowed_signers: AllowedSigners = None,
    allow_unsigned: AllowUnsigned = False,
    read_broken_signature: ReadBrokenSignature = False,
) -> None:
    """Compare bundles side by side: hardware, environments, results with ratios and intervals.

    Machines are named by their hardware (and --label); when GPU counts differ, rates are also
    given per GPU with the scaling efficiency. Writes compare.html, compare.pdf and
    compare.json. Bundles from different environments are compared, and the first page says so.

    Example: kit compare reports/examples/h200x2-fsdp-llama reports/examples/h200x4-fsdp-llama --label 2=vendor-x --price 1=2.90USD --price vendor-x=3.50USD
    """
    from kit.bundle.intake import check_signer_options
    from kit.report.compare import check_price, parse_labels, write_comparison
    from kit.report.machines import parse_prices

    one = check_price(price_per_gpu_hour, price_source if not price else None)
    check_signer_options(allowed_signers, allow_unsigned)
    labels = parse_labels(label, bundles)
    each = parse_prices(price, bundles, labels, price_source)
    paths = write_comparison(
        bundles,
        baseline,
        out,
        labels,
        one,
        allowed_signers,
        allow_unsigned,
        read_broken=read_broken_signature,
        prices=each,
    )
    for path in paths:
        print(path)
