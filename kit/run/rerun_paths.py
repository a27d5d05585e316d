"""A foreign bundle names no local path that its rerun opens, and no host it dials, unless the
user names it again.

A workload's parameters may name local files (a Llama `model_path` with config.json and
weights, a `data_path` of token ids). In a recipe you wrote, that is your file. In a bundle from
someone else, it is the sender choosing what your workers open on your machine: `/etc`, a
pickle where token ids should be. So a rerun refuses every non-empty path parameter of the
bundle's recipe unless the user repeats it with `--allow-path PATH`. A path parameter is one
whose name ends in `_path`, `_dir` or `_file` (every workload names its paths that way).
A multi-node bundle's recipe names the Docker daemons of the sender's nodes; a rerun dials only
the nodes the user gives with --nodes.
"""

from __future__ import annotations

import os
from pathlib import Path

from kit.io.errors import InputError
from kit.recipe import Recipe

PATH_SUFFIXES = ("_path", "_dir", "_file")


def path_params(recipe: Recipe) -> list[tuple[str, str]]:
    """("benchmark.params.name", value) for every non-empty path parameter, full and smoke."""
    found = []
    for bench in recipe.benchmarks:
        for section in ("params", "smoke"):
            for name, value in (getattr(bench, section) or {}).items():
                if name.endswith(PATH_SUFFIXES) and value not in ("", None):
                    found.append((f"{bench.name}.{section}.{name}", str(value)))
    return found


def _same(a: str, b: Path) -> bool:
    return Path(os.path.abspath(a)) == Path(os.path.abspath(b))


def check_paths(source: Path, recipe: Recipe, allowed: tuple[Path, ...]) -> None:
    """Every path the bundle's recipe names was named again with --allow-path, or one line."""
    for where, value in path_params(recipe):
        if not any(_same(value, a) for a in allowed):
            raise InputError(
                f"{source}/recipe.yaml: {where} names the local path {value!r}; a rerun opens no "
                f"path a bundle names: repeat it with --allow-path {value} if it is yours to open"
            )
    unused = [a for a in allowed if not any(_same(v, a) for _, v in path_params(recipe))]
    if unused:
        raise InputError(
            f"--allow-path {unused[0]}: the bundle's recipe names no such path "
            f"(it names: {', '.join(v for _, v in path_params(recipe)) or 'none'})"
        )


def check_nodes(source: Path, recipe: Recipe, nodes: tuple[str, ...]) -> None:
    """A multi-node bundle is rerun on nodes the user names, never on the hosts it names."""
    if recipe.nodes is not None and not nodes:
        hosts = ", ".join(recipe.nodes.hosts)
        raise InputError(
            f"{source}/recipe.yaml: nodes.hosts names the sender's Docker daemons ({hosts}); a "
            "rerun dials only the nodes you name: add --nodes URL,URL (this site's daemons)"
        )
    if recipe.nodes is None and nodes:
        raise InputError(
            f"--nodes: {source} is a single-node bundle (its recipe names no nodes); a rerun "
            "runs it on this machine as it recorded"
        )
