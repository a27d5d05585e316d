"""Which base image a build may start FROM: one the user named, or the digest the kit pins.

A bundle is a file from someone else. Its environment.json says what its image was built FROM,
and that is shown, but a rerun never builds FROM it or pulls it on the bundle's word: a local
image of that name may hold other code, and a registry the bundle names is the sender's choice.
The base of a rerun is the user's `--base-image`, the image of an archive the user loads
(`--image-archive`), or the digest pinned by `ARG BASE_IMAGE=` in the kit's own docker/NAME/
Dockerfile. Anything else is refused before anything is built or run.
"""

from __future__ import annotations

import re
from pathlib import Path

from kit.io.errors import InputError
from kit.runtime.images.environments import load

_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_HOST = r"[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?"
_DOMAIN = rf"(?:localhost(?::[0-9]+)?|{_HOST}(?:\.{_HOST})+(?::[0-9]+)?|{_HOST}:[0-9]+)/"
REFERENCE = re.compile(
    rf"(?:{_DOMAIN})?{_COMPONENT}(?:/{_COMPONENT})*"
    r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[0-9a-f]{64})?"
)
"""Docker's image reference grammar (distribution/reference), without the rarer digest kinds:
no option (`--privileged`), no space, no control character can pass."""


def is_reference(ref: object) -> bool:
    return isinstance(ref, str) and len(ref) <= 255 and REFERENCE.fullmatch(ref) is not None


def check_reference(ref: str, what: str = "--base-image") -> str:
    """`ref` when it is an image reference, else one line (exit 2) that shows it escaped."""
    if not is_reference(ref):
        raise InputError(
            f"{what} {ref[:80]!r}: not an image reference (NAME[:TAG][@sha256:DIGEST])"
        )
    return ref


def shown(ref: object) -> str:
    """A recorded base image as the terminal may print it: itself when it is a reference,
    else its escaped repr (a bundle's record can hold anything)."""
    return ref if is_reference(ref) else repr(str(ref)[:80])  # type: ignore[return-value]


def same_base(a: str, b: str) -> bool:
    """Two references name the same pinned base: equal, or the same sha256 digest."""
    if a == b:
        return True
    da, db = a.partition("@")[2], b.partition("@")[2]
    return bool(da) and da == db


def one_image_source(given: str | None, archive: Path | None) -> None:
    """--base-image and --image-archive are two sources of one image: a run takes one."""
    if archive is not None and given is not None:
        raise InputError(
            "--base-image with --image-archive: the archive's image runs as it is (no build); "
            "give one of them"
        )


def rerun_base(
    source: Path,
    env_name: str,
    recorded: str | None,
    given: str | None,
    archive: Path | None,
) -> tuple[str | None, str]:
    """The base a rerun of `source` builds FROM (None: the archive's image runs as it is) and the
    line that says why. A recorded base other than the pinned one, with neither --base-image nor
    --image-archive, is refused: the user names it or it is not used."""
    one_image_source(given, archive)
    if archive is not None:
        return None, f"the rerun runs the image of {archive} (--image-archive), not rebuilt"
    if given is not None:
        check_reference(given)
        return given, f"the rerun builds FROM {given} (--base-image)"
    pinned = load(env_name).default_base_image()
    if recorded is not None and not same_base(recorded, pinned):
        hint = f" ({recorded} if you trust it)" if is_reference(recorded) else ""
        raise InputError(
            f"{source}/environment.json: built FROM {shown(recorded)}, not the digest "
            f"docker/{env_name}/Dockerfile pins; a rerun never builds FROM an image a bundle "
            f"names: add --base-image IMAGE{hint} or --image-archive FILE"
        )
    return pinned, f"the rerun builds FROM {pinned}, the digest docker/{env_name}/Dockerfile pins"
