"""Options that more than one command takes, declared once: their flags, types and bounds (and
their help, where the commands word it alike) cannot drift apart."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from kit.shared.engines import IMAGE_ENGINES
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
        "is required), or @FILE holding them (# lines are comments): page 1 checks count, "
        "model, memory and power rating against it."
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
BundleDir = Annotated[Path, typer.Argument(help="A bundle directory.")]
BundleOut = Annotated[
    Path | None, typer.Option(help="Bundle directory (default reports/NAME-TIME).")
]
# The options below mean one thing wherever they are taken, but each command words its help:
# the command passes its words, the flag, type and bounds stay here.


def base_image_option(words: str) -> Any:
    """--base-image (reproduce, build, export): the image an environment builds FROM."""
    return Annotated[str | None, typer.Option(help=words)]


def engine_option(role: str) -> Any:
    """--runtime of the commands that drive a container engine themselves (build, export)."""
    engines = ", ".join(IMAGE_ENGINES[:-1]) + f" or {IMAGE_ENGINES[-1]}"
    return Annotated[str, typer.Option(help=f"The container engine that {role}: {engines}.")]


def smoke_option(words: str) -> Any:
    """--smoke/--full (reproduce, slurm, k8s): the benchmarks' scale; unset, the device's."""
    return Annotated[bool | None, typer.Option("--smoke/--full", help=words)]


def repeats_option(words: str) -> Any:
    """--repeats (reproduce, slurm, k8s): instead of the recipe's, within the same bounds."""
    return Annotated[int | None, typer.Option(min=1, max=MAX_REPEATS, help=words)]
