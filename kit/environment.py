"""Pinned environments: docker/<name>/ -> build context -> image, and the image's fingerprint.

An environment is a folder under docker/ with a Dockerfile, a hashed requirements.lock and an
optional env.yaml (name, description, target Python and glibc). The driver downloads the locked
wheels on the host (a wheelhouse, so the image builds with no index: clusters are often offline
and our containers reach no index), assembles a build context in a temp dir, and builds through
the Docker SDK. The image tag is a content hash of everything that defines the image, so an
unchanged environment is never rebuilt and a changed one always is.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

import kit
from kit.bundle import sha256_file
from kit.errors import InputError, KitError

REPO_ROOT = Path(__file__).resolve().parent.parent
ENV_ROOT = REPO_ROOT / "docker"
WHEEL_CACHE = Path(os.environ.get("KIT_CACHE", Path.home() / ".cache" / "kit")) / "wheels"
BUILD_LOGS = WHEEL_CACHE.parent / "build-logs"
LABEL_ENV = "kit.env"
LABEL_HASH = "kit.content-hash"
LABEL_DOCKERFILE = "kit.dockerfile-sha256"
LABEL_LOCK = "kit.lock-sha256"
LABEL_BASE = "kit.base-image"
# Worker files copied into every image (the worker imports only `kit` and `kit.worker.*`).
WORKER_FILES = ("kit/__init__.py", "kit/worker")


class BuildError(KitError):
    """An image build failed; `log_tail` holds the last lines of the build log."""

    def __init__(self, message: str, log_tail: str = "", log_path: Path | None = None) -> None:
        super().__init__(message)
        self.log_tail = log_tail
        self.log_path = log_path


class EnvFile(BaseModel):
    """env.yaml: what the Dockerfile cannot say (the wheel target of its Python)."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = None
    description: str = ""
    python: str = "3.11"  # major.minor of the image's python3: selects cpXY wheels
    glibc: str = "2.28"  # the image's glibc: the newest manylinux tag its wheels may use
    arch: str = "x86_64"
    device: str = "cuda"  # "cuda" | "cpu": what this environment can run


@dataclass
class Environment:
    """A loaded docker/<name>/ folder."""

    name: str
    path: Path
    description: str
    python: str
    glibc: str
    arch: str
    device: str

    @property
    def dockerfile(self) -> Path:
        return self.path / "Dockerfile"

    @property
    def lock(self) -> Path:
        return self.path / "requirements.lock"

    def default_base_image(self) -> str:
        """The BASE_IMAGE default declared in the Dockerfile (`ARG BASE_IMAGE=...`)."""
        m = re.search(r"^ARG\s+BASE_IMAGE=(\S+)", self.dockerfile.read_text(), re.MULTILINE)
        if not m:
            raise InputError(f"{self.dockerfile}: no `ARG BASE_IMAGE=<image>@sha256:...` line")
        return m.group(1)


def available() -> list[str]:
    """Names of the environments under docker/."""
    return sorted(p.parent.name for p in ENV_ROOT.glob("*/Dockerfile"))


def load(name_or_path: str | Path) -> Environment:
    """Load an environment by name (a folder under docker/) or by path to such a folder."""
    path = Path(name_or_path)
    if not (path.is_dir() and (path / "Dockerfile").is_file()):
        path = ENV_ROOT / str(name_or_path)
    if not (path / "Dockerfile").is_file():
        raise InputError(
            f"environment {str(name_or_path)!r}: no {path / 'Dockerfile'}; "
            f"available: {', '.join(available()) or 'none'}"
        )
    if not (path / "requirements.lock").is_file():
        raise InputError(f"environment {path.name!r}: no {path / 'requirements.lock'}")
    data: dict[str, Any] = {}
    env_yaml = path / "env.yaml"
    if env_yaml.is_file():
        try:
            data = yaml.safe_load(env_yaml.read_text()) or {}
            spec = EnvFile.model_validate(data)
        except yaml.YAMLError as e:
            raise InputError(f"{env_yaml}: not valid YAML: {e}".replace("\n", " ")) from e
        except ValidationError as e:
            err = e.errors()[0]
            field_name = ".".join(str(x) for x in err["loc"])
            raise InputError(f"{env_yaml}: field {field_name!r}: {err['msg']}") from e
    else:
        spec = EnvFile()
    if spec.device not in ("cuda", "cpu"):
        raise InputError(f"{env_yaml}: field 'device': {spec.device!r}; allowed: cuda, cpu")
    if not re.fullmatch(r"3\.\d+", spec.python):
        raise InputError(f"{env_yaml}: field 'python': {spec.python!r}; expected like '3.12'")
    if not re.fullmatch(r"2\.\d+", spec.glibc):
        raise InputError(f"{env_yaml}: field 'glibc': {spec.glibc!r}; expected like '2.36'")
    return Environment(
        name=spec.name or path.name,
        path=path,
        description=spec.description,
        python=spec.python,
        glibc=spec.glibc,
        arch=spec.arch,
        device=spec.device,
    )


# --- the wheel target -------------------------------------------------------------------------


def pip_target_args(env: Environment) -> list[str]:
    """pip options that select wheels for the image's interpreter and glibc, not the host's."""
    minor = int(env.glibc.split(".")[1])
    plats = [f"manylinux_2_{i}_{env.arch}" for i in range(minor, 4, -1)]
    plats += [f"manylinux2014_{env.arch}", f"manylinux2010_{env.arch}", f"manylinux1_{env.arch}"]
    args = ["--only-binary=:all:", "--implementation", "cp", "--python-version", env.python]
    args += ["--abi", "cp" + env.python.replace(".", "")]
    for p in plats:
        args += ["--platform", p]
    return args


def compile_lock(env: Environment, requirements_in: Path | None = None) -> str:
    """Resolve requirements.in for the image's target and return a lock with sha256 hashes.

    Uses pip's resolver (`pip install --dry-run --report`), which reads the hashes from the
    index without downloading the wheels. Environment markers are evaluated by the running
    interpreter: run this with the image's Python version (e.g. python3.12 for cuda13).
    """
    req = requirements_in or env.path / "requirements.in"
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        cmd = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed",
               "--quiet", "--report", str(report), "--target", str(Path(tmp) / "t"),
               *pip_target_args(env), "-r", str(req)]  # fmt: skip
        _run_pip(cmd, "resolve the lock")
        items = json.loads(report.read_text())["install"]
    lines = [
        f"# kit environment {env.name}: Python {env.python}, glibc {env.glibc}, {env.arch}.",
        f"# Generated from {req.name} by scripts/lock_env.py; do not edit by hand.",
    ]
    for it in sorted(items, key=lambda i: i["metadata"]["name"].lower()):
        name, version = it["metadata"]["name"], it["metadata"]["version"]
        hashes = it["download_info"].get("archive_info", {}).get("hashes", {})
        if "sha256" not in hashes:
            raise KitError(f"{name}=={version}: the index gave no sha256 for its wheel")
        lines.append(f"{name}=={version} \\\n    --hash=sha256:{hashes['sha256']}")
    return "\n".join(lines) + "\n"


def lock_hashes(lock: Path) -> set[str]:
    """The sha256 values the lock allows."""
    return set(re.findall(r"--hash=sha256:([0-9a-f]{64})", lock.read_text()))


# --- wheelhouse -------------------------------------------------------------------------------


def _run_pip(cmd: list[str], what: str) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = [ln for ln in proc.stderr.splitlines() if ln.strip() and "Location" not in ln]
        last = tail[-1] if tail else "(no output)"
        raise KitError(
            f"pip could not {what} (exit {proc.returncode}): {last} [command: {' '.join(cmd)}]"
        )


def wheelhouse(env: Environment, cache: Path | None = None) -> dict[str, Path]:
    """Download the locked wheels on the host into a shared cache; return {sha256: path}.

    pip checks every file against the lock (--require-hashes) and skips files already in the
    cache. Only the files the lock names are returned (the cache holds every environment's).
    """
    cache = cache or WHEEL_CACHE / f"cp{env.python.replace('.', '')}-{env.arch}"
    cache.mkdir(parents=True, exist_ok=True)
    wanted = lock_hashes(env.lock)
    found = _index_wheels(cache, wanted)
    if set(found) != wanted:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--require-hashes",
               "--disable-pip-version-check", "-d", str(cache), *pip_target_args(env),
               "-r", str(env.lock)]  # fmt: skip
        _run_pip(cmd, f"download the wheels of {env.lock}")
        found = _index_wheels(cache, wanted)
    missing = wanted - set(found)
    if missing:
        raise KitError(
            f"wheelhouse {cache}: {len(missing)} locked wheel(s) missing after download "
            f"(e.g. sha256 {sorted(missing)[0]}); the lock may name a wheel for another platform"
        )
    return found


def _index_wheels(cache: Path, wanted: set[str]) -> dict[str, Path]:
    """Hash the cached wheels (memoized in <wheel>.sha256 next to each) and keep the wanted."""
    found: dict[str, Path] = {}
    for whl in cache.glob("*.whl"):
        memo = whl.with_name(whl.name + ".sha256")
        if memo.is_file() and memo.stat().st_mtime >= whl.stat().st_mtime:
            digest = memo.read_text().strip()
        else:
            digest = sha256_file(whl)
            memo.write_text(digest)
        if digest in wanted:
            found[digest] = whl
    return found


# --- content hash and build context -----------------------------------------------------------


def _worker_sources() -> Iterator[tuple[str, Path]]:
    """(path inside the context, file) for the worker package, sorted, without caches."""
    for rel in WORKER_FILES:
        src = REPO_ROOT / rel
        files = [src] if src.is_file() else sorted(src.rglob("*.py"))
        for f in files:
            yield f.relative_to(REPO_ROOT).as_posix(), f


def content_hash(env: Environment, build_args: dict[str, str]) -> str:
    """sha256 over everything that defines the image: Dockerfile, lock, worker, build args."""
    h = hashlib.sha256()

    def part(name: str, data: bytes) -> None:
        h.update(f"{name}\0{len(data)}\0".encode())
        h.update(data)

    part("Dockerfile", env.dockerfile.read_bytes())
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
    return {"BASE_IMAGE": base_image_override or env.default_base_image()}


def assemble_context(env: Environment, wheels: dict[str, Path], dest: Path) -> None:
    """Lay out the build context: Dockerfile, requirements.lock, wheels/, kit/ (worker only)."""
    shutil.copy2(env.dockerfile, dest / "Dockerfile")
    shutil.copy2(env.lock, dest / "requirements.lock")
    (dest / "wheels").mkdir()
    for whl in wheels.values():
        target = dest / "wheels" / whl.name
        try:
            os.link(whl, target)  # no copy of gigabytes when the cache is on the same disk
        except OSError:
            shutil.copy2(whl, target)
    for rel, f in _worker_sources():
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(f, target)


# --- Docker -----------------------------------------------------------------------------------


def docker_client() -> Any:
    """A Docker SDK client, or a one-line KitError naming what to do."""
    import docker  # the driver's dependency; imported late so that `kit --help` stays fast

    if not hasattr(docker, "from_env"):  # only the repo's docker/ folder was found
        raise KitError("the Docker SDK for Python is not installed: pip install 'docker>=7'")
    try:
        client = docker.from_env(timeout=600)
        client.ping()
    except Exception as e:
        raise KitError(
            f"no Docker daemon answers ({type(e).__name__}: {str(e).splitlines()[0][:160]}); "
            "start dockerd or use --runtime host"
        ) from e
    return client


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


def _base_identity(client: Any, ref: str) -> tuple[str | None, str | None]:
    """(image id, repo digest) of the base image as the daemon has it."""
    import docker

    try:
        img = client.images.get(ref)
    except docker.errors.ImageNotFound:
        return None, None
    digests = img.attrs.get("RepoDigests") or []
    digest = next((d.split("@", 1)[1] for d in digests if "@" in d), None)
    if digest is None and "@sha256:" in ref:
        digest = ref.split("@", 1)[1]
    return img.id, digest


def ensure_base(client: Any, ref: str, echo: Callable[[str], None]) -> None:
    """Make sure the daemon has the base image: present, or pulled now (by its digest)."""
    import docker

    try:
        client.images.get(ref)
        return
    except docker.errors.ImageNotFound:
        pass
    echo(f"pulling base image {ref}")
    try:
        client.images.pull(ref)
    except docker.errors.APIError as e:
        first = str(e.explanation or e).strip().splitlines()[0][:200]
        raise KitError(
            f"base image {ref} is not on this machine and cannot be pulled ({first}); "
            "`docker load` it, or pass --base-image with a local image"
        ) from e


def build(
    env: Environment | str,
    base_image_override: str | None = None,
    client: Any = None,
    echo: Callable[[str], None] | None = None,
) -> Image:
    """Build the environment's image through the Docker SDK, or reuse it when the tag exists.

    Progress lines go to `echo` (default: the terminal through rich). On failure the full build
    log is written under ~/.cache/kit/build-logs/ and the error names it with the last line.
    """
    import docker

    env = env if isinstance(env, Environment) else load(env)
    client = client or docker_client()
    echo = echo or _terminal_echo()
    args = build_args(env, base_image_override)
    digest = content_hash(env, args)
    tag = f"kit-{env.name}:{digest[:12]}"
    base = args["BASE_IMAGE"]

    def made(image_id: str, cached: bool) -> Image:
        base_id, base_digest = _base_identity(client, base)
        return Image(
            env=env.name, tag=tag, image_id=image_id, cached=cached, base_image=base,
            base_image_id=base_id, base_image_digest=base_digest,
            dockerfile_sha256=sha256_file(env.dockerfile), lock_sha256=sha256_file(env.lock),
            content_hash=digest, build_args=args,
        )  # fmt: skip

    try:
        return made(client.images.get(tag).id, cached=True)
    except docker.errors.ImageNotFound:
        pass

    echo(f"building {tag} (environment {env.name}, base {base})")
    ensure_base(client, base, echo)  # before downloading gigabytes of wheels for nothing
    wheels = wheelhouse(env)
    log: list[str] = []
    image_id = None
    with tempfile.TemporaryDirectory(prefix=f"kit-build-{env.name}-") as ctx:
        assemble_context(env, wheels, Path(ctx))
        try:
            stream = client.api.build(
                path=ctx, tag=tag, buildargs=args, decode=True, rm=True, forcerm=True,
                pull=False, labels={LABEL_ENV: env.name, LABEL_HASH: digest, LABEL_BASE: base,
                                    LABEL_DOCKERFILE: sha256_file(env.dockerfile),
                                    LABEL_LOCK: sha256_file(env.lock)},
            )  # fmt: skip
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
        image_id = client.images.get(tag).id
    except docker.errors.ImageNotFound as e:
        raise _build_failed(env, tag, "the build ended but the tag does not exist", log) from e
    return made(image_id, cached=False)


def _build_failed(env: Environment, tag: str, err: str, log: list[str]) -> BuildError:
    BUILD_LOGS.mkdir(parents=True, exist_ok=True)
    path = BUILD_LOGS / f"{tag.replace(':', '-')}.log"
    path.write_text("\n".join(log) + "\n")
    first = err.strip().splitlines()[0] if err.strip() else "unknown error"
    return BuildError(
        f"building environment {env.name!r} ({tag}) failed: {first} (build log: {path})",
        log_tail="\n".join(log[-30:]),
        log_path=path,
    )


def console() -> Any:
    """The terminal (stderr) through rich, as the rest of the driver prints."""
    from rich.console import Console

    return Console(stderr=True, highlight=False, soft_wrap=True)


def _terminal_echo() -> Callable[[str], None]:
    from rich.markup import escape

    out = console()
    return lambda line: out.print(f"[dim]{escape(line)}[/dim]")


def export(tag: str, path: Path, client: Any = None) -> Path:
    """Save an image (by tag) as a tar archive that `docker load` or `load()` reads back."""
    import docker

    client = client or docker_client()
    try:
        image = client.images.get(tag)
    except docker.errors.ImageNotFound as e:
        raise InputError(f"no image {tag!r}; build it first with `kit build`") from e
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".part")
    with tmp.open("wb") as f:
        for chunk in image.save(named=True):
            f.write(chunk)
    tmp.replace(path)
    return path


def from_archive(path: Path, env_name: str, client: Any = None) -> Image:
    """Load an archive made by `kit export` and describe its image from the labels it carries.

    For a rerun on a machine with no registry (and maybe no network): the image is used as it
    is, not rebuilt, so the fingerprint is the one of the machine that built it.
    """
    client = client or docker_client()
    tags = [t for t in load_archive(path, client) if t.startswith(f"kit-{env_name}:")]
    if not tags:
        raise InputError(f"{path}: holds no image of environment {env_name!r} (kit-{env_name}:*)")
    img = client.images.get(tags[0])
    labels = img.labels or {}
    base = labels.get(LABEL_BASE, "unknown")
    base_id, base_digest = _base_identity(client, base)
    if base_digest is None and "@sha256:" in base:
        base_digest = base.split("@", 1)[1]
    return Image(
        env=env_name, tag=tags[0], image_id=img.id, cached=True, base_image=base,
        base_image_id=base_id, base_image_digest=base_digest,
        dockerfile_sha256=labels.get(LABEL_DOCKERFILE, ""), lock_sha256=labels.get(LABEL_LOCK, ""),
        content_hash=labels.get(LABEL_HASH, ""), build_args={"BASE_IMAGE": base},
    )  # fmt: skip


def load_archive(path: Path, client: Any = None) -> list[str]:
    """Load an image archive made by `export`; return the tags it holds."""
    client = client or docker_client()
    if not path.is_file():
        raise InputError(f"{path}: no such image archive")
    with path.open("rb") as f:
        images = client.images.load(f)
    return [t for img in images for t in img.tags]


# --- fingerprint ------------------------------------------------------------------------------


def probe(tag: str, client: Any = None, gpus: bool = False) -> dict[str, Any]:
    """Run `python -m kit.worker.probe` in a throwaway container; return what it reports."""
    import docker

    client = client or docker_client()
    kwargs: dict[str, Any] = {}
    if gpus:
        kwargs["device_requests"] = [docker.types.DeviceRequest(count=-1, capabilities=[["gpu"]])]
    container = client.containers.create(
        tag, ["python", "-m", "kit.worker.probe"], labels={"kit.probe": tag}, **kwargs
    )
    try:
        container.start()
        status = container.wait(timeout=120)
        out = container.logs(stdout=True, stderr=False).decode(errors="replace")
        err = container.logs(stdout=False, stderr=True).decode(errors="replace")
    finally:
        container.remove(force=True)
    code = status.get("StatusCode")
    lines = [ln for ln in out.splitlines() if ln.strip()]
    if code != 0 or not lines:
        last = (err.strip().splitlines() or ["(no output)"])[-1]
        raise KitError(f"probing image {tag} failed (exit {code}): {last}")
    try:
        return json.loads(lines[-1])
    except json.JSONDecodeError as e:
        raise KitError(f"probing image {tag}: output is not JSON: {lines[-1][:200]}") from e


def fingerprint(image: Image, container: dict[str, Any] | None, runtime: str) -> dict[str, Any]:
    """environment.json of a bundle (CONTRACTS.md), plus how the image was made."""
    fp = {
        "name": image.env,
        "pinned": True,
        "runtime": runtime,
        "image_id": image.image_id,
        "image_tag": image.tag,
        "base_image": image.base_image,
        "base_image_digest": image.base_image_digest,
        "base_image_id": image.base_image_id,
        "dockerfile_sha256": image.dockerfile_sha256,
        "lock_sha256": image.lock_sha256,
        "content_hash": image.content_hash,
        "build_args": image.build_args,
        "kit_version": kit.__version__,
        "container": container or {},
    }
    return fp


def rerun_environment(old_env: dict[str, Any], image_archive: Path | None = None) -> Any:
    """The docker side of `kit reproduce BUNDLE` (kit.rerun): the recorded environment, rebuilt.

    Builds (or reuses) the environment the bundle names with the base image it recorded, or
    loads `image_archive` (a `kit export`) without building, and probes it, so that every
    difference from the recorded fingerprint (lock, Dockerfile, base digest, versions) is known
    before the first run.
    """
    from kit.rerun import RerunEnvironment
    from kit.runtime.docker import gpu_support

    name = old_env.get("name") or "cuda13"
    base = (old_env.get("build_args") or {}).get("BASE_IMAGE") or old_env.get("base_image")
    env = load(name)
    client = docker_client()
    if image_archive is not None:
        image = from_archive(image_archive, name, client=client)
    else:
        image = build(env, base_image_override=base, client=client)
    container = probe(image.tag, client=client, gpus=gpu_support(client) is not None)
    return RerunEnvironment(
        runtime="docker",
        fingerprint=fingerprint(image, container, runtime="docker"),
        options={"environment": name, "base_image": base},
    )
