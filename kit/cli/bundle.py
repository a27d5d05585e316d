"""The commands that take a finished bundle: report, verify, sign, seal. kit/cli/__init__.py registers them.

Thin, like the rest of the CLI: parse, call kit.bundle / kit.bundle.signature / kit.run.seal, print.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from kit.cli.options import (
    AllowedSigners,
    AllowUnsigned,
    BundleDir,
    Ordered,
    PricePerGpuHour,
    PriceSource,
    ReadBrokenSignature,
)
from kit.io.errors import InputError, KitError


def _warn(line: str) -> None:
    print(line, file=sys.stderr)


def report(
    bundle: BundleDir,
    price_per_gpu_hour: PricePerGpuHour = None,
    price_source: PriceSource = None,
    against: Annotated[
        str | None,
        typer.Option(
            help="Put `kit accept`'s verdict against this reference (a published figure's id, "
            "a bundle, or a number with its unit) on page 1."
        ),
    ] = None,
    tolerance: Annotated[
        list[str] | None,
        typer.Option(help="With --against: as kit accept's --tolerance (repeatable)."),
    ] = None,
    judge_anyway: Annotated[
        bool,
        typer.Option("--judge-anyway", help="With --against: as kit accept's --judge-anyway."),
    ] = False,
    read_broken_signature: ReadBrokenSignature = False,
    ordered: Ordered = None,
) -> None:
    """Re-render a bundle's report from its files; re-seal the report files and nothing else.

    Refused when anything but report.html / report.pdf differs from the manifest (an edit, an
    extra file, a link), when a file every bundle holds is missing, and for a signed bundle (a
    new report would void the signature: so there is no --allowed-signers here).

    Example: kit report reports/allreduce-20261121-120000 --price-per-gpu-hour 3.50USD --price-source "vendor quote, 2026-11" --against h100x8-allreduce-ring-nccl-tests-212

    Example: kit report reports/acceptance-20261128-120000 --ordered "4x H200 SXM 141GB 700W"
    """
    from kit.bundle import Bundle, reseal_report
    from kit.bundle.intake import check_complete
    from kit.report.compare import check_price
    from kit.report.facts.order import read_order
    from kit.report.facts.price import check_priced_device
    from kit.report.render import render_bundle
    from kit.shared import files

    price = check_price(price_per_gpu_hour, price_source)
    order = read_order(ordered) if ordered is not None else None
    if (tolerance or judge_anyway or read_broken_signature) and against is None:
        flag = "--tolerance" if tolerance else "--judge-anyway"
        if read_broken_signature:  # the bundle re-rendered here is never a signed one
            flag = "--read-broken-signature"
        raise InputError(f"{flag} applies to --against: name the reference too")
    b = Bundle.load(bundle)
    check_complete(b.path)
    check_priced_device(price, b.results.device, b.path, "--price-per-gpu-hour")
    acceptance = None
    if against is not None:
        from kit.report.accept import accept as accept_bundle

        acceptance = accept_bundle(
            b.path,
            against,
            tolerance or [],
            judge_anyway=judge_anyway,
            read_broken=read_broken_signature,
        )
    html = reseal_report(
        b.path,
        lambda: render_bundle(b, price_per_gpu_hour=price, acceptance=acceptance, order=order),
    )
    print(html)  # and the PDF where one was written (KIT_PDF=0: none; an earlier one is removed)
    if (pdf := html.with_name(files.REPORT_PDF)).exists():
        print(pdf)


def verify(
    bundle: BundleDir,
    allowed_signers: Annotated[
        Path | None,
        typer.Option(help="OpenSSH allowed_signers file: check the signature and name the signer."),
    ] = None,
) -> None:
    """Check every entry of a bundle against its MANIFEST.sha256, and its signature if any.

    Every file must be listed and match; no links, FIFOs, devices, sockets or empty folders.
    Without --allowed-signers a signature is checked against the manifest only ("signer not
    checked").

    Example: kit verify reports/examples/h200x2-allreduce

    Example: kit verify BUNDLE --allowed-signers ~/.config/kit/allowed_signers
    """
    from kit.bundle import MANIFEST, verify_manifest
    from kit.bundle.intake import REQUIRED, check_signer_options, missing_files
    from kit.bundle.signature import signature_status
    from kit.model import load_bundle

    check_signer_options(allowed_signers, False)
    result = verify_manifest(bundle)
    for label, names in (
        ("changed", result.changed),
        ("missing", result.missing),
        ("not in manifest", result.extra),
        ("not a regular file", result.odd),
    ):
        for name in names:
            print(f"{label}: {name}")
    if not result.ok:
        raise KitError(
            f"{bundle}: does not match its manifest ({len(result.changed)} changed, "
            f"{len(result.missing)} missing, {len(result.extra)} not listed, "
            f"{len(result.odd)} not regular files)"
        )
    missing = missing_files(bundle)
    for name in missing:
        print(f"missing: {name} (every bundle holds it)")
    if missing:
        raise KitError(
            f"{bundle}: incomplete bundle: no {', '.join(missing)} (every bundle holds "
            f"{', '.join(REQUIRED)}), though the manifest matches"
        )
    sig = signature_status(bundle, allowed_signers)
    if not sig.ok:
        raise KitError(f"{bundle}: {sig.line()}")
    if allowed_signers is not None and sig.state == "unsigned":
        raise KitError(f"{bundle}: unsigned; --allowed-signers asks for a signature")
    load_bundle(bundle)  # every file typed, the runs consistent with each other and the recipe
    print(f"{bundle}: OK, {result.checked} files match {MANIFEST}; {sig.line()}")


def sign(
    bundle: Annotated[Path, typer.Argument(help="A sealed bundle directory.")],
    key: Annotated[Path, typer.Option(help="SSH private key (ssh-keygen -t ed25519).")],
    identity: Annotated[
        str | None,
        typer.Option(help="Who signs (e.g. an e-mail): printed in the allowed_signers line."),
    ] = None,
) -> None:
    """Sign a sealed bundle's MANIFEST.sha256 with an SSH key (ssh-keygen -Y sign).

    Writes MANIFEST.sha256.sig (namespace kit-bundle@kit). The receiver checks it with
    `kit verify BUNDLE --allowed-signers FILE`; the line for that file is printed on stderr.

    Example: kit sign reports/allreduce-20261121-120000 --key ~/.ssh/id_ed25519 --identity me@lab
    """
    from kit.bundle.signature import sign as sign_bundle

    path, line = sign_bundle(bundle, key, identity)
    if line:
        _warn(f"kit: allowed_signers line for this key: {line}")
    print(path)


def seal(bundle: Annotated[Path, typer.Argument(help="A bundle whose seal was interrupted.")]):
    """Seal a bundle an interruption left unsealed, keeping every finished run.

    Removes temporary files, records runs the driver had not recorded and the interruption
    (results.json `sealed_after`; status `interrupted` if it was `running`), renders the
    report and writes the manifest.

    Example: kit seal reports/allreduce-20261121-120000
    """
    from kit.run.seal import recover

    b, note = recover(bundle, _warn)
    stopped, after = note["in_flight_runs"], note["after_driver_died"]
    kept = len(b.results.runs) - len(stopped) - len(after)
    _warn(
        f"kit: sealed {b.path}: status {b.results.status}; {note['reason']}"
        + (f", recorded as did not run to the end: {', '.join(stopped)}" if stopped else "")
        + (
            f", recorded as finished after its driver was killed (failed, never ok): "
            f"{', '.join(after)}"
            if after
            else ""
        )
        + f"; {kept} finished runs kept ({len(note['recovered_runs'])} recovered from their "
        f"workers' files), {len(note['removed_temporary_files'])} temporary files removed"
    )
    print(b.path)


ACCEPT_EXIT = {"PASS": 0, "FAIL": 1, "UNDECIDED": 3, "NOT COMPARABLE": 4}
"""`kit accept` exit codes: a cluster's tooling reads the verdict without parsing text."""


def accept(
    bundle: BundleDir,
    against: Annotated[
        str,
        typer.Option(
            help="A published figure's id (kit refs published), another bundle, or a number "
            "with its unit (330GB/s)."
        ),
    ],
    tolerance: Annotated[
        list[str] | None,
        typer.Option(
            help="Fraction below the reference still accepted, for every metric (0.05) or one "
            "(busbw_largest=0.03); repeatable. Default: 0 for floors and numbers, 0.05 otherwise."
        ),
    ] = None,
    metric: Annotated[
        str | None, typer.Option(help="Judge this metric (default: each benchmark's headline).")
    ] = None,
    variant: Annotated[
        str | None, typer.Option(help="Judge this variant (default: p2p, else the first).")
    ] = None,
    allowed_signers: AllowedSigners = None,
    allow_unsigned: AllowUnsigned = False,
    json_out: Annotated[
        Path | None,
        typer.Option("--json", help="Also write the verdicts as JSON to this file ('-': stdout)."),
    ] = None,
    judge_anyway: Annotated[
        bool,
        typer.Option(
            "--judge-anyway",
            help="Judge against a published figure or bundle whose conditions exclude this run "
            "(GPU model or count, task, NVLS, fabric); the verdict says 'judged despite: ...'.",
        ),
    ] = False,
    read_broken_signature: ReadBrokenSignature = False,
) -> None:
    """PASS, FAIL or UNDECIDED for a bundle against a reference, decided by the interval;
    NOT COMPARABLE where the reference does not apply.

    PASS when the interval's lower end clears the reference less the tolerance, FAIL when its
    upper end does not reach it, UNDECIDED when it straddles it or fewer than 3 runs finished
    (then it says how many more repeats would settle it). Every repeat counts. NOT COMPARABLE
    when the reference (a published figure or a bundle) was measured on another GPU model or
    count, task, device or metric, or a published figure's required conditions (NVLS, fabric)
    differ, naming them; nothing is judged unless --judge-anyway.
    Exit status: 0 PASS, 1 FAIL, 2 bad input, 3 UNDECIDED, 4 NOT COMPARABLE (overall: FAIL,
    else UNDECIDED, else NOT COMPARABLE, else PASS).

    Example: kit accept reports/examples/h200x2-allreduce --against reports/examples/allreduce-h200x2-first --json accept.json

    Example: kit accept reports/examples/h200x2-allreduce --against 300GB/s --tolerance 0.05
    """
    from kit.bundle.intake import check_signer_options
    from kit.report.accept import accept as accept_bundle
    from kit.shared.jsonio import dumps

    check_signer_options(allowed_signers, allow_unsigned)
    if json_out is not None and str(json_out) != "-":
        from kit.io import outputs

        outputs.check_file(json_out, "--json")  # a regular file, writable, in no bundle
    doc = accept_bundle(
        bundle,
        against,
        tolerance or [],
        metric,
        variant,
        allowed_signers,
        allow_unsigned,
        judge_anyway,
        read_broken_signature,
    )
    from kit.io import outputs

    if json_out is not None and str(json_out) == "-":
        outputs.to_stdout([dumps(doc)], "the verdict")
        raise typer.Exit(ACCEPT_EXIT[doc["verdict"]])
    lines = []
    for d in doc["decisions"]:
        lines.append(
            f"{d['verdict']:9s} {d['benchmark']} {d['variant']} {d['label']}: {d['reason']}\n"
        )
        for diff in d["differences"]:
            if diff not in d["unmet"]:  # those are named in the reason already
                lines.append(f"          conditions differ: {diff}\n")
    lines += [f"skipped   {s}\n" for s in doc["skipped"]]
    lines.append(f"overall: {doc['verdict']} against {doc['against']['label']}\n")
    lines.append(f"rule: {doc['rule']}\n")
    outputs.to_stdout(lines, "the verdict")
    if json_out is not None:
        outputs.write_text(json_out, dumps(doc), "--json")  # checked again, and after
    raise typer.Exit(ACCEPT_EXIT[doc["verdict"]])
