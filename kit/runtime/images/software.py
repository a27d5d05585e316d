"""An image's inventory (a bundle's software.json): made once per image id, then read from the
cache.

Why: a rerun or a comparison can only name what differs between two images if each image's
contents were listed (kit.env.content compares them). The list is made by kit.shared.imagescan,
run inside the image as `python -c SOURCE` in a throwaway container through the engine's client
(the probe's path: kit.runtime.images.fingerprint.probe), so an image exported by another kit
needs nothing of ours. An image id is a hash of the image's content, so the inventory of an id
never changes: it is cached under the kit's cache folder by image id and by the scan's own hash
(a changed scan makes a new one). The host runtime has no image and records none.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kit.io.errors import KitError
from kit.model.base import SOFTWARE_SCHEMA
from kit.model.loader import validate
from kit.model.software import Software
from kit.runtime.containers.docker import DockerContainer
from kit.runtime.images.environments import cache_dir
from kit.runtime.images.fingerprint import probe
from kit.shared import imagescan
from kit.shared.atomic import write_atomic

SOURCE = Path(imagescan.__file__).read_text()
SCAN_HASH = hashlib.sha256(SOURCE.encode()).hexdigest()[:12]
WAIT_S = imagescan.LIMIT_S + 30
"""The scan hashes every CUDA library of the image once (gigabytes in an NGC image); it ends
itself at LIMIT_S."""


def cache_path(image_id: str) -> Path:
    """KIT_CACHE/software/<image id>-<scan hash>.json."""
    key = image_id.removeprefix("sha256:")
    if not key.isalnum():
        raise KitError(f"image id {image_id[:80]!r}: not a content hash")
    return cache_dir() / "software" / f"{key}-{SCAN_HASH}.json"


def cached(image_id: str) -> dict[str, Any] | None:
    """The cached inventory of `image_id`, or None (absent, or not one the model reads)."""
    path = cache_path(image_id)
    try:
        data = json.loads(path.read_text())
        validate(Software, data, path)
    except (OSError, ValueError, KitError):
        return None
    return data if data.get("image_id") == image_id else None


def inventory(
    tag: str, image_id: str, client: Any, engine: type[DockerContainer] = DockerContainer
) -> tuple[dict[str, Any], bool]:
    """software.json of the image `tag` (whose id is `image_id`) and whether it came from the
    cache. A scan that fails is a KitError the caller reports (the runs do not need it)."""

    def scan() -> dict[str, Any]:
        return probe(tag, client, engine=engine, command=["python", "-c", SOURCE], wait_s=WAIT_S)

    return made(tag, image_id, scan)


def made(
    tag: str, image_id: str, scan: Callable[[], dict[str, Any]]
) -> tuple[dict[str, Any], bool]:
    """The inventory of `image_id` from the cache, else `scan()` (kit.shared.imagescan's output,
    read inside the image by the engine that runs it), validated and cached."""
    known = cached(image_id)
    if known is not None:
        return {**known, "image_tag": tag}, True
    t0 = time.perf_counter()
    data = scan()
    data = {
        "schema": SOFTWARE_SCHEMA,
        "image_id": image_id,
        "image_tag": tag,
        **data,
        "seconds": round(time.perf_counter() - t0, 2),
    }
    validate(Software, data, f"the inventory of image {tag}")
    path = cache_path(image_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(data, separators=(",", ":")).encode())
    return data, False


def line(data: dict[str, Any], from_cache: bool) -> str:
    """What the driver prints: the counts, and whether it was made now or read back."""
    summary = Software.model_validate(data).summary()
    how = "cached" if from_cache else f"made in {data.get('seconds', 0):.1f} s"
    return f"image inventory: {summary} ({how})"
