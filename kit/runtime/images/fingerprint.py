"""What an image is, for environment.json: how it was made, and the versions read inside it."""

from __future__ import annotations

import contextlib
import json
import threading
from pathlib import Path
from typing import Any

import kit
from kit.io.errors import KitError
from kit.model.environment import pin_of
from kit.runtime.containers.client import LABEL_OWNER, new_owner
from kit.runtime.containers.docker import (
    DockerContainer,
    fault_reason,
    faults,
    launch_error,
    removed,
    start_removed_on_exit,
)
from kit.runtime.images.image import Image
from kit.shared import stop

# --- fingerprint ------------------------------------------------------------------------------


PROBE_WAIT_S = 120
"""How long the driver waits for the probe container (the probe itself ends at
kit.worker.probe.PROBE_LIMIT_S, later, so that a hung one never outlives a killed driver)."""


def probe(
    tag: str,
    client: Any,
    gpus: dict[str, Any] | None = None,
    engine: type[DockerContainer] = DockerContainer,
    command: list[str] | None = None,
    wait_s: float = PROBE_WAIT_S,
) -> dict[str, Any]:
    """Run `python -m kit.worker.probe` (or `command`, which prints one JSON line last) in a
    throwaway container of the engine whose client `client` is; return what it reports.

    `gpus`: the options that give it the GPUs, in the daemon's request style
    (`engine.probe_gpus`), so that the driver and CUDA versions are read the way the runs will
    see them.
    """
    import docker

    opts = {
        "image": tag,
        "command": command or ["python", "-m", "kit.worker.probe"],
        "labels": {"kit.probe": tag, LABEL_OWNER: new_owner()},
        "network_mode": "none",
        **(gpus or {}),
    }
    try:  # removed by the engine as it exits: a driver killed meanwhile leaves no container
        container, output, exit = start_removed_on_exit(client, engine, opts, demux=True)
    except docker.errors.APIError as e:
        raise KitError(f"probing image {tag}: {launch_error(e)}") from e
    streams: tuple[list[bytes], list[bytes]] = ([], [])

    def read() -> None:
        with contextlib.suppress(Exception):  # the container went: what was read is kept
            for chunk in output:
                for kept, part in zip(streams, chunk, strict=True):
                    if part:
                        kept.append(part)

    reader = threading.Thread(target=read, name="kit-probe-output", daemon=True)
    stop.start_thread(reader)
    try:
        code = exit.code(wait_s)
        reader.join(timeout=10)
    except faults() as e:
        raise KitError(f"probing image {tag}: {fault_reason(e)}") from e
    finally:
        removed(container, engine, exit)  # the engine's already, unless it never ended
    if code is None:
        raise KitError(f"probing image {tag}: the probe did not end within {wait_s:g} s")
    out, err = (b"".join(s).decode(errors="replace") for s in streams)
    lines = [ln for ln in out.splitlines() if ln.strip()]
    if code != 0 or not lines:
        last = (err.strip().splitlines() or ["(no output)"])[-1]
        raise KitError(f"probing image {tag} failed (exit {code}): {last}")
    try:
        return json.loads(lines[-1])
    except json.JSONDecodeError as e:
        raise KitError(f"probing image {tag}: output is not JSON: {lines[-1][:200]}") from e


def fingerprint(
    image: Image, container: dict[str, Any] | None, runtime: str, archive: Path | None = None
) -> dict[str, Any]:
    """environment.json of a bundle, plus how the image was made; pinned only where its base is
    named by digest or it came from a `kit export` archive (kit.model.environment.pin_of)."""
    loaded_from = str(archive) if archive is not None else None
    pinned, pinning = pin_of(image.base_image, image.base_image_digest, loaded_from, image.image_id)
    fp = {
        "name": image.env,
        "pinned": pinned,
        "pinning": pinning,
        "runtime": runtime,
        "image_id": image.image_id,
        "image_tag": image.tag,
        "base_image": image.base_image,
        "base_image_digest": image.base_image_digest,
        "base_image_id": image.base_image_id,
        "base_image_content": image.base_image_content,
        "dockerfile_sha256": image.dockerfile_sha256,
        "lock_sha256": image.lock_sha256,
        "content_hash": image.content_hash,
        "build_args": image.build_args,
        "kit_version": kit.__version__,
        "container": container or {},
    }
    if loaded_from is not None:
        fp["loaded_from"] = loaded_from
    return fp
