"""Options that more than one command takes, declared once (their help cannot drift apart)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kit.shared.limits import MAX_REPEATS

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
Ordered = Annotated[
    str | None,
    typer.Option(
        help='The machine as ordered, in a quote\'s words ("4x H200 SXM 141GB 700W"; the model '
        "is required): page 1 checks count, model, memory and power rating against it."
    ),
]
AllowedSigners = Annotated[
    Path | None,
    typer.Option(
        help="OpenSSH allowed_signers file: every bundle read must be signed by a signer it lists."
    ),
]
AllowUnsigned = Annotated[
    bool,
    typer.Option("--allow-unsigned", help="With --allowed-signers: also accept unsigned bundles."),
]
ReadBrokenSignature = Annotated[
    bool,
    typer.Option(
        "--read-broken-signature",
        help="Read a bundle whose signature does not verify anyway: a warning names it and "
        "every page made from it says so.",
    ),
]
Apptainer = Annotated[
    Path | None,
    typer.Option(
        help="Apptainer: the .sif image each run executes in (apptainer exec, --nv on CUDA)."
    ),
]
EnvName = Annotated[str | None, typer.Option("--env", help="Environment instead of the recipe's.")]
# the batch commands (kit slurm, kit k8s): the cluster's device is named, never detected here
BatchDevice = Annotated[str, typer.Option(help="cuda | cpu (gloo).")]
BatchSmoke = Annotated[
    bool | None, typer.Option("--smoke/--full", help="Smoke scale (default: on CPU).")
]
BatchRepeats = Annotated[
    int | None, typer.Option(min=1, max=MAX_REPEATS, help="Override the recipe's.")
]
