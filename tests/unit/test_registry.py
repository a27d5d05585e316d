"""The runtimes' registry as a new placement meets it: `--runtime` names every choice in its
help, and a bundle's rerun runs on the placement it recorded (ARCHITECTURE.md, "Adding a
placement")."""

from __future__ import annotations

import typer.main

from kit.cli import app
from kit.model import Environment
from kit.run import registry
from kit.run.rerun import recorded_runtime
from kit.shared.engines import Engine


def test_reproduce_help_names_every_runtime_choice():
    """The help is written by hand (the CLI starts without importing the registry): a name added
    to CHOICES must be said there too, or `kit reproduce --help` hides it."""
    reproduce = typer.main.get_command(app).commands["reproduce"]  # type: ignore[attr-defined]
    help_text = next(p for p in reproduce.params if p.name == "runtime").help or ""
    first = help_text.split("(")[0]
    assert [c for c in registry.CHOICES if c not in first.replace("|", " ").split()] == []


class ToyRuntime:
    """A placement of its own (registered for the test only): its two axes are all the choice
    of a rerun's runtime reads."""

    placement = "toy"
    engine = Engine.NONE


def environment(**fields: object) -> Environment:
    return Environment.model_validate({"pinned": False, **fields})


def test_a_rerun_runs_on_the_placement_the_bundle_recorded(monkeypatch):
    monkeypatch.setitem(registry.RUNTIMES, "toy", ToyRuntime)
    monkeypatch.setattr(registry, "CHOICES", (*registry.CHOICES, "toy"))
    # the toy placement again, not this machine's runtime of the same engine (host)
    assert recorded_runtime(environment(runtime="toy", placement="toy", engine="none")) == "toy"
    # a bundle whose runtime name has other axes here: the runtime of its engine on this machine
    assert recorded_runtime(environment(runtime="toy", placement="local", engine="none")) == "host"
    # the kit's own runtimes, as before
    assert recorded_runtime(None) == "host"
    assert recorded_runtime(environment(runtime="host")) == "host"
    assert recorded_runtime(environment(runtime="docker", pinned=True)) == "docker"
    assert recorded_runtime(environment(runtime="podman", placement="local", engine="podman")) == (
        "podman"
    )
    multinode = environment(runtime="multinode", placement="multinode", engine="docker")
    assert recorded_runtime(multinode) == "docker"  # the named nodes make it multinode again
    pyxis = environment(runtime="slurm", placement="slurm", engine="pyxis")
    assert recorded_runtime(pyxis) == "slurm"  # no runtime here runs pyxis: the recorded name


def test_a_name_the_registry_does_not_know_is_never_chosen_for_a_rerun():
    """A bundle someone edited to name a runtime the kit lacks gets this machine's runtime of
    its engine, never a name passed on unchecked."""
    edited = environment(runtime="../../bin/sh", placement="local", engine="none")
    assert recorded_runtime(edited) == "host"
