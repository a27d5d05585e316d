"""An image as a file and back: `kit export` saves one, `--image-archive` loads it on a
machine with no registry (and maybe no network), and `obtain` gives a run its image, loaded from
an archive or built (kit.runtime.images.image)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kit.io import outputs
from kit.io.errors import InputError, KitError
from kit.runtime.images import image as images
from kit.runtime.images.image import LABEL_BASE, LABEL_DOCKERFILE, LABEL_HASH, LABEL_LOCK, Image


def export(tag: str, path: Path, client: Any, option: str = "-o") -> Path:
    """Save an image (by tag) as a tar archive that `docker load` or `load()` reads back, to the
    user's `path` through kit.io.outputs (a regular file in a folder that exists, never a device,
    a link or a place in a bundle)."""
    import docker

    outputs.check_file(path, option)  # before the image is looked up, and again at the write
    try:
        image = client.images.get(tag)
    except docker.errors.ImageNotFound as e:
        raise InputError(f"no image {tag!r}; build it first with `kit build`") from e
    import requests

    try:
        outputs.write_stream(path, image.save(named=True), option)
    except docker.errors.APIError as e:
        raise KitError(f"{tag}: not saved: {e.explanation or e}") from None
    except requests.exceptions.RequestException as e:  # the daemon went away during the save
        raise KitError(
            f"{tag}: not saved: the daemon stopped answering ({type(e).__name__})"
        ) from None
    return path


def from_archive(path: Path, env_name: str, client: Any) -> Image:
    """Load an archive made by `kit export` and describe its image from the labels it carries.

    For a rerun on a machine with no registry (and maybe no network): the image is used as it
    is, not rebuilt, so the fingerprint is the one of the machine that built it.
    """
    tags = [t for t in load_archive(path, client) if t.startswith(f"kit-{env_name}:")]
    if not tags:
        raise InputError(f"{path}: holds no image of environment {env_name!r} (kit-{env_name}:*)")
    img = client.images.get(tags[0])
    labels = img.labels or {}
    base = labels.get(LABEL_BASE, "unknown")
    base_id, base_digest = images.base_identity(client, base)
    if base_digest is None and "@sha256:" in base:
        base_digest = base.split("@", 1)[1]
    return Image(
        env=env_name,
        tag=tags[0],
        image_id=img.id,
        cached=True,
        base_image=base,
        base_image_id=base_id,
        base_image_digest=base_digest,
        dockerfile_sha256=labels.get(LABEL_DOCKERFILE, ""),
        # "" on an image of an environment of the image's own packages (no lock)
        lock_sha256=labels.get(LABEL_LOCK) or None,
        content_hash=labels.get(LABEL_HASH, ""),
        build_args={"BASE_IMAGE": base},
    )


def obtain(
    env_name: str, base_image: str | None, archive: Path | None, client: Any
) -> tuple[Image, str]:
    """The environment's image for a run (one machine or every node): loaded from `archive`
    (`kit export`, --image-archive) when given, else built or reused; with the word the
    driver prints for how it came ("loaded from ...:", "reused", "built")."""
    if archive is not None:
        return from_archive(archive, env_name, client=client), f"loaded from {archive}:"
    image = images.build(env_name, base_image_override=base_image, client=client)
    return image, "reused" if image.cached else "built"


# a `docker save` (docker-archive) tar holds manifest.json; an OCI layout tar holds index.json
ARCHIVE_MARKS = ("manifest.json", "index.json")


def check_archive(path: Path) -> None:
    """Before any notice or load (--image-archive): `path` is a regular file and a tar archive
    of images (`kit export`, `docker save`), one line otherwise."""
    import tarfile

    if not path.exists():
        raise InputError(f"--image-archive {path}: no such image archive")
    if not path.is_file():
        raise InputError(f"--image-archive {path}: not a regular file; an image archive is one")
    try:
        with tarfile.open(path, "r:*") as tar:
            if any(m.name.lstrip("./") in ARCHIVE_MARKS for m in tar):
                return
    except (tarfile.TarError, OSError, EOFError):
        raise InputError(
            f"--image-archive {path}: not a tar archive; make one with `kit export ENV -o FILE`"
        ) from None
    raise InputError(
        f"--image-archive {path}: a tar with no manifest.json or index.json, not an image "
        "archive; make one with `kit export ENV -o FILE`"
    )


def load_archive(path: Path, client: Any) -> list[str]:
    """Load an image archive made by `export`; return the tags it holds."""
    import docker

    check_archive(path)
    try:
        with path.open("rb") as f:
            images = client.images.load(f)
    except (docker.errors.ImageLoadError, docker.errors.APIError) as e:
        why = str(getattr(e, "explanation", None) or e).replace("\n", " ")
        raise InputError(f"{path}: not loaded as an image archive ({why})") from None
    return [short_tag(t) for img in images for t in img.tags]


def short_tag(tag: str) -> str:
    """A tag as the kit names it: Podman's `localhost/` and `docker.io/library/` taken off."""
    for prefix in ("localhost/", "docker.io/library/"):
        if tag.startswith(prefix):
            return tag.removeprefix(prefix)
    return tag
