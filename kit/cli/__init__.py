"""The `kit` command. Thin: parse arguments, call the library, turn KitError into one line."""

from __future__ import annotations

from kit.cli import early  # noqa: F401  (first: a stop signal while importing is one line)

# isort: split
import signal
import sys
from pathlib import Path
from typing import Annotated

import typer

from kit import version_line
from kit.cli import bundle as bundle_commands
from kit.cli.compare import compare as compare_command
from kit.cli.errors import error_line, one_line, run
from kit.cli.k8s import k8s as k8s_command
from kit.cli.options import (
    AllowedSigners,
    AllowUnsigned,
    Apptainer,
    BundleOut,
    EnvName,
    ReadBrokenSignature,
    base_image_option,
    engine_option,
    repeats_option,
    smoke_option,
)
from kit.cli.refs import refs_app
from kit.cli.slurm import slurm as slurm_command
from kit.io.errors import InputError, KitError
from kit.io.terminal import install as install_safe_streams
from kit.io.terminal import settle
from kit.shared.engines import IMAGE_ENGINES
from kit.shared.stop import STOPS

app = typer.Typer(
    help="Reproducible GPU hardware benchmarks: pinned environments, standard workloads, "
    "honest reports.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
recipes_app = typer.Typer(help="List and validate recipes.", no_args_is_help=True)
app.add_typer(recipes_app, name="recipes")
app.add_typer(refs_app, name="refs")


def _version(value: bool) -> None:
    if value:
        print(version_line())
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version.")
    ] = False,
) -> None:
    pass


def _node_list(nodes: str | None) -> tuple[str, ...]:
    """--nodes A,B: every entry a daemon (an empty one, `A,` or `A,,B`, is a slip, not a node)."""
    if nodes is None:
        return ()
    entries = tuple(n.strip() for n in nodes.split(","))
    if not all(entries):
        raise InputError(
            f"--nodes {nodes[:200]!r}: an empty entry; name each node's daemon once, "
            "comma-separated"
        )
    return entries


# the runtimes whose image the kit builds, as the help of reproduce names them ("docker, podman")
BUILT = ", ".join(IMAGE_ENGINES)
# the options reproduce shares with other commands, in its words (kit.cli.options)
Smoke = smoke_option("Shrink every benchmark to CPU-smoke size (default: on CPU).")
Repeats = repeats_option("Override the recipe's repeats.")
DockerBaseImage = base_image_option(
    f"{BUILT} runtimes: base image instead of the Dockerfile's pinned one."
)


@app.command()
def reproduce(
    recipe: Annotated[
        Path, typer.Argument(help="A recipe YAML file, or a bundle directory to rerun.")
    ],
    device: Annotated[
        str | None,
        typer.Option(
            help="auto | cuda | cpu (auto: cuda when NVML sees a GPU; a bundle: its device)."
        ),
    ] = None,
    out: BundleOut = None,
    smoke: Smoke = None,
    repeats: Repeats = None,
    runtime: Annotated[
        str | None,
        typer.Option(
            help=f"host | {' | '.join(IMAGE_ENGINES)} | apptainer | auto ({BUILT}: "
            "one container per run from the pinned image; apptainer: apptainer exec of the "
            "--apptainer image; "
            "auto: apptainer when --apptainer is given, else docker when a daemon answers, "
            "host otherwise; a bundle: its runtime)."
        ),
    ] = None,
    apptainer: Apptainer = None,
    env: Annotated[
        str | None,
        typer.Option(
            "--env", help=f"{BUILT} runtimes: environment (docker/NAME) instead of the recipe's."
        ),
    ] = None,
    base_image: DockerBaseImage = None,
    image_archive: Annotated[
        Path | None,
        typer.Option(
            help=f"{BUILT} runtimes: load this `kit export` archive and run its image (no build)."
        ),
    ] = None,
    strict_env: Annotated[
        bool,
        typer.Option(
            "--strict-env", help="Rerunning a bundle: refuse (exit 2) if the environment differs."
        ),
    ] = False,
    nodes: Annotated[
        str | None,
        typer.Option(
            help="Multi-node: Docker daemon URLs of the nodes, comma-separated (the first hosts "
            "the rendezvous), e.g. unix:///var/run/docker.sock,ssh://node2; replaces the "
            "recipe's nodes.hosts."
        ),
    ] = None,
    allowed_signers: AllowedSigners = None,
    allow_unsigned: AllowUnsigned = False,
    read_broken_signature: ReadBrokenSignature = False,
    allow_path: Annotated[
        list[Path] | None,
        typer.Option(
            help="Rerunning a bundle: a local path its recipe names (model_path, data_path) that "
            "the runs may open; every such path must be named (repeatable)."
        ),
    ] = None,
    strict: Annotated[bool, typer.Option(help="Treat preflight warnings as fatal.")] = False,
    allow: Annotated[
        str | None, typer.Option(help="Preflight checks allowed to fail, comma-separated.")
    ] = None,
) -> None:
    """Run a recipe, or rerun a bundle, and write a bundle with results, logs and a report.

    A bundle directory is rerun with its resolved recipe and its recorded device, scale and
    repeats (options given here override them); the environment is compared with the recorded one.

    Example: kit reproduce recipes/allreduce.yaml --device cpu --smoke

    Example: kit reproduce reports/allreduce-20261121-120000 --strict-env

    Example: kit reproduce recipes/allreduce.yaml --nodes unix:///var/run/docker.sock,ssh://node2
    """
    from kit.recipe import load_recipe
    from kit.run.engine import Options, command_line, run_recipe

    options = Options(
        device=device or "auto",
        smoke=smoke,
        repeats=repeats,
        out=out,
        runtime=runtime or "auto",
        command=command_line(sys.argv[1:]),
        strict=strict,
        allow=tuple(a.strip() for a in (allow or "").split(",") if a.strip()),
        environment=env,
        base_image=base_image,
        image_archive=image_archive,
        apptainer=apptainer,
        nodes=_node_list(nodes),
    )
    if recipe.is_dir():
        from kit.bundle.intake import check_signer_options
        from kit.run.rerun import rerun_bundle

        check_signer_options(allowed_signers, allow_unsigned)
        bundle, code = rerun_bundle(
            recipe,
            options,
            strict_env,
            allowed_signers,
            allow_unsigned,
            tuple(allow_path or ()),
            read_broken_signature,
            device=device,
            runtime=runtime,
        )
    else:
        for flag, given in (
            ("--strict-env", strict_env),
            ("--allowed-signers", allowed_signers),
            ("--allow-unsigned", allow_unsigned),
            ("--read-broken-signature", read_broken_signature),
            ("--allow-path", allow_path),
        ):
            if given:
                raise InputError(f"{flag}: only for rerunning a bundle directory")
        bundle, code = run_recipe(load_recipe(recipe), options)
    print(bundle.path)
    raise typer.Exit(code)


def _environment_of(target: str, env: str | None) -> str:
    """An environment name from `--env`, a recipe file, or the argument itself; --env beside a
    target that already is an environment (or an image) is refused: the two would disagree."""
    path = Path(target)
    is_recipe = path.suffix in (".yaml", ".yml") or path.is_file()
    if env and not is_recipe:
        raise InputError(
            f"--env {env}: {target!r} is not a recipe; name an environment once "
            "(kit build ENV, or kit build RECIPE --env ENV)"
        )
    if env:
        return env
    if is_recipe:
        from kit.recipe import load_recipe

        return load_recipe(path).environment
    return target


BuildBaseImage = base_image_option("Base image instead of the Dockerfile's pinned one.")
BuildEngine = engine_option("builds it")


@app.command()
def build(
    target: Annotated[str, typer.Argument(help="A recipe YAML file, or an environment name.")],
    env: EnvName = None,
    base_image: BuildBaseImage = None,
    runtime: BuildEngine = "docker",
) -> None:
    """Build (or reuse) the pinned image of a recipe's environment; print its tag.

    The tag is a hash of the Dockerfile, the lock, the worker source and the build args:
    an unchanged environment is never rebuilt. Wheels are downloaded on the host first.

    Example: kit build recipes/allreduce.yaml
    """
    from kit.run import registry
    from kit.runtime.images import image as images

    environment = _environment_of(target, env)  # refused before the engine is asked
    client = registry.engine_client(runtime)
    image = images.build(environment, base_image_override=base_image, client=client)
    state = "reused (cache hit)" if image.cached else "built"
    print(f"{image.tag} {image.image_id} {state}", file=sys.stderr)
    print(image.tag)


ExportBaseImage = base_image_option("Base image the environment was built with.")
ExportEngine = engine_option("holds the image")


@app.command("export")
def export_image(
    target: Annotated[
        str, typer.Argument(help="A recipe YAML file, an environment name, or an image tag.")
    ],
    output: Annotated[Path, typer.Option("-o", "--output", help="The archive to write (.tar).")],
    env: EnvName = None,
    base_image: ExportBaseImage = None,
    runtime: ExportEngine = "docker",
) -> None:
    """Save an environment's image as a tar archive for a machine with no registry.

    On the other machine: `docker load -i FILE` (or `kit reproduce` with the same environment
    finds the loaded tag and does not rebuild).

    Example: kit export recipes/allreduce.yaml -o kit-cuda13.tar
    """
    from kit.io import outputs
    from kit.run import registry
    from kit.runtime.images import archive as archives
    from kit.runtime.images import environments, image

    outputs.check_file(output, "-o")  # before anything: a regular file in a folder that exists
    tag = target if ":" in target and not Path(target).exists() else None
    if tag is None:
        tag = image.image_tag(environments.load(_environment_of(target, env)), base_image)
    else:
        for flag, given in (("--env", env), ("--base-image", base_image)):
            if given is not None:
                raise InputError(f"{flag}: {target!r} is an image tag; it names its image itself")
    print(archives.export(tag, output, client=registry.engine_client(runtime)))


@app.command()
def inspect(
    json_out: Annotated[bool, typer.Option("--json", help="Print the inventory as JSON.")] = False,
    snapshot: Annotated[
        Path | None, typer.Option(help="Also save the raw NVML/OS answers (a test fixture).")
    ] = None,
    from_snapshot: Annotated[
        Path | None, typer.Option(help="Render a saved snapshot instead of this machine.")
    ] = None,
) -> None:
    """Show this machine: GPUs, topology matrix (nvidia-smi topo -m words), links, CPU, NUMA.

    Example: kit inspect --json > hardware.json
    """
    from kit.inventory.cli import inspect_command

    raise typer.Exit(inspect_command(json_out, snapshot, from_snapshot))


for _command in (
    bundle_commands.report,
    bundle_commands.verify,
    bundle_commands.sign,
    bundle_commands.seal,
    bundle_commands.accept,
):
    app.command()(_command)


app.command("slurm")(slurm_command)
app.command("compare")(compare_command)
app.command("k8s")(k8s_command)


@recipes_app.command("list")
def recipes_list(
    folder: Annotated[
        Path | None, typer.Argument(help="Folder of recipes (default: recipes/).")
    ] = None,
) -> None:
    """List recipes with their benchmarks and the hardware they were verified on.

    Example: kit recipes list
    """
    from kit.recipe import gpus, load_recipe, recipe_dir

    folder = folder or recipe_dir()
    if not folder.is_dir():
        raise InputError(f"{folder}: not a directory")
    for path in sorted(folder.glob("*.yaml")):
        try:
            r = load_recipe(path)
        except KitError as exc:
            print(f"{one_line(path.name):28s} INVALID: {one_line(exc)}")
            continue
        benches = ", ".join(b.label for b in r.benchmarks)
        verified = f"  [verified on {r.verified_on}]" if r.verified_on else ""
        print(f"{one_line(path.name):28s} {gpus.words(r)}  {one_line(benches)}{verified}")


@recipes_app.command("validate")
def recipes_validate(files: Annotated[list[Path], typer.Argument(help="Recipe files.")]) -> None:
    """Validate recipes; print one line per file, exit 2 if any is invalid.

    Example: kit recipes validate recipes/*.yaml
    """
    from kit.recipe import load_recipe
    from kit.report.kinds import check_workloads

    bad = 0
    for path in files:
        try:
            r = load_recipe(path)
            check_workloads((b.kind for b in r.benchmarks), f"{path}: ")
            nb, nv = len(r.benchmarks), len(r.resolved_variants())
            counts = f"{nb} benchmark{'s' * (nb != 1)}, {nv} variant{'s' * (nv != 1)}"
            print(f"{one_line(path)}: OK ({counts})")
        except KitError as exc:
            bad += 1
            print(error_line(exc), file=sys.stderr)
    if bad:
        raise typer.Exit(2)


def main() -> None:
    """Console entry point: every error is one line on stderr and an exit code (kit.cli.errors);
    nothing reaches the terminal with a control sequence from a bundle in it (kit.io.terminal)."""
    install_safe_streams()
    code = run(app)
    # the command has ended: a later stop signal changes nothing (Python's shutdown puts its
    # handlers back to the default, and a second SIGHUP there would end it by the signal)
    for sig in STOPS:
        signal.signal(sig, signal.SIG_IGN)
    settle()  # a terminal closed under it: the exit code stays the command's
    sys.exit(code)
