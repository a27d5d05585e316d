"""`kit reproduce BUNDLE`: rerun a bundle's resolved recipe here, in the environment it recorded.

The old bundle must match its manifest: a rerun of an edited recipe would not reproduce anything.
The new environment is checked against the recorded one before the first run where it can be
known beforehand (a probe of the host Python, or the docker runtime's rebuilt image), and again
from what the runs themselves recorded. Every difference is printed, one line each, and stored in
the new bundle's results.json (`environment_diff`); `--strict-env` makes one fatal before any run.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kit.bundle import MANIFEST, Bundle, sha256_file
from kit.envdiff import Difference, environment_diff
from kit.errors import InputError
from kit.intake import receive
from kit.model import BundleData, Environment
from kit.recipe import NAME_PATTERN, Recipe
from kit.run.engine import Options, run_recipe
from kit.run.results import console
from kit.runtime.docker.client import docker_client, gpu_support
from kit.runtime.docker.environments import load
from kit.runtime.docker.fingerprint import fingerprint, probe
from kit.runtime.docker.image import build, from_archive
from kit.worker.probe import driver_version

PROBE_TIMEOUT_S = 120


@dataclass
class RerunEnvironment:
    """Where a rerun runs: the runtime, extra Options fields, and the fingerprint if known now."""

    runtime: str
    fingerprint: dict[str, Any] | None = None  # environment.json-shaped, or None: known later
    options: dict[str, Any] = field(default_factory=dict)  # e.g. environment, base_image


def probe_host(python: str | None = None) -> dict[str, Any] | None:
    """The versions the host runtime's workers will report, read by a short Python subprocess.

    The same function the worker uses (kit.worker.common.versions), so the keys match what the
    runs record; the driver version comes from NVML here. None when the probe fails (then the
    check waits for the first run's own record).
    """
    code = (
        "import json, torch; from kit.worker.common import versions; print(json.dumps(versions()))"
    )
    root = str(Path(__file__).resolve().parents[2])
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p),
    }
    try:
        proc = subprocess.run(
            [python or sys.executable, "-c", code], capture_output=True, text=True,
            timeout=PROBE_TIMEOUT_S, env=env,
        )  # fmt: skip
        versions = json.loads(proc.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.TimeoutExpired, json.JSONDecodeError, IndexError):
        return None
    versions["driver"] = driver_version()
    return {"runtime": "host", "pinned": False, "container": versions}


def environment_for(
    old_env: Environment | None, runtime: str | None = None, image_archive: Path | None = None
) -> RerunEnvironment:
    """The environment to rerun a bundle in, given its recorded environment.json.

    `runtime` is the user's --runtime (None: the bundle's own). The host runtime runs in this
    machine's Python and probes it. The docker runtime rebuilds the image from the recorded
    Dockerfile, lock and base digest (or loads the exported archive `image_archive`) and
    returns its fingerprint (rerun_environment).
    """
    name = runtime or (old_env.runtime if old_env else None) or "host"
    if name == "host":
        return RerunEnvironment("host", probe_host())
    return rerun_environment(old_env, image_archive)


def base_image(env: Environment | None) -> str | None:
    """The base image the recorded environment was built FROM (its build argument, or field)."""
    if env is None:
        return None
    return (env.build_args or {}).get("BASE_IMAGE") or env.base_image


def rerun_environment(
    old_env: Environment | None, image_archive: Path | None = None
) -> RerunEnvironment:
    """The docker side of a rerun: the recorded environment, rebuilt (or loaded) and probed.

    Builds (or reuses) the environment the bundle names with the base image it recorded, or
    loads `image_archive` (a `kit export`) without building, and probes it, so that every
    difference from the recorded fingerprint (lock, Dockerfile, base digest, versions) is known
    before the first run.
    """
    name = (old_env.name if old_env else None) or "cuda13"
    base = base_image(old_env)
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


def print_differences(diffs: list[Difference], when: str) -> None:
    """The differences that matter in red; the informational ones (image ids) as notes."""
    for d in diffs:
        if not d.matters:
            console.print(
                f"kit: note: {d.line('bundle', 'here')} (same content; cannot change a number)"
            )
    diffs = [d for d in diffs if d.matters]
    if not diffs:
        console.print(f"kit: environment matches the bundle's ({when})", style="green")
        return
    for d in diffs:
        console.print(f"[bold red]ENVIRONMENT DIFFERS[/] {d.line('bundle', 'here')}")
    console.print(
        "[bold red]kit: results of this rerun differ in software, not only in hardware[/]"
    )


def source_record(path: Path, old: BundleData) -> dict[str, Any]:
    return {
        "bundle": str(path),
        "recipe": old.results.recipe,
        "created_at": old.results.created_at,
        "manifest_sha256": sha256_file(path / MANIFEST),
    }


def load_for_rerun(
    path: Path, allowed_signers: Path | None = None, allow_unsigned: bool = False
) -> BundleData:
    """The old bundle, checked (sealed, complete, signed when asked: kit.intake), then read once
    through the typed loader: its resolved recipe, results, environment and hardware."""
    return receive(path, "a rerun needs an untouched bundle", allowed_signers, allow_unsigned)


def refuse_out_inside(path: Path, out: Path | None) -> None:
    """A rerun never writes inside its source: the old bundle would no longer verify."""
    target = (out if out is not None else Path("reports")).resolve()
    source = Path(path).resolve()
    if target == source or source in target.parents:
        where = f"--out {out}" if out is not None else f"the default --out ({target})"
        raise InputError(f"{where}: is inside the bundle being rerun; a rerun never writes into it")


def check_recorded(path: Path, options: Options) -> None:
    """The device the rerun takes from results.json (or --device), checked before anything is
    created. Smoke (a boolean) and repeats (1 to MAX_REPEATS) are the typed model's checks."""
    if options.device not in ("auto", "cuda", "cpu"):
        raise InputError(
            f"{path}/results.json: device {options.device!r}: allowed: auto, cuda, cpu"
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
    base = base_image(env)
    if base and env.runtime == "docker":
        console.print(f"kit: the bundle's image was built FROM {base}", markup=False)


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


def rerun_bundle(
    path: Path,
    options: Options,
    strict_env: bool = False,
    allowed_signers: Path | None = None,
    allow_unsigned: bool = False,
) -> tuple[Bundle, int]:
    """Rerun `path` with its recorded device, smoke scale and repeats unless `options` override.

    `options.device`/`smoke`/`repeats`/`runtime` left as None mean "as recorded".
    """
    refuse_out_inside(path, options.out)
    old = load_for_rerun(path, allowed_signers, allow_unsigned)
    recipe, recorded = old.recipe, old.results
    old_env = old.environment.dump(as_written=True) if old.environment else {}
    old_hw = old.hardware.dump(as_written=True) if old.hardware else None
    if options.device is None:
        options.device = recorded.device
    if options.smoke is None:
        options.smoke = recorded.smoke
    if options.repeats is None:
        options.repeats = recorded.planned_repeats
    check_recorded(path, options)
    check_environment_record(path, old.environment)
    console.print(f"kit: rerunning {path} (recipe {recipe.name}, {recorded.created_at})")
    print_recipe_env(recipe)
    target = environment_for(old.environment, options.runtime, options.image_archive)
    options.runtime = target.runtime
    for key, value in target.options.items():
        setattr(options, key, value)
    if target.fingerprint is not None:
        diffs = environment_diff(old_env, target.fingerprint, old_hw, informational=True)
        print_differences(diffs, "before running")
        diffs = [d for d in diffs if d.matters]
        if diffs and strict_env:
            raise InputError(
                f"--strict-env: the environment differs from {path}: "
                + "; ".join(d.line("bundle", "here") for d in diffs)
            )
    elif strict_env:
        raise InputError(
            f"--strict-env: this machine's environment could not be probed before running "
            f"({target.runtime} runtime); rerun without --strict-env to compare after the runs"
        )
    else:
        console.print("kit: the environment could not be probed; it is checked after the runs")
    options.reproduces = source_record(path, old)
    # the engine knows nothing of reruns: this hook compares what the runs recorded
    return run_recipe(recipe, options, after_runs=lambda new: check_after_run(new, old_env, old_hw))


def check_after_run(
    bundle: Bundle, expected: dict[str, Any], expected_hardware: dict[str, Any] | None
) -> list[Difference]:
    """Compare what the runs recorded with the reproduced bundle; store it in results.json."""
    env = bundle.read_json("environment.json") or {}
    diffs = environment_diff(
        expected, env, expected_hardware, bundle.read_json("hardware.json"), informational=True
    )
    bundle.results["environment_diff"] = [d.to_dict() for d in diffs if d.matters]
    notes = [d.to_dict() for d in diffs if not d.matters]
    if notes:
        bundle.results["environment_notes"] = notes
    if env.get("container"):
        print_differences(diffs, "as the runs recorded it")
    return [d for d in diffs if d.matters]
