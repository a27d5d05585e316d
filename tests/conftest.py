"""Shared test helpers: run the real `kit` command in a subprocess, as a user would; a typed
results.json and recipe from the few fields a test cares about."""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.kit_zygote import Zygote, startup_env

ROOT = Path(__file__).resolve().parent.parent
# Caches that are safe to share and slow to fill (matplotlib's font list, fontconfig's, the
# kit's wheelhouse, which it locks while filling): kept where they were before each test's HOME
# moves, so the session pays for them once
_REAL_HOME = Path.home()
os.environ.setdefault("MPLCONFIGDIR", str(_REAL_HOME / ".config" / "matplotlib"))
os.environ.setdefault("XDG_CACHE_HOME", str(_REAL_HOME / ".cache"))
os.environ.setdefault("KIT_CACHE", str(_REAL_HOME / ".cache" / "kit"))
# torch.compile's caches default to TMPDIR, which each test has its own of: one per session
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(_REAL_HOME / ".cache" / "torchinductor"))
os.environ.setdefault("TRITON_CACHE_DIR", str(_REAL_HOME / ".cache" / "triton"))
HEADER = {"recipe": "test", "device": "cpu", "runtime": "host", "pinned": False, "smoke": True,
          "repeats": 1}  # fmt: skip
"""The header fields kit.bundle.Bundle.create needs (kit.model.Results), for a test's bundle."""


def results_model(runs: list[dict] | None = None, **header):
    """kit.model.Results (validated, as the report reads it) from a test's runs and header fields,
    the rest filled with a plain complete CUDA bundle's."""
    from kit.model import Results

    run = {
        "schema": 1, "benchmark": "b", "kind": "allreduce", "variant": "p2p", "repeat": 0,
        "status": "ok", "device": "cuda",
    }  # fmt: skip
    fields = {
        "schema": 1, "kit_version": "test", "created_at": "2026-01-01T00:00:00+00:00",
        "status": "complete", "recipe": "test", "device": "cuda", "runtime": "host",
        "pinned": False, "smoke": False, "repeats": 1,
    }  # fmt: skip
    typed_runs = [{**run, "run_id": f"r{i}", **r} for i, r in enumerate(runs or [])]
    return Results.model_validate({**fields, **header, "runs": typed_runs})


def recipe_model(*kinds: str, **fields):
    """kit.recipe.Recipe (validated, as a loaded bundle holds it) with one benchmark per kind
    given (or mapping in `benchmarks`), the rest the recipe's defaults."""
    from kit.recipe import Recipe

    benchmarks = fields.pop("benchmarks", None) or [{"kind": k} for k in kinds or ("allreduce",)]
    return Recipe.model_validate({"kit": 1, "name": "test", "benchmarks": benchmarks, **fields})


def one_line(proc, code: int | tuple[int, ...] = 2) -> str:
    """A refused command: exit `code` (or one of them), no traceback, and stderr exactly one
    line, `kit: error: ...`; returns that line (with its newline)."""
    codes = code if isinstance(code, tuple) else (code,)
    assert proc.returncode in codes, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("kit: error: "), proc.stderr
    return proc.stderr


def one_line_exit_2(proc, words: str) -> None:
    """A usage refusal: exit 2, one line on stderr naming `words`, nothing on stdout."""
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and words in lines[0], proc.stderr
    assert not proc.stdout.strip(), proc.stdout


def room_to_export(client, tag: str, folder: Path) -> None:
    """Skip, saying how much is free, unless the disk holds an image's export: Docker 26 writes
    the whole image to its own temporary folder before it streams the archive, and the archive
    is the image's size again (each about 1.1-1.3 GB for the cpu image). On CI's disk, shared
    with the virtual environment and both engines' stores, two saves once failed for want of it."""
    size = client.images.get(tag).attrs.get("Size") or 0
    root = client.info().get("DockerRootDir") or "/var/lib/docker"
    places = {os.stat(p).st_dev: p for p in (folder, root) if os.path.exists(p)}
    need = 2 * size + (1 << 29) if len(places) == 1 else size + (1 << 28)
    for place in places.values():
        free = shutil.disk_usage(place).free
        if free < need:
            pytest.skip(
                f"exporting {tag} needs about {need / 1e9:.1f} GB free on {place} (the "
                f"daemon's copy and the archive); {free / 1e9:.1f} GB is free there"
            )


def cpu_image_in_podman(podman, base: str) -> str:
    """The cpu image's tag in Podman's store, copied there from Docker's daemon (built there
    if needed, under the kit's build lock) rather than built again by Podman: a torch install,
    minutes and 2.5 GB of CI's disk. One copy at a time across test workers."""
    import docker

    from kit.io import locks
    from kit.runtime.images import archive as archives
    from kit.runtime.images import environments
    from kit.runtime.images import image as images

    tag = images.image_tag(environments.load("cpu"), base)
    with locks.held(environments.cache_dir() / "locks" / "test-cpu-image-in-podman.lock"):
        try:
            podman.images.get(tag)
            return tag
        except docker.errors.ImageNotFound:
            pass
        dclient = docker_or_skip(300)
        built = images.build("cpu", base_image_override=base, client=dclient, echo=lambda _: None)
        with tempfile.TemporaryDirectory() as folder:
            room_to_export(dclient, built.tag, Path(folder))
            archive = Path(folder) / "kit-cpu.tar"
            archives.export(built.tag, archive, client=dclient)
            archives.load_archive(archive, client=podman)
    return tag


def allreduce_recipe(
    name: str,
    params: str,
    gpus: int = 2,
    timeout_s: int = 120,
    variants: str = "p2p",
    environment: str | None = None,
    repeats: int = 1,
) -> str:
    """A one-benchmark allreduce recipe's YAML, for a test that runs it."""
    env = f"environment: {environment}\n" if environment else ""
    return (
        f"kit: 1\nname: {name}\n{env}gpus: {gpus}\nrepeats: {repeats}\ntimeout_s: {timeout_s}\n"
        f"variants: [{variants}]\nbenchmarks:\n  - kind: allreduce\n    params: {{{params}}}\n"
    )


def one_variant(tmp_path: Path, name: str = "allreduce") -> Path:
    """recipes/NAME.yaml with its first variant only, written into tmp_path: one launch a
    repeat, for a test whose subject is the driver around the runs (a folder it leaves, a signal,
    the runtime it chose), not what the variants measure."""
    import yaml

    recipe = yaml.safe_load((ROOT / "recipes" / f"{name}.yaml").read_text())
    recipe["variants"] = recipe.get("variants", ["p2p"])[:1]
    path = tmp_path / f"{name}-one-variant.yaml"
    path.write_text(yaml.safe_dump(recipe, sort_keys=False))
    return path


def edit_results(b: Path, change):
    """Change a bundle's results.json and reseal it (the manifest matches again, as a sender
    would)."""
    import json

    from kit.bundle import write_manifest

    data = json.loads((b / "results.json").read_text())
    change(data)
    (b / "results.json").write_text(json.dumps(data, indent=2))
    write_manifest(b)
    return b


def kill_once_a_container_runs(proc, client, filters: dict, start_s: float) -> None:
    """SIGKILL the driver `proc` two seconds after its first container (matching `filters`)
    runs (within `start_s`), then wait until the engine has removed every such container,
    stopped ones too, within 40 s. The lists are sparse: docker-py lists, then inspects each
    container, and one removed in between failed the test (Podman answers 500, 2026-11-29)."""
    deadline = time.monotonic() + start_s
    while not client.containers.list(filters=filters, sparse=True):
        assert proc.poll() is None, proc.communicate()[1][-2000:]
        assert time.monotonic() < deadline, "no container started"
        time.sleep(0.2)
    time.sleep(2)
    proc.kill()
    proc.communicate(timeout=30)
    gone_by = time.monotonic() + 40
    while client.containers.list(all=True, filters=filters, sparse=True):  # stopped ones too
        assert time.monotonic() < gone_by, "the container outlived its killed driver"
        time.sleep(1)


def docker_or_skip(timeout: int = 300):
    """A Docker SDK client of this machine's daemon, or the test skipped saying how to get one."""
    try:
        import docker

        client = docker.from_env(timeout=timeout)
        client.ping()
    except Exception as e:
        pytest.skip(
            f"needs a Docker daemon (none answers: {type(e).__name__}): as root, bash "
            "scripts/ci-docker.sh (Docker 26 from Debian trixie's .deb files)"
        )
    return client


def sigint_as_default() -> None:
    """Popen preexec_fn for a kit the test will Ctrl-C or hang up: a shell that started pytest in
    the background (`make test &`) leaves SIGINT ignored, `nohup make test` SIGHUP, and an
    ignored signal is inherited, so the child would never see it (the kit keeps an inherited
    SIGHUP ignored, as nohup asks). A terminal's Ctrl-C and hang-up reach a foreground kit so."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


def _kit_env(kw: dict) -> dict[str, str]:
    """The command's environment, the checkout first on its path whatever its working directory."""
    env = dict(kw.pop("env", None) or os.environ)
    # each entry once: a test's {**os.environ, "PYTHONPATH": ROOT} and the session's own path
    # then read alike, and are served by one zygote
    paths = [str(ROOT), *env.get("PYTHONPATH", "").split(os.pathsep)]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(p for p in paths if p))
    return env


def run_kit_fresh(
    *args: str, cwd: Path | None = None, timeout: float = 600, **kw
) -> subprocess.CompletedProcess:
    """`python -m kit ARGS` in an interpreter of its own: for what the interpreter's start-up
    decides (its variables, signals while it imports)."""
    env = _kit_env(kw)
    command = [sys.executable, "-m", "kit", *args]
    return subprocess.run(
        command, env=env, cwd=cwd or ROOT, capture_output=True, text=True, timeout=timeout, **kw
    )


_ZYGOTES: dict[frozenset[tuple[str, str]], Zygote] = {}
"""One zygote per set of start-up variables in use (the session's; a test's bare PATH-only one),
the most recently used last; at most ZYGOTES alive."""
ZYGOTES = 4
"""Zygotes alive at once per test worker. A new set of variables closes the least recently used
one: a single test's own variables (a folder of its own on PYTHONPATH) used to take a place for
the rest of the session, and every later new set then started a whole interpreter per command
(the hostile JSON cases, 6 commands each: 5.5-6.8 s a case in the suite against 0.5 s)."""
_REAL_TMP = tempfile.gettempdir()
_START_ENV = dict(os.environ)  # the session's, before any test changes it


def run_kit(
    *args: str, cwd: Path | None = None, timeout: float = 600, **kw
) -> subprocess.CompletedProcess:
    """`python -m kit ARGS` as a process of its own, forked from a process that has imported the
    kit already with the same start-up variables (tests/kit_zygote.py): the same argv,
    environment, working directory, streams and exit status, without paying for the imports
    again. `input=` is its stdin; any other subprocess option takes run_kit_fresh."""
    env = _kit_env(kw)
    stdin = kw.pop("input", None)
    key = frozenset(startup_env(env).items())
    if kw:
        return run_kit_fresh(*args, cwd=cwd, timeout=timeout, env=env, input=stdin, **kw)
    if key not in _ZYGOTES:
        if len(_ZYGOTES) >= ZYGOTES:
            _ZYGOTES.pop(next(iter(_ZYGOTES))).close()
        tmp = Path(tempfile.mkdtemp(prefix="kit-zygote-", dir=_REAL_TMP))
        base = {k: v for k, v in _START_ENV.items() if not startup_env({k: v})}
        _ZYGOTES[key] = Zygote(ROOT, tmp, {**base, **dict(key)})
    _ZYGOTES[key] = _ZYGOTES.pop(key)  # the most recently used last
    data = stdin.encode() if isinstance(stdin, str) else stdin
    return _ZYGOTES[key].run(list(args), env, cwd or ROOT, timeout, data)


@pytest.fixture(scope="session", autouse=True)
def _zygotes_closed():
    yield
    for zygote in _ZYGOTES.values():
        zygote.close()


def _weasyprint_missing() -> str | None:
    """Why WeasyPrint cannot make a PDF here, with the command that fixes it; None when it can."""
    try:
        import weasyprint  # noqa: F401
    except ImportError as exc:
        return f"needs WeasyPrint ({exc}): pip install weasyprint"
    except OSError as exc:  # the Python package is there, its system library is not
        why = str(exc).splitlines()[0][:80]
        return f"needs WeasyPrint's Pango ({why}): apt-get install libpango-1.0-0 libpangoft2-1.0-0"
    return None


_NO_PDF = _weasyprint_missing()
needs_pdf = pytest.mark.pdf
"""A test that reads a PDF the kit wrote (or times its making): the kit makes PDFs for it, and it
is skipped, saying why, where WeasyPrint cannot run. Every other test runs with KIT_PDF=0 (the
page alone: a second or more saved per report); the PDF itself is the marked tests' subject."""


@pytest.fixture
def kit_cmd():
    return run_kit


INHERITED = ("KIT_REFS_DB", "XDG_DATA_HOME", "XDG_CONFIG_HOME", "KIT_PDF")
"""What a test's commands never inherit from the session: the user's references, data and
config folders, a PDF choice (own_home_and_tmpdir and fixture_env both drop them)."""


@pytest.fixture(autouse=True)
def own_home_and_tmpdir(
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
):
    """Each test its own HOME (the references database, anything a command keeps there) and
    TMPDIR (the kit's launch and build folders, torchrun's), for itself and every process it
    starts: tests run in parallel (pytest-xdist), and a test that counts what is left in TMPDIR or
    reads the user's references must see only its own. KIT_PDF=0 unless the test carries
    needs_pdf: its commands write the HTML pages alone."""
    base = tmp_path_factory.mktemp("own")
    home, tmp = base / "home", base / "tmp"
    home.mkdir()
    tmp.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    for inherited in INHERITED:
        monkeypatch.delenv(inherited, raising=False)
    if request.node.get_closest_marker("pdf") is None:
        monkeypatch.setenv("KIT_PDF", "0")  # no PDF unless the test reads one (needs_pdf)
    return base


def fixture_env(factory: pytest.TempPathFactory, pdf: bool = False) -> dict[str, str]:
    """The environment for the commands of a module- or session-scoped fixture: pytest makes a
    wider fixture before the function-scoped own_home_and_tmpdir, so without this its commands
    shared the real HOME and TMPDIR and wrote a PDF no test read (10-15 s each, issue 46)."""
    base = factory.mktemp("fixture-own")
    env = {k: v for k, v in os.environ.items() if k not in INHERITED}
    for name in ("home", "tmp"):
        (base / name).mkdir()
    env.update(HOME=str(base / "home"), TMPDIR=str(base / "tmp"))
    if not pdf:
        env["KIT_PDF"] = "0"
    return env


CPU_ALLREDUCE_PARAMS = "max_bytes: 4096, factor: 4, iters: 3, warmup_iters: 1, trials: 2"
CPU_ALLREDUCE = allreduce_recipe(
    "cpu-smoke", CPU_ALLREDUCE_PARAMS, timeout_s=120, variants="p2p, no-p2p", repeats=2
)
"""The recipe of cpu_allreduce_bundle: two gloo ranks, P2P on and off, two repeats each."""


COLLECTIVE_KINDS = ("allreduce", "all_gather", "reduce_scatter", "alltoall")
CPU_COLLECTIVES = (
    "kit: 1\nname: cpu-collectives\ndescription: every collective sweep at smoke size\ngpus: 2\n"
    "repeats: 1\nvariants: [p2p]\nbenchmarks:\n"
    + "".join(
        f"  - kind: {kind}\n    params: {{min_bytes: 4, max_bytes: 4096, factor: 8, iters: 2, "
        "warmup_iters: 1, trials: 2}\n"
        for kind in COLLECTIVE_KINDS
    )
)
"""The recipe of cpu_collectives_bundle: each collective sweep once, two gloo ranks, P2P on."""


def _shared_bundle(factory: pytest.TempPathFactory, name: str, recipe: str) -> Path:
    """One real `kit reproduce --device cpu` of `recipe` for the whole test run: the first worker
    that asks makes it under a lock, in the folder the workers share, and every other test that
    reads it waits for it. Never edit it: `copy_bundle` it first."""
    base = factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    out = shared / name / "bundle"
    with open(shared / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not (out / "MANIFEST.sha256").is_file():
            if out.parent.exists():  # a worker that failed to make it: start again
                shutil.rmtree(out.parent)
            out.parent.mkdir()
            (out.parent / "recipe.yaml").write_text(recipe)
            proc = run_kit(
                "reproduce", str(out.parent / "recipe.yaml"), "--device", "cpu",
                "--out", str(out), env=fixture_env(factory),
            )  # fmt: skip
            assert proc.returncode == 0, proc.stderr[-3000:]
    return out


@pytest.fixture(scope="session")
def cpu_allreduce_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """CPU_ALLREDUCE's bundle (4 torchrun launches), shared by the run (_shared_bundle): four
    tests made one each, 12 launches in all (issue 46)."""
    return _shared_bundle(tmp_path_factory, "cpu-allreduce", CPU_ALLREDUCE)


@pytest.fixture(scope="session")
def cpu_collectives_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """CPU_COLLECTIVES's bundle (4 torchrun launches), shared by the run (_shared_bundle): the
    collective sweeps' worker tests read its runs, the report's placement test its page (they
    launched 6 of their own, issue 46)."""
    return _shared_bundle(tmp_path_factory, "cpu-collectives", CPU_COLLECTIVES)


def copy_bundle(bundle: Path, dest: Path) -> Path:
    """A copy of `bundle` at `dest` for a test to read, edit or rerun."""
    shutil.copytree(bundle, dest)
    return dest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The long tests first: pytest-xdist hands tests out in this order, so the minutes-long ones
    (real runs in containers, torchrun, rendering) start while the short ones fill the gaps,
    instead of one of them running alone at the end. Integration before hostile before unit,
    files with `slow` tests first within each; a file's tests stay together (its module-scoped
    fixtures are made once a worker)."""
    tier = {"integration": 0, "hostile": 1, "unit": 2}
    slow_files = {str(i.fspath) for i in items if i.get_closest_marker("slow")}
    # The cpu image is built under a lock by the first test to need it, minutes on a machine
    # whose Docker has not built it (CI's, every time): a second file needing it meanwhile had
    # its worker wait idle (ci64: the identity test 303 s, 101-140 s on a warm daemon). So the
    # first such file goes first, and the others after every other long file.
    image_files = list(
        dict.fromkeys(str(i.fspath) for i in items if i.get_closest_marker("cpu_image"))
    )

    def key(item: pytest.Item) -> tuple[int, int]:
        part, path = Path(str(item.fspath)).parent.name, str(item.fspath)
        if image_files and path == image_files[0]:
            group = 0
        elif path in image_files:
            group = 2
        else:
            group = 1 if path in slow_files else 3
        return (tier.get(part, 3), group)

    items.sort(key=key)  # stable: the files' own order within a group
    if _NO_PDF is not None:
        for item in items:
            if item.get_closest_marker("pdf") is not None:
                item.add_marker(pytest.mark.skip(reason=_NO_PDF))
