"""`kit reproduce BUNDLE`: rerun a bundle's resolved recipe here, in the environment it recorded.

The old bundle must match its manifest: a rerun of an edited recipe would not reproduce anything.
The new environment is checked against the recorded one before the first run where it can be
known beforehand (a probe of the host Python, or the docker runtime's rebuilt image), and again
from what the runs themselves recorded. Every difference is printed, one line each, and stored in
the new bundle's results.json (`environment_diff`); `--strict-env` makes one fatal before any run.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Any

from rich.markup import escape

from kit.bundle import MANIFEST, Bundle, content_sha256, sha256_file
from kit.bundle.intake import receive
from kit.env.check import Check, check
from kit.env.content import Side, side
from kit.env.diff import Difference
from kit.io.errors import InputError
from kit.io.outputs import check_bundle_dir, refuse_inside_bundle
from kit.model import (
    BundleData,
    Environment,
    EnvironmentDifference,
    Hardware,
    Loaded,
    Software,
    validate,
)
from kit.model.results import K8sInfo
from kit.recipe import NAME_PATTERN, Recipe
from kit.run import registry
from kit.run.engine import Options, resolve_device, run_recipe
from kit.run.multinode.config import node_config
from kit.run.preflight import check_allowances
from kit.run.rerun_paths import check_nodes, check_paths
from kit.run.results import console
from kit.runtime.base import Runtime, RuntimeRequest, check_device
from kit.runtime.images import base_choice
from kit.runtime.images.image import worker_module_digest
from kit.shared import files
from kit.shared.engines import Engine


def base_image(env: Environment | None) -> str | None:
    """The base image the recorded environment was built FROM (its build argument, or field)."""
    if env is None:
        return None
    return (env.build_args or {}).get("BASE_IMAGE") or env.base_image


def recorded_runtime(env: Environment | None) -> str:
    """The runtime the bundle recorded, where --runtime can name it and it has the recorded
    placement and engine (a placement of its own runs there again, not on this machine's runtime
    of the same engine); else the runtime on this machine in the recorded engine (a multi-node
    Docker run: docker, which named nodes make multinode again); else the recorded name (a Slurm
    job in pyxis)."""
    if env is None:
        return "host"
    name = env.runtime
    choosable = name in registry.CHOICES and name in registry.RUNTIMES
    if choosable and registry.axes(name) == env.axes():
        return name
    return registry.local_runtime(env.axes()[1]) or name


def rerun_runtime(old_env: Environment | None, runtime: str | None, apptainer: Path | None) -> str:
    """The runtime a rerun uses: the user's --runtime, else apptainer when --apptainer names a
    SIF, else the bundle's own."""
    if runtime not in (None, "auto"):
        return runtime
    return "apptainer" if apptainer is not None else recorded_runtime(old_env)


def check_image_given(
    path: Path, name: str, old_env: Environment | None, apptainer: Path | None
) -> None:
    """A bundle that ran in a SIF reruns in one only when the user names it again (a SIF is a
    file of the user's, never one the bundle names)."""
    if name != "apptainer" or apptainer is not None:
        return
    if old_env is None or old_env.axes()[1] != Engine.APPTAINER:  # the user's --runtime apptainer
        raise InputError("--runtime apptainer: name the image: --apptainer IMAGE.sif")
    image = f" ({old_env.image[:200]!r})" if old_env.image else ""
    raise InputError(
        f"{path} ran in an Apptainer image{image}: name it again (--apptainer IMAGE.sif), "
        "or rerun in another runtime (--runtime host|docker|podman)"
    )


def rerun_request(
    old_env: Environment | None,
    runtime: str | None,
    device: str,
    recipe: Recipe,
    image_archive: Path | None = None,
    nodes: tuple[str, ...] = (),
    apptainer: Path | None = None,
) -> tuple[str, RuntimeRequest]:
    """The runtime a rerun uses (rerun_runtime) and what it is asked to prepare: the recorded
    environment (its base is choose_base's, never the bundle's; or the exported archive
    `image_archive`, loaded without building; or the SIF `apptainer` names)."""
    name = rerun_runtime(old_env, runtime, apptainer)
    request = RuntimeRequest(
        environment=(old_env.name if old_env else None) or recipe.environment,
        device=device,
        gpus=recipe.gpus,
        base_image=None,
        image_archive=image_archive,
        nodes=node_config(recipe.nodes, nodes),
        apptainer=apptainer,
    )
    if request.nodes is not None and name == "docker":
        name = "multinode"  # the nodes the user named (--nodes), never this host alone
    return name, request


MAX_UNLOADED_SHOWN = 20
"""Differences the runs did not load that a rerun prints; results.json keeps them all."""


def print_check(chk: Check, when: str) -> None:
    """Every difference, one line each: notes (cannot change a number), those present but not
    loaded, those that differ (in red); then the verdict's sentence (kit.env.check)."""
    lines = chk.lines("bundle", "here")
    for line in [ln for level, ln in lines if level == "note"]:
        console.print(f"kit: note: {line} (cannot change a number)", markup=False)
    unloaded = [ln for level, ln in lines if level == "unloaded"]
    for line in unloaded[:MAX_UNLOADED_SHOWN]:
        console.print(f"kit: present, not loaded: {line}", markup=False)
    if len(unloaded) > MAX_UNLOADED_SHOWN:
        more = len(unloaded) - MAX_UNLOADED_SHOWN
        console.print(f"kit: and {more} more not loaded (results.json: environment_check)")
    for line in [ln for level, ln in lines if level == "differs"]:
        console.print(f"[bold red]ENVIRONMENT DIFFERS[/] {escape(line)}")
    if chk.matches:
        said = f"kit: environment matches the bundle's ({when}): {chk.sentence()}"
        console.print(said, style="green", markup=False)
        return
    console.print(f"kit: {chk.sentence()}", style="bold red", markup=False)
    console.print(
        "[bold red]kit: results of this rerun differ in software, not only in hardware[/]"
    )


def old_side(old: BundleData) -> Side:
    """The bundle's environment, its image's inventory and what its runs loaded."""
    return side(old.environment, old.software, (rf.result for rf in old.runs.values()))


def source_record(path: Path, old: BundleData) -> dict[str, Any]:
    return {
        "bundle": str(path),
        "recipe": old.results.recipe,
        "created_at": old.results.created_at,
        "manifest_sha256": sha256_file(path / MANIFEST),
        "content_sha256": content_sha256(path),
        **({"broken_signature": old.broken_signature} if old.broken_signature else {}),
    }


def load_for_rerun(
    path: Path,
    allowed_signers: Path | None = None,
    allow_unsigned: bool = False,
    read_broken: bool = False,
) -> BundleData:
    """The old bundle, checked (sealed, complete, signed when asked: kit.bundle.intake), then read once
    through the typed loader: its resolved recipe, results, environment and hardware."""
    return receive(
        path, "a rerun needs an untouched bundle", allowed_signers, allow_unsigned, read_broken
    )


def refuse_out_inside(out: Path | None) -> None:
    """A rerun never writes inside its source (the old bundle would no longer verify) nor in
    any other bundle, and its --out is one the engine takes (kit.io.outputs' checks): before the
    old bundle is read and before any notice is printed, so a bad path is the only line."""
    where = "--out" if out is not None else "the default --out"
    refuse_inside_bundle(out if out is not None else Path("reports"), where)
    if out is not None:
        check_bundle_dir(out)


def refuse_environment_options(options: Options) -> None:
    """A rerun runs in the environment the bundle recorded (--env would be ignored); its base
    is the user's --base-image, an archive's image (--image-archive) or the kit's pinned digest
    (kit.runtime.images.base_choice), never one the bundle names."""
    if options.environment is not None:
        raise InputError(
            "--env: a rerun builds the environment the bundle recorded (--base-image IMAGE "
            "builds it FROM a base you name; --image-archive FILE runs a `kit export` of it)"
        )


def choose_base(
    path: Path, where: str, old: BundleData, options: Options
) -> tuple[str | None, str | None]:
    """The base image this rerun may build FROM and the line that says why (None, None for a
    runtime that builds no image), decided before anything is printed or prepared."""
    if not registry.builds_image(where):
        return None, None
    env_name = (old.environment.name if old.environment else None) or old.recipe.environment
    return base_choice.rerun_base(
        path, env_name, base_image(old.environment), options.base_image, options.image_archive
    )


def check_environment_record(path: Path, env: Environment | None) -> None:
    """environment.json names an environment of this kit (never a folder elsewhere) and says
    which base image it was built on; a docker rerun builds FROM that image: it is printed.
    The field types are the typed model's checks (kit.model.Environment)."""
    if env is None:
        return
    if env.name is not None and not re.fullmatch(NAME_PATTERN, env.name):
        raise InputError(
            f"{path}/environment.json: name {env.name!r}: an environment of this kit (docker/NAME)"
        )


def base_image_line(env: Environment) -> str:
    """What the bundle's environment record says it ran in: the base image its image was built
    FROM (any runtime that pins an image: docker, multinode), the image it was given (an
    Apptainer SIF), or that it ran on the host."""
    if env.axes()[1] == Engine.APPTAINER:
        image = repr(env.image[:200]) if env.image else "not recorded"
        return f"the bundle ran in an Apptainer image: {image}, {env.image_id or 'no sha256'}"
    base = base_image(env)
    if base:
        recorded = env.base_image_digest
        plain = recorded is None or re.fullmatch(r"sha256:[0-9a-f]{64}", recorded)
        digest = f" ({recorded if plain else repr(recorded[:80])})" if recorded else ""
        return (
            f"the bundle's image ({env.name or 'environment'}) was built FROM "
            f"{base_choice.shown(base)}{digest}"
        )
    if env.pinned:
        return "the bundle's environment record names no base image (pinned, built FROM unknown)"
    return f"the bundle ran on the {env.runtime} runtime: no image, nothing built FROM a base"


def print_recipe_env(recipe: Recipe) -> None:
    """Before rerunning a bundle from elsewhere, say what its recipe sets in every run's env."""
    sets = [(f"variant {v.name}", v.env) for v in recipe.resolved_variants() if v.env]
    if recipe.nodes is not None and recipe.nodes.env:
        sets.append(("nodes", recipe.nodes.env))
    if not sets:
        console.print("kit: the bundle's recipe sets no environment variables")
    for who, env in sets:
        pairs = " ".join(f"{k}={v}" for k, v in env.items())
        console.print(f"kit: the bundle's recipe sets ({who}): {pairs}", markup=False)
    for v in recipe.resolved_variants():
        if v.gpu_ids:
            console.print(f"kit: variant {v.name} runs on GPUs {v.gpu_ids}", markup=False)


def _rerun_on_k8s(
    path: Path,
    old: BundleData,
    k8s_record: K8sInfo,
    options: Options,
    asked: str,
    runtime: str | None,
    strict: bool,
) -> tuple[Bundle, int]:
    """A bundle `kit k8s` made reruns on Kubernetes with its recorded options: the user's
    device, smoke scale, repeats and output folder, nothing that picks another runtime."""
    recipe, recorded = old.recipe, old.results
    if runtime is not None or strict or options.apptainer is not None:
        flag = "--strict-env" if strict else f"--runtime {runtime}" if runtime else "--apptainer"
        raise InputError(f"{flag}: {path} was made by `kit k8s` and reruns on Kubernetes")
    console.print(f"kit: rerunning {path} on Kubernetes (recipe {recipe.name})", markup=False)
    batch = registry.batch("k8s")
    smoke = options.smoke if options.smoke is not None else recorded.smoke
    repeats = options.repeats or recorded.planned_repeats
    k8s = batch(batch.options_of(k8s_record, asked, smoke, repeats, options.out, options.command))
    done = k8s.submit(recipe, reproduces=source_record(path, old))
    return Bundle.load(Path(done)), k8s.code


def _check_image_options(where: str, options: Options, runtime: str | None) -> None:
    """--image-archive and --base-image only where the rerun's runtime builds the kit's image
    (a name no runtime here has, a Slurm bundle's recorded one, is refused where it is
    prepared), and an image file only where the runtime takes one."""
    builds = where not in registry.RUNTIMES or registry.builds_image(where)
    for flag, given in (
        ("--image-archive", options.image_archive),
        ("--base-image", options.base_image),
    ):
        if not builds and given is not None:
            raise InputError(
                f"{flag}: needs the docker runtime; this rerun uses the {where} runtime "
                f"({f'--runtime {runtime}' if runtime else 'as the bundle recorded'})"
            )
    registry.check_image_file(where, options.apptainer)


def _check_before_running(
    path: Path,
    prepared: Runtime,
    name: str,
    bundle_side: Side,
    old_hw: Hardware | None,
    options: Options,
    strict: bool,
) -> None:
    """The prepared runtime's environment against the bundle's, before the first run: printed,
    and with --strict-env a difference refuses the rerun. Where the runtime cannot say its
    environment beforehand, it is compared after the runs (--strict-env then refuses)."""
    known = prepared.known_environment()
    if known is None and strict:
        raise InputError(
            f"--strict-env: this machine's environment could not be probed before running "
            f"({name} runtime); rerun without --strict-env to compare after the runs"
        )
    if known is None:
        console.print("kit: the environment could not be probed; it is checked after the runs")
        return
    here = validate(Environment, known, Path(f"the {name} runtime's environment"))
    software = getattr(prepared, "software", None)
    mine = side(here, validate(Software, software, "software.json") if software else None, ())
    if registry.builds_image(name) and options.image_archive is None:  # this kit's worker files
        mine = replace(mine, loaded=(Loaded(modules={"kit": worker_module_digest()}),))
    chk = check(bundle_side, mine, old_hw)
    print_check(chk, "before running")
    if not chk.matches and strict:
        lines = [ln for level, ln in chk.lines("bundle", "here") if level == "differs"]
        raise InputError(f"--strict-env: the environment differs from {path}: " + "; ".join(lines))


def rerun_bundle(
    path: Path,
    options: Options,
    strict_env: bool = False,
    allowed_signers: Path | None = None,
    allow_unsigned: bool = False,
    allowed_paths: tuple[Path, ...] = (),
    read_broken: bool = False,
    device: str | None = None,
    runtime: str | None = None,
) -> tuple[Bundle, int]:
    """Rerun `path` with its recorded device, smoke scale and repeats unless the user's override.

    `device`, `runtime` (the user's --device, --runtime) and `options.smoke`/`repeats` left as
    None mean "as recorded"; options' own device and runtime are not read. `options` is left as
    given: the engine gets a new Options with what this rerun decided. A local path the bundle's
    recipe names is opened only when it is in `allowed_paths` (--allow-path).
    """
    refuse_out_inside(options.out)
    refuse_environment_options(options)
    old = load_for_rerun(path, allowed_signers, allow_unsigned, read_broken)
    recipe, recorded = old.recipe, old.results
    check_paths(path, recipe, allowed_paths)
    check_nodes(path, recipe, options.nodes)
    old_hw = old.hardware
    asked = device if device is not None else recorded.device
    # the recorded device is checked before anything is created; smoke (a boolean) and repeats
    # (1 to MAX_REPEATS) are the typed model's checks
    check_device(asked, "--device" if device is not None else f"{path}/results.json: device")
    if asked == "cpu":  # before any notice (the engine checks it again with the device it runs)
        check_allowances(options.allow, asked, bool(options.nodes))
    if recorded.k8s is not None:  # made by `kit k8s`: it reruns there, with the recorded options
        return _rerun_on_k8s(path, old, recorded.k8s, options, asked, runtime, strict_env)
    where = rerun_runtime(old.environment, runtime, options.apptainer)
    _check_image_options(where, options, runtime)
    check_image_given(path, where, old.environment, options.apptainer)
    check_environment_record(path, old.environment)
    base, why = choose_base(path, where, old, options)
    # every check that can refuse comes before the first notice, so a refusal is the only line
    resolved = resolve_device(asked)  # once: the runtime and the engine both take this one
    name, request = rerun_request(
        old.environment,
        runtime,
        resolved,
        recipe,
        options.image_archive,
        options.nodes,
        options.apptainer,
    )
    registry.check_ready(name, request)
    if old.environment is not None:
        console.print(f"kit: {base_image_line(old.environment)}", markup=False)
    console.print(f"kit: rerunning {path} (recipe {recipe.name}, {recorded.created_at})")
    print_recipe_env(recipe)
    if why is not None:
        console.print(f"kit: {why}", markup=False)
        request = replace(request, base_image=base)
    prepared = registry.prepare(name, request)  # docker: the recorded environment, built or loaded
    bundle_side = old_side(old)
    _check_before_running(path, prepared, name, bundle_side, old_hw, options, strict_env)
    run_options = replace(
        options,
        device=resolved,
        smoke=options.smoke if options.smoke is not None else recorded.smoke,
        repeats=options.repeats or recorded.planned_repeats,
        runtime=name,
        environment=request.environment,
        base_image=request.base_image,
        reproduces=source_record(path, old),
    )
    # the engine knows nothing of reruns: this hook compares what the runs recorded
    return run_recipe(
        recipe,
        run_options,
        after_runs=lambda new: check_after_run(new, bundle_side, old_hw),
        runtime=prepared,
        device=resolved,
    )


def check_after_run(
    bundle: Bundle, expected: Side, expected_hardware: Hardware | None
) -> list[Difference]:
    """Compare what the runs recorded with the reproduced bundle (kit.env.check); store it in
    results.json: the versions that differ, the notes, and the verdict with every difference
    inside the environments, loaded by the runs or not."""
    env: Environment | None = bundle.read_typed(files.ENVIRONMENT)  # type: ignore[assignment]
    hardware: Hardware | None = bundle.read_typed(files.HARDWARE)  # type: ignore[assignment]
    software: Software | None = bundle.read_typed(files.SOFTWARE)  # type: ignore[assignment]
    chk = check(expected, side(env, software, bundle.results.runs), expected_hardware, hardware)
    bundle.results.environment_diff = [
        EnvironmentDifference.model_validate(d.to_dict()) for d in chk.versions
    ]
    if chk.notes:
        bundle.results.environment_notes = [
            EnvironmentDifference.model_validate(d.to_dict()) for d in chk.notes
        ]
    bundle.results.environment_check = chk.record()
    if env is not None and env.container is not None and env.container.model_fields_set:
        print_check(chk, "as the runs recorded it")
    return chk.versions
