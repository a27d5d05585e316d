"""`kit refs`: the known machines a report places a bundle against. Mounted with
`app.add_typer(refs_app, name="refs")` in kit/cli/__init__.py."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kit.cli.options import AllowedSigners, AllowUnsigned, BundleDir

refs_app = typer.Typer(
    help="Known machines: list, add and remove reference results.", no_args_is_help=True
)


@refs_app.command("list")
def list_cmd() -> None:
    """List the shipped and your own references.

    Example: kit refs list
    """
    from kit.refs import store

    for ref in store.list_refs():
        kinds = ", ".join(sorted({b["benchmark"] for b in ref["benchmarks"]}))
        typer.echo(f"{ref['origin']:8s} {ref['label']:40s} {ref['hardware'].get('label')}: {kinds}")


@refs_app.command("add")
def add_cmd(
    bundle: BundleDir,
    label: Annotated[str | None, typer.Option(help="Name it (default: the hardware).")] = None,
    allowed_signers: AllowedSigners = None,
    allow_unsigned: AllowUnsigned = False,
) -> None:
    """Add a bundle's results to your references ($KIT_REFS_DB or ~/.local/share/kit).

    The bundle must match its manifest and be complete.

    Example: kit refs add reports/fsdp-llama-20261121-130936 --label "lab box 3"
    """
    from kit.bundle.intake import check_signer_options
    from kit.refs import store

    check_signer_options(allowed_signers, allow_unsigned)
    doc = store.add(bundle, label, allowed_signers=allowed_signers, allow_unsigned=allow_unsigned)
    typer.echo(f"added {doc['label']!r}: {len(doc['benchmarks'])} benchmark variants")


@refs_app.command("remove")
def remove_cmd(label: Annotated[str, typer.Argument(help="The reference's label.")]) -> None:
    """Remove one of your references.

    Example: kit refs remove "lab box 3"
    """
    from kit.refs import store

    store.remove(label)
    typer.echo(f"removed {label!r}")


@refs_app.command("standing")
def standing_cmd(bundle: BundleDir) -> None:
    """Where a bundle stands against every known machine that ran the same workload.

    Example: kit refs standing reports/fsdp-llama-20261121-130936
    """
    from kit.bundle.intake import receive
    from kit.refs import store
    from kit.shared.metrics import figure

    # sealed, complete, signature sound (kit.bundle.intake); no --read-broken-signature here
    data = receive(bundle, "place only an untouched bundle", read_broken=None)
    rows = store.standing(data)  # what was checked, not a second read
    if not rows:
        typer.echo("no known machine ran these workloads with the same parameters")
    for r in rows:
        per_gpu = f", {r['ratio_better_per_gpu']:.2f}x per GPU" if r["ratio_better_per_gpu"] else ""
        n, word = r["reference_gpus"], "GPU" if r["reference_on_gpus"] else "process"
        ran = f"{n} {word}{'' if n == 1 else ('es' if word == 'process' else 's')}"
        typer.echo(
            f"{r['benchmark']} {r['variant']} {r['metric']}: {figure(r['value'])} {r['unit']} "
            f"(n={r['n']}) vs {r['reference']} {figure(r['reference_value'])} "
            f"(n={r['reference_n']}, {ran}): {r['ratio_better']:.2f}x as good{per_gpu}"
        )
        if r["unlike"]:  # what was not like for like, the parameters that differ among it
            typer.echo(f"  not like for like: {'; '.join(r['unlike'])}")


@refs_app.command("published")
def published_cmd() -> None:
    """List the published figures shipped with kit: id, value, conditions and source.

    Example: kit refs published
    """
    from kit.refs import published

    for f in published.figures():
        typer.echo(f"{f.id}\n  {f.title}: {f.value_words}{' (a floor)' if f.floor else ''}")
        typer.echo(f"  conditions: {f.conditions}\n  source: {f.cited}, {f.url}")


@refs_app.command("nccl-tests")
def nccl_tests_cmd(
    bundle: Annotated[Path, typer.Argument(help="A sealed, unsigned bundle directory.")],
    outputs: Annotated[
        list[Path], typer.Argument(help="nccl-tests output files (*_perf's stdout).")
    ],
    variant: Annotated[
        str | None,
        typer.Option(help="The bundle variant they ran as (default: read from each file's name)."),
    ] = None,
) -> None:
    """Take nccl-tests output run in the same call into a bundle, beside the kit's sweep.

    The report then prints, per size, the kit's busbw over nccl-tests' (the median of every
    file of the same program and variant) and names each size below 0.97x. The files are
    stored in the bundle's nccl-tests/ folder and listed in its manifest; the report is
    re-rendered and resealed.

    Example: kit refs nccl-tests reports/collectives-20261126-2000 all_reduce_perf-p2p-r1.txt all_reduce_perf-no-p2p-r1.txt
    """
    from kit.bundle import Bundle, reseal_report
    from kit.refs.same_call import add
    from kit.report.render import PdfNotWritten, render_bundle
    from kit.shared import files

    added = add(bundle, outputs, variant)
    for name, run in added:
        mode = f", -G {run.graph}" if run.graph else ""
        typer.echo(
            f"added nccl-tests/{name}: {run.test}, {len(run.gpus)} GPUs, -w {run.warmup} "
            f"-n {run.iters}{mode}, {len(run.sizes)} sizes"
        )
    b = Bundle.load(bundle)

    def render() -> Path:
        try:
            return render_bundle(b)
        except PdfNotWritten as exc:  # the files are in and sealed; only the PDF waits
            # an older report.pdf no longer says what report.html says: it goes, and the
            # manifest then lists the HTML alone
            (b.path / files.REPORT_PDF).unlink(missing_ok=True)
            typer.echo(f"kit: warning: {exc}", err=True)
            return b.path / files.REPORT_HTML

    typer.echo(reseal_report(b.path, render))
