"""nccl-tests output run in the same device call, taken into a sealed bundle (`kit refs nccl-tests`).

The report then sets the kit's sweep beside it size by size (kit/report/analysis/same_call.py).
Each file is checked before anything is written: nccl-tests' own size rows
(kit.refs.nccl_tests.parse), one of the bundle's variants (given, or read from a name such as
all_reduce_perf-no-p2p-r1.txt), as many GPUs as the bundle's runs. It is stored verbatim as
nccl-tests/<program>-<variant>-<k>.txt and listed in the manifest; the caller re-renders the
report and reseals the report files (kit.bundle.reseal_report), so the bundle keeps verifying.
"""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path

from kit.bundle import SIGNATURE, add_to_manifest, require_sealed
from kit.io.errors import InputError
from kit.io.safe import read_bytes, write_text
from kit.model import load_bundle
from kit.model.files import decode, list_dir
from kit.model.loader import MAX_NCCL_TESTS_BYTES
from kit.refs.nccl_tests import NcclTestsRun, parse
from kit.shared import files


def variant_of(path: Path, test: str, variants: list[str], given: str | None) -> str:
    """The bundle variant a file belongs to: `given`, else the one its name spells after the
    program, with at most a repeat number after it (all_reduce_perf-p2p.txt,
    all_reduce_perf-no-p2p-r2.txt)."""
    if given is not None:
        if given not in variants:
            raise InputError(
                f"--variant {given}: not a variant of this bundle ({', '.join(variants)})"
            )
        return given
    rest = path.name.removesuffix(".txt").removeprefix(f"{test}-")
    # the variant, then at most a repeat number: "p2p-off-1" names no variant, never p2p
    found = [v for v in variants if re.fullmatch(rf"{re.escape(v)}(-r?\d+)?", rest)]
    if len(found) != 1:
        raise InputError(
            f"{path}: its name does not name one of the bundle's variants "
            f"({', '.join(variants)}); name it {test}-VARIANT[-rN].txt or give --variant"
        )
    return found[0]


def read_run(path: Path) -> tuple[NcclTestsRun, str]:
    """One nccl-tests output file, parsed; one line where it is not one."""
    text = decode(read_bytes(path, MAX_NCCL_TESTS_BYTES), path)
    try:
        run = parse(text, path.name)
    except ValueError as exc:
        raise InputError(f"{path}: not nccl-tests output ({exc})") from None
    if not run.test:
        raise InputError(f"{path}: no 'Collective test starting' line: which program ran?")
    return run, text


def add(
    bundle: Path, paths: list[Path], variant: str | None = None
) -> list[tuple[str, NcclTestsRun]]:
    """Store nccl-tests outputs in a sealed, unsigned bundle and list them in its manifest;
    (name in the bundle, parsed run) for each. Nothing is written unless every file passes."""
    root = Path(bundle)
    require_sealed(root, "add nccl-tests output only to an untouched bundle")
    if os.path.lexists(root / SIGNATURE):
        raise InputError(
            f"{root}: is signed ({SIGNATURE}); adding files would void the signature: add them "
            f"to a copy without {SIGNATURE}, then `kit sign` it"
        )
    data = load_bundle(root)
    variants = list(dict.fromkeys(r.variant for r in data.results.runs))
    worlds = {r.world_size for r in data.results.runs if r.world_size}
    taken = list_dir(root, files.NCCL_TESTS)
    seen = {text: f"{files.NCCL_TESTS}/{name}" for name, text in data.nccl_tests.items()}
    out = []
    for path in paths:
        run, text = read_run(path)
        if text in seen:  # one run counted twice would weigh twice in the median
            raise InputError(f"{path}: the same output as {seen[text]}, already taken")
        seen[text] = str(path)
        v = variant_of(path, run.test, variants, variant)
        if run.gpus and worlds and len(run.gpus) not in worlds:
            raise InputError(
                f"{path}: nccl-tests ran on {len(run.gpus)} GPUs, this bundle's runs on "
                f"{', '.join(map(str, sorted(worlds)))}"
            )
        k = 1
        while f"{run.test}-{v}-{k}.txt" in taken:
            k += 1
        name = f"{run.test}-{v}-{k}.txt"
        taken.append(name)
        out.append((name, run, text))
    folder_was = os.path.lexists(root / files.NCCL_TESTS)
    written: list[Path] = []
    try:
        os.makedirs(root / files.NCCL_TESTS, exist_ok=True)
        for name, _, text in out:
            write_text(root / files.NCCL_TESTS / name, text)
            written.append(root / files.NCCL_TESTS / name)
        add_to_manifest(root, [f"{files.NCCL_TESTS}/{name}" for name, _, _ in out])
    except BaseException:  # a full disk or Ctrl-C: the bundle as it was, still verifying
        for path in written:
            path.unlink(missing_ok=True)
        if not folder_was:
            with contextlib.suppress(OSError):
                os.rmdir(root / files.NCCL_TESTS)
        raise
    return [(name, run) for name, run, _ in out]
