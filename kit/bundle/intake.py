"""What every command that reads a received bundle checks first: sealed, complete, signed.

report, compare, reproduce and `refs add` call `receive`; `kit verify` uses `missing_files`.
A bundle is refused (InputError: one line, exit 2) when it does not match its manifest, when a
file every bundle holds is missing (even if the sender recomputed the manifest), when its
signature does not verify (with or without an allowed-signers file: a broken signature is
evidence of an edit, unlike none at all), and, when the user names an allowed-signers file, when
it is unsigned or signed by a signer the file does not list (`allow_unsigned` accepts an
unsigned one; never a bad one). `read_broken` (--read-broken-signature) reads a bundle whose
signature does not verify all the same: one warning line on stderr, and the loaded bundle carries
the line (`BundleData.broken_signature`) for every page made from it to show. `kit refs add`
never passes it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from kit.bundle import MANIFEST, read_manifest, require_sealed
from kit.bundle.signature import check_allowed_signers, signature_status
from kit.io.errors import InputError
from kit.model import BundleData, load_bundle
from kit.model.files import as_recorded, read_json
from kit.shared import files

REQUIRED = (files.RESULTS, files.RECIPE, files.HARDWARE, files.ENVIRONMENT, MANIFEST)
"""The files every bundle holds: every kit version writes all of them (a Slurm job's bundle
gets hardware.json and environment.json when `kit slurm collect` seals it)."""


def missing_files(root: Path) -> list[str]:
    """The required files that are not in the bundle's folder (as entries of any kind)."""
    return [name for name in REQUIRED if not os.path.lexists(Path(root) / name)]


def _written_by(root: Path) -> str:
    """ "kit 0.1.0" from results.json, or "" when it cannot be read."""
    try:
        data = read_json(Path(root), files.RESULTS)
    except InputError:
        return ""
    version = data.get("kit_version") if isinstance(data, dict) else None
    return f"kit {version}" if isinstance(version, str) and len(version) < 40 else ""


def check_complete(root: Path) -> None:
    """One line naming every required file the bundle lacks, and the kit version that wrote it.
    (A missing manifest is require_sealed's to name: its line says how to seal the bundle.)"""
    missing = [name for name in missing_files(root) if name != MANIFEST]
    if missing:
        who = _written_by(root) if files.RESULTS not in missing else ""
        by = f"; {who} wrote this bundle and writes every one of them" if who else ""
        raise InputError(
            f"{root}: incomplete bundle: no {', '.join(missing)} (every bundle holds "
            f"{', '.join(REQUIRED)}{by}); it cannot be read as evidence"
        )


READ_BROKEN = "--read-broken-signature"


CHANGED = "the bundle was changed after it was signed"
"""What a signature that does not match its manifest means."""


def broken_line(root: Path, why: str) -> str:
    """What a page made from a bundle read despite a broken signature says about it, with the
    reason the check gave (a manifest changed after signing, a signer the file does not list)."""
    return f"{root}: its signature does not verify ({why}); read anyway with {READ_BROKEN}"


def check_signature(
    root: Path,
    allowed_signers: Path | None,
    allow_unsigned: bool,
    read_broken: bool | None = False,
) -> str:
    """The broken-signature line when `read_broken` let a bad signature through, else "".

    A signature that does not verify is evidence of an edit: refused (one line) with or
    without an allowed-signers file. With one, the bundle must also be signed by a listed signer
    (or unsigned with `allow_unsigned`). Without one, an unsigned bundle is read as it is.
    `read_broken` None: the command has no --read-broken-signature (kit refs), so its message
    never suggests it."""
    sig = signature_status(root, allowed_signers)
    if sig.state == "bad" and read_broken:
        unlisted = allowed_signers is not None and "does not list" in sig.reason
        line = broken_line(root, sig.reason if unlisted else CHANGED)
        print(f"kit: warning: {line}", file=sys.stderr)
        return line
    if allowed_signers is None:
        if sig.state == "bad":
            anyway = (
                "this command never reads such a bundle"
                if read_broken is None
                else f"{READ_BROKEN} reads it anyway, saying so"
            )
            raise InputError(
                f"{root}: {sig.line()}; {CHANGED} (`kit verify {root}` fails it; {anyway})"
            )
        return ""
    if sig.state == "unsigned" and allow_unsigned:
        return ""
    if sig.state == "unsigned":
        raise InputError(
            f"{root}: unsigned; --allowed-signers asks for a signature "
            "(--allow-unsigned accepts unsigned bundles)"
        )
    if sig.state != "verified":
        raise InputError(f"{root}: {sig.line()}")
    return ""


def check_signer_options(allowed_signers: Path | None, allow_unsigned: bool) -> None:
    """--allowed-signers names a readable file; --allow-unsigned only means something with it."""
    if allow_unsigned and allowed_signers is None:
        raise InputError(
            "--allow-unsigned: only with --allowed-signers (without it no signature is asked for)"
        )
    if allowed_signers is not None:
        check_allowed_signers(allowed_signers)


def receive(
    root: Path,
    purpose: str,
    allowed_signers: Path | None = None,
    allow_unsigned: bool = False,
    read_broken: bool | None = False,
) -> BundleData:
    """A received bundle, checked (sealed, complete, signed when asked) and read once, typed;
    every file's bytes, as read, are hashed against the manifest that was checked.
    `read_broken` None: the command has no --read-broken-signature (check_signature)."""
    root = Path(root)
    require_sealed(root, purpose)
    check_complete(root)
    broken = check_signature(root, allowed_signers, allow_unsigned, read_broken)
    with as_recorded(root, read_manifest(root)):
        data = load_bundle(root)
    data.broken_signature = broken
    return data
