"""An environment -> build context -> image, through the Docker SDK; export and load of archives.

The image tag is a content hash of everything that defines the image, so an unchanged
environment is never rebuilt and a changed one always is.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kit.bundle import sha256_file
from kit.io import locks, terminal
from kit.io.errors import InputError, KitError
from kit.recipe.environments import REPO_ROOT
from kit.runtime.containers.client import answers_as_podman
from kit.runtime.images.base_choice import check_reference
from kit.runtime.images.environments import Environment, cache_dir, load, wheelhouse
from kit.shared import scratch
from kit.shared.imagescan import files_digest

LABEL_ENV = "kit.env"
LABEL_HASH = "kit.content-hash"
LABEL_DOCKERFILE = "kit.dockerfile-sha256"
LABEL_LOCK = "kit.lock-sha256"
LABEL_BASE = "kit.base-image"
# Worker files copied into every image (the worker side of tests/unit/test_layers.py).
WORKER_FILES = ("kit/__init__.py", "kit/shared", "kit/worker", "kit/workloads")


class BuildError(KitError):
    """An image build failed; `log_tail` holds the last lines of the build log."""

    def __init__(self, message: str, log_tail: str = "", log_path: Path | None = None) -> None:
        super().__init__(message)
        self.log_tail = log_tail
        self.log_path = log_path


# --- content hash and build context -----------------------------------------------------------


def _worker_sources() -> Iterator[tuple[str, Path]]:
    """(path inside the context, file) for the worker package, sorted, without caches."""
    for rel in WORKER_FILES:
        src = REPO_ROOT / rel
        files = [src] if src.is_file() else sorted(src.rglob("*.py"))
        for f in files:
            yield f.relative_to(REPO_ROOT).as_posix(), f


def worker_module_digest() -> str:
    """The digest a run in an image built here records for the `kit` module (kit.worker.loaded:
    every file the image holds under /opt/kit/kit, which is _worker_sources'), known before the
    run: a rerun compares it with the bundle's runs' (the kit's own code, which no inventory of
    the image's packages lists)."""
    return files_digest((rel, sha256_file(f)) for rel, f in _worker_sources())


def content_hash(env: Environment, build_args: dict[str, str]) -> str:
    """sha256 over everything that defines the image: Dockerfile, lock, worker, build args."""
    h = hashlib.sha256()

    def part(name: str, data: bytes) -> None:
        h.update(f"{name}\0{len(data)}\0".encode())
        h.update(data)

    part("Dockerfile", env.dockerfile.read_bytes())
    if env.locked:
        part("requirements.lock", env.lock.read_bytes())
    for rel, f in _worker_sources():
        part(rel, f.read_bytes())
    part("build_args", json.dumps(build_args, sort_keys=True).encode())
    return h.hexdigest()


def image_tag(env: Environment, base_image_override: str | None = None) -> str:
    """`kit-<env>:<hash12>`: the tag the image gets for the current inputs."""
    args = build_args(env, base_image_override)
    return f"kit-{env.name}:{content_hash(env, args)[:12]}"


def build_args(env: Environment, base_image_override: str | None = None) -> dict[str, str]:
    """The build's arguments: the user's base (an image reference, never an option) or the pin."""
    if base_image_override is not None:
        check_reference(base_image_override)
    return {"BASE_IMAGE": base_image_override or env.default_base_image()}


def assemble_context(env: Environment, wheels: dict[str, Path], dest: Path) -> None:
    """Lay out the build context: Dockerfile, requirements.lock, wheels/, kit/ (worker only);
    an environment of the image's own packages gets the Dockerfile and the worker alone."""
    shutil.copy2(env.dockerfile, dest / "Dockerfile")
    if env.locked:
        shutil.copy2(env.lock, dest / "requirements.lock")
        (dest / "wheels").mkdir()
    for whl in wheels.values():  # none for an environment of the image's own packages
        target = dest / "wheels" / whl.name
        try:
            os.link(whl, target)  # no copy of gigabytes when the cache is on the same disk
        except OSError:
            shutil.copy2(whl, target)
    for rel, f in _worker_sources():
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(f, target)


@dataclass
class Image:
    """A built (or reused) environment image and how it was made."""

    env: str
    tag: str
    image_id: str
    cached: bool
    base_image: str
    base_image_id: str | None
    base_image_digest: str | None
    dockerfile_sha256: str
    lock_sha256: str
    content_hash: str
    build_args: dict[str, str] = field(default_factory=dict)
    # sha256 over the base image's layers (their diff ids): the same files, wherever the image
    # came from (a registry by digest, or `docker import` of a machine's own stack, which has none)
    base_image_content: str | None = None


def lock_sha256(env: Environment) -> str | None:
    return sha256_file(env.lock) if env.locked else None


def _base_content(client: Any, ref: str) -> str | None:
    """sha256 over the base image's layer diff ids, as the daemon has it; None when absent."""
    import docker

    try:
        layers = client.images.get(ref).attrs.get("RootFS", {}).get("Layers") or []
    except docker.errors.ImageNotFound:
        return None
    return hashlib.sha256("\n".join(layers).encode()).hexdigest() if layers else None


def base_identity(client: Any, ref: str) -> tuple[str | None, str | None]:
    """(image id, repo digest) of the base image as the daemon has it."""
    import docker

    try:
        img = client.images.get(ref)
    except docker.errors.ImageNotFound:
        return None, None
    digests = img.attrs.get("RepoDigests") or []
    # Docker records a repo digest only for an image from a registry; Podman computes one for
    # every image, a `podman load`ed local one too (docker.io/library/NAME@sha256:..., pullable
    # from nowhere): there only a digest the reference names pins the base (pin_of)
    if answers_as_podman(client.version()):
        digests = []
    registry = [d for d in digests if "@" in d and not d.startswith("localhost/")]
    digest = next((d.split("@", 1)[1] for d in registry), None)
    if digest is None and "@sha256:" in ref:
        digest = ref.split("@", 1)[1]
    return img.id, digest


def ensure_base(client: Any, ref: str, echo: Callable[[str], None], env: str = "") -> None:
    """Make sure the daemon has the base image: present, or pulled now (by its digest)."""
    import docker

    try:
        client.images.get(ref)
        return
    except docker.errors.ImageNotFound:
        pass
    except docker.errors.APIError as e:  # not a reference at all ("invalid reference format")
        why = str(e.explanation or e).strip().splitlines()[0][:200]
        raise InputError(f"base image {ref!r} (environment {env}): {why}") from e
    echo(f"pulling base image {ref}")
    try:
        client.images.pull(ref)
    except docker.errors.APIError as e:
        first = str(e.explanation or e).strip().splitlines()[0][:200]
        raise InputError(  # refused before any work, as a daemon that does not answer (exit 2)
            f"base image {ref} (environment {env}) is not on this machine and cannot be pulled "
            f"({first}). Use a local image with --base-image IMAGE, or on a machine that can pull "
            f"it run `kit export {env} -o kit-{env}.tar` and add --image-archive kit-{env}.tar here"
        ) from e


def build(
    env: Environment | str,
    base_image_override: str | None = None,
    *,
    client: Any,
    echo: Callable[[str], None] | None = None,
) -> Image:
    """Build the environment's image through the engine's client (the Docker SDK, on Docker's
    or Podman's socket), or reuse it when the tag exists.

    Progress lines go to `echo` (default: the terminal through rich). On failure the full build
    log is written under ~/.cache/kit/build-logs/ and the error names it with the last line.
    """
    import docker

    env = env if isinstance(env, Environment) else load(env)
    echo = echo or _terminal_echo()
    args = build_args(env, base_image_override)
    digest = content_hash(env, args)
    tag = f"kit-{env.name}:{digest[:12]}"
    base = args["BASE_IMAGE"]

    def made(image_id: str, cached: bool) -> Image:
        base_id, base_digest = base_identity(client, base)
        return Image(
            env=env.name,
            tag=tag,
            image_id=image_id,
            cached=cached,
            base_image=base,
            base_image_id=base_id,
            base_image_digest=base_digest,
            dockerfile_sha256=sha256_file(env.dockerfile),
            lock_sha256=lock_sha256(env),
            content_hash=digest,
            build_args=args,
            base_image_content=_base_content(client, base),
        )

    def waiting() -> None:
        echo(f"waiting for another kit on this host that builds {tag}")

    # one build of a tag at a time on this engine: a second kit (parallel tests, two users, two
    # jobs on one node) waits, then reuses the image, instead of building gigabytes twice
    with locks.held(_build_lock(client, tag), waiting):
        try:
            return made(client.images.get(tag).id, cached=True)
        except docker.errors.ImageNotFound:
            pass
        return made(_build(env, tag, args, digest, client, echo), cached=False)


def _build_lock(client: Any, tag: str) -> Path:
    """The lock file of `tag` on the engine `client` talks to (Docker's and Podman's images are
    apart), under the kit's cache."""
    engine = hashlib.sha256(str(getattr(client.api, "base_url", "")).encode()).hexdigest()[:12]
    return cache_dir() / "locks" / f"build-{engine}-{tag.replace(':', '-')}.lock"


def _build(
    env: Environment,
    tag: str,
    args: dict[str, str],
    digest: str,
    client: Any,
    echo: Callable[[str], None],
) -> str:
    """Build `tag` and return its image id (the caller holds the tag's lock)."""
    import docker

    base = args["BASE_IMAGE"]
    echo(f"building {tag} (environment {env.name}, base {base})")
    ensure_base(client, base, echo, env.name)  # before downloading gigabytes of wheels for nothing
    wheels = wheelhouse(env) if env.locked else {}
    log: list[str] = []
    image_id = None
    # named for this driver: a later run removes it if the driver is killed (kit.shared.scratch)
    with tempfile.TemporaryDirectory(prefix=scratch.prefix("build")) as ctx:
        assemble_context(env, wheels, Path(ctx))
        try:
            stream = client.api.build(
                path=ctx,
                tag=tag,
                buildargs=args,
                decode=True,
                rm=True,
                forcerm=True,
                pull=False,
                labels={
                    LABEL_ENV: env.name,
                    LABEL_HASH: digest,
                    LABEL_BASE: base,
                    LABEL_DOCKERFILE: sha256_file(env.dockerfile),
                    LABEL_LOCK: lock_sha256(env) or "",
                },
            )
            for chunk in stream:
                text = chunk.get("stream") or chunk.get("status") or ""
                if text.strip():
                    for line in text.rstrip("\n").splitlines():
                        log.append(line)
                        echo(line)
                if "error" in chunk:
                    err = str(chunk.get("errorDetail", {}).get("message") or chunk["error"])
                    log.append(err)
                    raise _build_failed(env, tag, err, log)
                aux = chunk.get("aux") or {}
                image_id = aux.get("ID", image_id)
        except docker.errors.APIError as e:
            raise _build_failed(env, tag, str(e.explanation or e), log) from e
    try:
        return str(client.images.get(tag).id)
    except docker.errors.ImageNotFound as e:
        raise _build_failed(env, tag, "the build ended but the tag does not exist", log) from e


def _build_failed(env: Environment, tag: str, err: str, log: list[str]) -> BuildError:
    logs = cache_dir() / "build-logs"
    logs.mkdir(parents=True, exist_ok=True)
    path = logs / f"{tag.replace(':', '-')}.log"
    path.write_text("\n".join(log) + "\n")
    first = err.strip().splitlines()[0] if err.strip() else "unknown error"
    return BuildError(
        f"building environment {env.name!r} ({tag}) failed: {first} (build log: {path})",
        log_tail="\n".join(log[-30:]),
        log_path=path,
    )


def console() -> Any:
    """The terminal (stderr) through rich, as the rest of the driver prints (kit.io.terminal)."""
    return terminal.console(highlight=False, soft_wrap=True)


def _terminal_echo() -> Callable[[str], None]:
    from rich.markup import escape

    out = console()
    return lambda line: out.print(f"[dim]{escape(line)}[/dim]")
