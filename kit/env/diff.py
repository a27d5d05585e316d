"""Environment fingerprints side by side: which software versions differ between two bundles.

Why this matters: a comparison of two machines is a comparison of hardware only when the
software is the same. A rerun or a comparison shows every difference here, one line each.

A value that one side does not know (None, or absent) is not a difference: a CPU run reports no
NCCL version, the host runtime reads no image id. Only values known on both sides are compared;
`unknown` lists the rest so the page can say what could not be checked.

Not every difference can change a number. An image rebuilt from the same inputs gets a new image
id (layer timestamps, and apt packages are not pinned in the Dockerfiles), so two environments
are compared by what the image holds: its content hash (Dockerfile, lock, worker code, build
args), the base image's digest or, for an image with none (`docker import`), the sha256 of its
layers, and the versions read inside it. The image id and the base
image's local id are informational: shown, never a reason for `--strict-env` to refuse or for a
comparison to warn.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from kit.model.environment import ContainerVersions, Environment
from kit.model.hardware import Hardware

VERSION_KEYS = (
    "python",
    "torch",
    "cuda",
    "cudnn",
    "nccl",
    "driver",
    "torchvision",
    "transformers",
    "peft",
    "accelerate",
)
"""Versions read inside the environment (environment.json `container`, each a typed field of
kit.model.ContainerVersions)."""

PINNED_KEYS = (
    "content_hash",
    "base_image_digest",
    "base_image_content",
    "dockerfile_sha256",
    "lock_sha256",
)
"""How a pinned image was made (what it holds): compared when both environments are pinned."""

INFORMATIONAL_KEYS = ("image_id", "base_image_id")
"""Local identities of the same content: they differ on every rebuild; they never matter."""

RUNTIME_KEYS = ("runtime", "placement", "engine", "pinned", "name")
"""Where and in what the runs ran: placement and engine as environment.json schema 2 records
them, or as an older file's runtime and launcher name them (kit.model.Environment.axes): a
Docker bundle rerun under Podman names the engine."""


@dataclass(frozen=True)
class Difference:
    field: str  # e.g. "torch", "lock_sha256", "runtime"
    old: str
    new: str
    matters: bool = True  # False: informational (an image id), cannot change a number

    def line(self, old_label: str = "recorded", new_label: str = "here") -> str:
        return f"{self.field}: {self.old} ({old_label}) -> {self.new} ({new_label})"

    def to_dict(self) -> dict[str, str]:
        """The bundle's record ({field, old, new}): which list it lands in says if it matters."""
        d = asdict(self)
        del d["matters"]
        return d


def _text(value: Any) -> str | None:
    if value is None or value == "":
        return None
    return str(value)


def environment_versions(
    environment: Environment | None, hardware: Hardware | None = None
) -> dict[str, str | None]:
    """The comparable fields of a fingerprint, flat: versions, runtime, and pinned hashes.

    The host runtime records no driver inside `container`; the hardware inventory does, so it
    fills that gap when given.
    """
    container = (environment.container if environment else None) or ContainerVersions()
    flat: dict[str, str | None] = {k: _text(getattr(container, k)) for k in VERSION_KEYS}
    if flat["driver"] is None and hardware and hardware.driver:
        flat["driver"] = _text(hardware.driver.version)
    axes = (
        dict(zip(("placement", "engine"), environment.axes(), strict=True)) if environment else {}
    )
    for key in RUNTIME_KEYS:
        value = axes[key] if key in axes else getattr(environment, key, None)
        flat[key] = _text(value) if environment else None
    if environment is not None:  # pinned by the one rule (an image FROM a local base is not)
        flat["pinned"] = _text(environment.pin()[0])
    image = environment is not None and (environment.pinned or environment.image_id is not None)
    for key in PINNED_KEYS + INFORMATIONAL_KEYS:
        flat[key] = _text(getattr(environment, key)) if image else None
    return flat


def environment_diff(
    old: Environment | None,
    new: Environment | None,
    old_hardware: Hardware | None = None,
    new_hardware: Hardware | None = None,
    informational: bool = False,
    by_content: bool = False,
) -> list[Difference]:
    """Every field known on both sides whose values differ, in a fixed order: the differences
    that can change a number, and with `informational` also those that cannot (image ids).

    `by_content`: both images' contents were listed and compared (kit.env.content), so how the
    images were made (base digest, base layers, lock, Dockerfile, content hash) is
    informational too, and so is whether each was pinned: what they hold, and whether the runs
    loaded it, decides."""
    a = environment_versions(old, old_hardware)
    b = environment_versions(new, new_hardware)
    aside = INFORMATIONAL_KEYS + ((*PINNED_KEYS, "pinned") if by_content else ())
    diffs = [
        Difference(key, a[key], b[key], key not in aside)  # type: ignore[arg-type]
        for key in a
        if a[key] is not None and b[key] is not None and a[key] != b[key]
    ]
    return [d for d in diffs if informational or d.matters]


def unknown_fields(old: Environment | None, new: Environment | None) -> list[str]:
    """Version fields that one side knows and the other does not (so they went unchecked)."""
    a, b = environment_versions(old), environment_versions(new)
    return [k for k in VERSION_KEYS if (a[k] is None) != (b[k] is None)]
