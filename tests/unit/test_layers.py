"""The architecture, enforced: read every module of kit/ with `ast` and check its imports.

The rules are the table below (ARCHITECTURE.md explains them). A failure names each offending
import as `file:line: importer -> imported`. Imports are read from the real source: module level
and inside functions, `import x` and `from x import y`, relative ones resolved.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import sys
from collections.abc import Callable
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

import pytest

from kit.run import registry
from kit.runtime.images.image import WORKER_FILES
from tests.conftest import ROOT

KIT = ROOT / "kit"

# The worker half: what runs inside the container, where the driver's packages are absent.
# kit.shared holds what both halves read; it imports only the standard library (SHARED_RULE).
WORKER_SIDE = (
    "kit",  # the package's own __init__: kept import-light for this reason
    "kit.worker",
    "kit.worker.*",
    "kit.workloads",  # every workload's params, worker and spec: standard library and torch
    "kit.workloads.*",
    "kit.shared",  # facts both halves read (the metric catalog): standard library only
    "kit.shared.*",
)
# Third-party packages the worker side may import (besides the standard library).
WORKER_THIRD_PARTY = {
    "torch", "torchvision", "transformers", "peft", "accelerate", "pynvml", "numpy",
    "triton",  # torch's own dependency where it has CUDA (the decode kernels; guarded elsewhere)
}  # fmt: skip


def placement_homes() -> tuple[str, ...]:
    """Where each run goes and who waits for it (kit.run's placements: several Docker daemons,
    a Slurm allocation, a Kubernetes namespace, and any placement registered later): the
    package under kit.run (or the module) of every registered runtime whose placement is not
    this machine, read from the registry, so that a new placement is under the rules below
    the moment it is registered."""
    homes = []
    for cls in (*registry.RUNTIMES.values(), *registry.BATCH_RUNTIMES.values()):
        if cls.placement != "local":
            home = ".".join(cls.__module__.split(".")[:3])
            homes += [home, f"{home}.*"]
    return tuple(dict.fromkeys(homes))


# They launch through kit.runtime; the engine reaches them through kit.run.registry only.
PLACEMENTS = placement_homes()
# (modules the rule covers, kit modules they must not reach, directly or through others, why)
FORBIDDEN: list[tuple[tuple[str, ...], tuple[str, ...], str]] = [
    (("kit.report", "kit.report.*"), ("kit.runtime", "kit.runtime.*", "kit.run", "kit.run.*",
                                      "kit.cli", "kit.cli.*"),
     "the report reads bundles; it never runs anything"),
    (("kit.bundle", "kit.bundle.*", "kit.model", "kit.model.*"), ("kit.cli", "kit.cli.*", "kit.runtime", "kit.runtime.*",
                                                  "kit.run", "kit.run.*", "kit.report", "kit.report.*"),
     "the bundle model is read by everyone; it depends on no command, runtime, engine or report"),
    (("kit.inventory", "kit.inventory.*"), ("kit.cli", "kit.cli.*", "kit.run", "kit.run.*",
                                            "kit.runtime", "kit.runtime.*", "kit.report", "kit.report.*"),
     "the inventory measures a machine; the engine, runtimes and report read it, never the reverse"),
    (("kit.runtime", "kit.runtime.*"), ("kit.run", "kit.run.*", "kit.cli", "kit.cli.*"),
     "runtimes are plug-ins the engine chooses; they launch a process in an engine and never call "
     "the engine, a placement, rerun, the preflight or the CLI"),
    (PLACEMENTS, ("kit.run.engine", "kit.run.rerun", "kit.run.preflight", "kit.run.registry",
                  "kit.cli", "kit.cli.*"),
     "a placement submits, waits and collects; it never calls the engine, rerun, the preflight, "
     "the registry or the CLI (a batch placement writes its plan, reads its results and seals its "
     "bundle through run.plan, run.results and run.seal)"),
    (("kit.run.engine",), ("kit.run.rerun", "kit.cli", "kit.cli.*"),
     "rerun wraps the engine (a hook); the engine never imports rerun"),
    (("kit.runtime", "kit.runtime.*"), ("kit.report", "kit.report.*"),
     "a runtime launches a process in an engine; it never reads or renders a report"),
]  # fmt: skip
# The engines' SDKs: imported (at the top or inside a function) only where an engine is driven.
# The bundle model, the report, the inventory and every other room never import them.
ENGINE_SDKS = ("docker", "podman", "kubernetes")
SDK_HOMES = ("kit.runtime.*", "kit.run.k8s.*", "kit.run.multinode.*")
# matplotlib's compiled parts are pybind11 modules that a raising stop handler breaks while they
# initialize (an abort at exit): kit.report.mpl imports them with stop signals held, and every
# other module takes matplotlib's names from there.
HELD_IMPORTS = {"matplotlib": ("kit.report.mpl",)}
# Every top-level module and package of kit/: a new one is a new room of the house, which this
# table (and ARCHITECTURE.md) must name before the rules above can place it.
TOP_LEVEL = (
    "kit", "kit.__main__", "kit.bundle", "kit.cli", "kit.env",
    "kit.inventory", "kit.io", "kit.model", "kit.recipe", "kit.refs", "kit.report",
    "kit.run", "kit.runtime", "kit.shared", "kit.stats", "kit.worker", "kit.workloads",
)  # fmt: skip
# Gateways: (modules covered, a family of targets, the only members reached other than through
# them, why). Direct or through any chain of other modules; what lies behind a gateway is its own.
GATEWAYS = [
    # kit.runtime.heartbeat: the heartbeat file's name, which `kit seal` reads (standard library)
    (("kit.run.engine",), ("kit.runtime.*", *PLACEMENTS),
     ("kit.runtime", "kit.run.registry", "kit.runtime.base", "kit.runtime.heartbeat"),
     "the engine reaches runtimes through the registry and the protocol, never one runtime"),
]  # fmt: skip
# What the driver may not load: the worker package runs inside the container; what both sides
# need lives in kit.shared. The runtimes launch the worker and probe with it (excepted).
DRIVER_NEVER = ("kit.worker", "kit.worker.*")
DRIVER_MAY_LAUNCH = ("kit.runtime", "kit.runtime.*")
# Modules that may import kit modules inside functions: the CLI imports each command's
# modules when the command runs, so that `kit --help` starts in a fraction of a second.
LAZY_IMPORTS_ALLOWED = ("kit.__main__", "kit.cli", "kit.cli.*")  # __main__: --version first
# importlib with a name computed at run time: what each such call may load (anything else is a
# dynamic import the rules cannot see, and fails).
# None: the call loads no kit module.
DYNAMIC_IMPORTS: dict[str, str | None] = {
    "kit.worker.__main__": "kit.workloads.*.worker",  # the workload the spec names
    "kit.workloads.registry": "kit.workloads.*.spec",  # a kind's spec, the first time it is asked
    "kit.cli.errors": None,  # click's exception classes, wherever typer keeps them
}


@dataclass(frozen=True)
class Import:
    importer: str
    imported: str  # the module the statement loads (a kit module, or a top-level package)
    path: Path
    line: int
    in_function: bool
    dynamic: bool = False  # through importlib

    def where(self) -> str:
        shown = self.path.relative_to(ROOT) if self.path.is_relative_to(ROOT) else self.path
        return f"{shown}:{self.line}: {self.importer} -> {self.imported}"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def kit_modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(KIT.rglob("*.py"))}


def matches(module: str, patterns: tuple[str, ...]) -> bool:
    return any(fnmatchcase(module, p) for p in patterns)


# Calls that load a module by its name: importlib.import_module, __import__ (builtins' or
# importlib's), runpy.run_module; under any name they are imported as (IMPORTERS' aliases).
LOADERS = {"import_module", "__import__", "run_module"}
# Calls that run a file by its path: what they load cannot be read, so they count as "?".
PATH_RUNNERS = {"run_path", "spec_from_file_location", "SourceFileLoader"}


def _loader_aliases(tree: ast.AST) -> dict[str, str]:
    """Names bound to a loader in this module: `from importlib import import_module as load`
    makes `load(...)` an import_module call."""
    found = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in (
            "importlib", "runpy", "builtins", "importlib.util", "importlib.machinery",
        ):  # fmt: skip
            for alias in node.names:
                if alias.name in LOADERS | PATH_RUNNERS:
                    found[alias.asname or alias.name] = alias.name
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Attribute | ast.Name):
            value = node.value
            name = value.attr if isinstance(value, ast.Attribute) else value.id
            if name in LOADERS | PATH_RUNNERS:  # load = importlib.import_module
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        found[target.id] = name
    return found


def _dynamic_target(call: ast.Call, aliases: dict[str, str] | None = None) -> str | None:
    """The module name (a glob where parts are computed) a call loads (importlib.import_module,
    __import__, runpy.run_module, under any alias): "kit.run.engine", "kit.workloads.*.spec",
    "?" when not readable (a computed name, a file run by its path); None when the call is no
    import."""
    f = call.func
    name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
    name = (aliases or {}).get(name, name)
    if name in PATH_RUNNERS:
        return "?"
    if name not in LOADERS or not (call.args or call.keywords):
        return None
    arg = call.args[0] if call.args else call.keywords[0].value
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value
    if isinstance(arg, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "*" for v in arg.values)
    return "?"


@functools.cache
def _statements(name: str, text: str) -> tuple[tuple[str, int, bool, Any], ...]:
    """One module's import statements as read from its text, before any is resolved against a
    module map: parsed once a session (each planted case reads the whole tree again over a map
    that differs only in its planted modules; the walk was 3 s a case, issue 46)."""
    tree = ast.parse(text)
    aliases = _loader_aliases(tree)
    found: list[tuple[str, int, bool, Any]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            nested = in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
            target = _dynamic_target(child, aliases) if isinstance(child, ast.Call) else None
            if target == "?":
                target = DYNAMIC_IMPORTS.get(name, "?")
            if target is not None and (is_kit(target) or target == "?"):
                found.append(("dynamic", child.lineno, in_function, target))
            if isinstance(child, ast.Import):
                names = tuple(alias.name for alias in child.names)
                found.append(("import", child.lineno, in_function, names))
            elif isinstance(child, ast.ImportFrom):
                names = tuple(alias.name for alias in child.names)
                found.append(
                    ("from", child.lineno, in_function, (child.module, child.level, names))
                )
            visit(child, nested)

    visit(tree, False)
    return tuple(found)


def _imports(name: str, path: Path, modules: dict[str, Path]) -> list[Import]:
    """Every import statement of one module, each resolved to the module it loads; importlib
    calls too (a computed name counts as every module it can match)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[Import] = []
    for kind, line, in_function, what in _statements(name, path.read_text()):
        if kind == "dynamic":
            hits = [m for m in modules if fnmatchcase(m, what)] if "*" in what else []
            for t in hits or [what]:
                found.append(Import(name, t, path, line, in_function, dynamic=True))
        elif kind == "import":
            found.extend(Import(name, alias, path, line, in_function) for alias in what)
        else:
            module, level, names = what
            base = module or ""
            if level:
                anchor = package.split(".")[: len(package.split(".")) - level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in names:
                target = f"{base}.{alias}"
                target = target if target in modules else base
                found.append(Import(name, target, path, line, in_function))
    return found


def all_imports(modules: dict[str, Path] | None = None) -> list[Import]:
    modules = modules if modules is not None else kit_modules()
    return [i for name, path in modules.items() for i in _imports(name, path, modules)]


def is_kit(module: str) -> bool:
    return module == "kit" or module.startswith("kit.")


def graph(
    imports: list[Import], functions: bool = False, packages: bool = False
) -> dict[str, list[Import]]:
    """Module-level kit -> kit edges (what runs when the module is imported); with `functions`,
    the imports inside functions too (what the module can load at all). With `packages`, an
    edge to each package `kit.a` above an imported `kit.a.b` as well, when the importer is
    outside it: its __init__ runs first (what makes a circle of an import through it)."""
    edges: dict[str, list[Import]] = {}
    for i in imports:
        if is_kit(i.imported) and (functions or not i.in_function) and i.imported != i.importer:
            edges.setdefault(i.importer, []).append(i)
            for package in _packages(i.imported) if packages else []:
                if package != i.importer and not i.importer.startswith(package + "."):
                    edges[i.importer].append(dataclasses.replace(i, imported=package))
    return edges


def _packages(module: str) -> list[str]:
    """The kit packages above a module, whose __init__ runs before it: kit.a.b -> [kit.a]
    (`kit` itself is left out: every kit module is inside it)."""
    parts = module.split(".")
    return [".".join(parts[:n]) for n in range(2, len(parts))]


def reach(
    start: str, edges: dict[str, list[Import]], stop: Callable[[str], bool] | None = None
) -> dict[str, list[Import]]:
    """Every kit module `start` loads, directly or not, with the chain of imports to it; what
    lies behind a module `stop` accepts is not followed (a gateway's own imports)."""
    paths: dict[str, list[Import]] = {start: []}
    todo = [start]
    while todo:
        here = todo.pop(0)
        if here != start and stop is not None and stop(here):
            continue
        for edge in edges.get(here, []):
            if edge.imported not in paths:
                paths[edge.imported] = [*paths[here], edge]
                todo.append(edge.imported)
    return paths


def cycles(edges: dict[str, list[Import]]) -> list[list[Import]]:
    """One import chain for each circle (strongly connected set of modules), Tarjan's way."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10000))

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for e in edges.get(v, []):
            w = e.imported
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.add(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(group)

    for v in sorted(edges):
        if v not in index:
            strong(v)
    chains = []
    for group in found:
        first = min(group)
        inner = {k: [e for e in v if e.imported in group] for k, v in edges.items() if k in group}
        back = next(e for k in sorted(group) for e in inner.get(k, []) if e.imported == first)
        chains.append([*reach(first, inner)[back.importer], back])
    return chains


def worker_side(imports: list[Import]) -> set[str]:
    worker = {i.importer for i in imports if matches(i.importer, WORKER_SIDE)}
    # importing kit.workloads.x.worker runs kit/workloads/__init__.py and kit/workloads/x/
    # __init__.py first: those packages are on the worker side too
    return worker | {
        ".".join(m.split(".")[:n]) for m in worker for n in range(1, len(m.split(".")))
    }


def worker_violations(imports: list[Import]) -> list[str]:
    worker = worker_side(imports)
    bad = []
    for i in imports:
        if i.importer not in worker:
            continue
        top = i.imported.split(".")[0]
        shared = matches(i.importer, ("kit.shared", "kit.shared.*"))
        if is_kit(i.imported):
            if shared and not matches(i.imported, ("kit.shared", "kit.shared.*")):
                bad.append(i.where() + " (kit.shared imports only kit.shared)")
            elif i.imported not in worker and not matches(i.imported, WORKER_SIDE):
                bad.append(i.where() + " (a driver module)")
        elif shared and top not in sys.stdlib_module_names:
            bad.append(i.where() + f" ({top}: kit.shared is standard library only)")
        elif top not in sys.stdlib_module_names and top not in WORKER_THIRD_PARTY:
            bad.append(i.where() + f" ({top}: not a worker dependency)")
    return bad


def _chain_words(chain: list[Import], why: str) -> str:
    via = " -> ".join(e.imported for e in chain[1:])
    return f"{chain[0].where()}{' -> ' + via if via else ''} ({why})"


def layer_violations(imports: list[Import], modules: dict[str, Path]) -> list[str]:
    """FORBIDDEN (reach), GATEWAYS and DRIVER_NEVER, as one list of lines;
    imports inside functions count (a lazy import loads the module all the same)."""
    edges = graph(imports, functions=True)
    worker = worker_side(imports)
    bad = []
    for covered, forbidden, why in FORBIDDEN:
        for module in sorted(modules):
            if not matches(module, covered):
                continue
            for target, chain in reach(module, edges).items():
                if chain and matches(target, forbidden):
                    bad.append(_chain_words(chain, why))
                    break
    for covered, family, gateways, why in GATEWAYS:
        for module in sorted(modules):
            if not matches(module, covered):
                continue
            behind = reach(module, edges, stop=lambda m, g=gateways: matches(m, g))
            for target, chain in behind.items():
                if chain and matches(target, family) and not matches(target, gateways):
                    bad.append(_chain_words(chain, why))
                    break
    for module in sorted(modules):
        if module in worker or matches(module, WORKER_SIDE + DRIVER_MAY_LAUNCH):
            continue
        for target, chain in reach(module, edges).items():
            if any(matches(e.imported, DRIVER_MAY_LAUNCH) for e in chain):
                continue  # a runtime launches or probes with the worker
            if chain and matches(target, DRIVER_NEVER):
                bad.append(
                    _chain_words(
                        chain,
                        "the driver never loads the worker package; "
                        "what both sides need is in kit.shared",
                    )
                )
                break
    return bad + sdk_violations(imports) + held_violations(imports) + top_level_violations(modules)


def sdk_violations(imports: list[Import]) -> list[str]:
    """An engine's SDK imported outside SDK_HOMES, at the top of a module or inside a function
    (a lazy import drives the engine all the same)."""
    return [
        i.where() + f" ({i.imported.split('.')[0]}: an engine's SDK is imported only by the "
        "runtimes; the bundle model, report and inventory never drive an engine)"
        for i in imports
        if i.imported.split(".")[0] in ENGINE_SDKS and not matches(i.importer, SDK_HOMES)
    ]


def held_violations(imports: list[Import]) -> list[str]:
    """A package of HELD_IMPORTS imported outside its one home: that import could be the first,
    and unheld."""
    return [
        i.where() + f" ({top}: imported with stop signals held in {', '.join(homes)} only)"
        for i in imports
        for top, homes in HELD_IMPORTS.items()
        if i.imported.split(".")[0] == top and not matches(i.importer, homes)
    ]


def top_level_violations(modules: dict[str, Path]) -> list[str]:
    """A top-level module or package of kit/ that TOP_LEVEL does not name: a room no rule knows."""
    bad = []
    for name in sorted(modules):
        top = ".".join(name.split(".")[:2])
        if top not in TOP_LEVEL:
            shown = modules[name].relative_to(ROOT) if modules[name].is_relative_to(ROOT) else name
            bad.append(f"{shown}:1: {name} -> {top} (a top-level module of kit/ that the layer "
                       "table's TOP_LEVEL does not name: place it in a room, or name it)")  # fmt: skip
    return bad


def circle_violations(imports: list[Import]) -> list[str]:
    """Each import circle as one line; imports inside functions count (a lazy import closes a
    circle as soon as its function runs)."""
    found = cycles(graph(imports, functions=True, packages=True))
    return [_chain_words(chain, "an import circle") for chain in found]


def test_worker_side_imports_nothing_from_the_driver():
    bad = worker_violations(all_imports())
    assert not bad, "the worker must not import the driver:\n" + "\n".join(bad)


def test_the_image_carries_every_worker_module():
    """What the worker imports is copied into the benchmark image (kit.shared included)."""
    modules = kit_modules()
    missing = [
        name
        for name in sorted(worker_side(all_imports(modules)))
        if name in modules
        and not any(modules[name].relative_to(ROOT).as_posix().startswith(f) for f in WORKER_FILES)
    ]
    assert not missing, f"worker modules the image lacks: {missing}"


def test_every_placement_lives_in_kit_run_and_is_under_the_rules():
    """Submit, wait and collect are orchestration: every placement but this machine's is a
    module of kit.run (never of kit.runtime, which only launches), and the rules name the three
    the kit has besides any added later."""
    for cls in (*registry.RUNTIMES.values(), *registry.BATCH_RUNTIMES.values()):
        if cls.placement != "local":
            assert cls.__module__.startswith("kit.run."), (cls.__module__, cls.placement)
    assert {"kit.run.slurm", "kit.run.k8s", "kit.run.multinode"} <= set(PLACEMENTS)


def test_forbidden_layers():
    modules = kit_modules()
    bad = layer_violations(all_imports(modules), modules)
    assert not bad, "layer rules broken:\n" + "\n".join(bad)


def test_no_import_circles():
    """At module level and through imports inside functions (the CLI's lazy imports too)."""
    found = cycles(graph(all_imports(), functions=True, packages=True))
    text = "\n\n".join("\n".join(e.where() for e in chain) for chain in found)
    assert not found, "import circles:\n" + text


def lazy_violations(imports: list[Import]) -> list[str]:
    return [
        i.where()
        for i in imports
        if i.in_function
        and is_kit(i.imported)
        and not matches(i.importer, LAZY_IMPORTS_ALLOWED)
        and not (i.dynamic and i.importer in DYNAMIC_IMPORTS)
    ]


def test_an_import_through_a_package_init_is_part_of_a_circle(tmp_path):
    """`from kit.cli.options import X` in kit.refs runs kit/cli/__init__.py first; when that
    imports the kit.refs module back, importing it first fails (a circle once missed)."""
    modules = kit_modules()
    _plant(tmp_path, modules, "kit.refs.planted", "from kit.cli.options import AllowUnsigned\n")
    cli = (KIT / "cli" / "__init__.py").read_text() + "\nfrom kit.refs.planted import x\n"
    _plant(tmp_path, modules, "kit.cli", cli)
    found = cycles(graph(all_imports(modules), packages=True))
    assert any({"kit.refs.planted", "kit.cli"} <= {e.importer for e in chain} for chain in found)


def test_no_kit_import_inside_a_function():
    bad = lazy_violations(all_imports())
    assert not bad, "kit imports inside functions (import at the top instead):\n" + "\n".join(bad)


def test_every_kit_import_names_a_module_of_this_tree():
    """A moved module leaves no stale path behind (an installed older kit could still answer it);
    an importlib call names what it loads (a glob of modules counts), or is listed."""
    modules = kit_modules()
    bad = [i.where() for i in all_imports() if (is_kit(i.imported) or i.imported == "?")
           and i.imported not in modules]  # fmt: skip
    assert not bad, "imports of kit modules that do not exist here:\n" + "\n".join(bad)


def _plant(tmp_path: Path, modules: dict[str, Path], name: str, source: str) -> None:
    path = tmp_path / (name.replace(".", "_") + ".py")
    path.write_text(source)
    modules[name] = path


ENGINE = (KIT / "run" / "engine.py").read_text()
RESULTS = (KIT / "run" / "results.py").read_text()
WINDOW = (KIT / "report" / "facts" / "window.py").read_text()

# Each planted violation: (modules planted over the tree, by name: their source), the module
# that must be named, the words of the rule it breaks. The review that set these rules planted
# the eleven first; the rest are the other spellings of a dynamic import.
PLANTED: dict[str, tuple[dict[str, str], str, str]] = {
    "import_module in a function": (
        {"kit.report.planted": "import importlib\n\ndef f():\n"
                               "    return importlib.import_module('kit.run.engine')\n"},
        "kit.report.planted", "the report reads bundles"),
    "import_module of a computed name": (
        {"kit.report.planted": "import importlib\nE = importlib.import_module(f'kit.run.{1}')\n"},
        "kit.report.planted", "the report reads bundles"),
    "runtime -> preflight": (
        {"kit.runtime.planted": "from kit.run.preflight import check_recipe\n"},
        "kit.runtime.planted", "runtimes are plug-ins"),
    "engine -> rerun": (
        {"kit.run.engine": ENGINE + "\nfrom kit.run import rerun\n"},
        "kit.run.engine", "the engine never imports rerun"),
    "placement -> registry": (
        {"kit.run.slurm.planted": "from kit.run import registry\n"},
        "kit.run.slurm.planted", "a placement submits, waits and collects"),
    "engine -> one runtime": (
        {"kit.run.engine": ENGINE + "\nfrom kit.runtime.images import image\n"},
        "kit.run.engine", "never one runtime"),
    "driver -> worker": (
        {"kit.report.facts.planted": "from kit.worker import telemetry\n"},
        "kit.report.facts.planted", "never loads the worker"),
    "placement -> preflight through run.results, which it may use": (
        {"kit.run.slurm.planted": "from kit.run import results\n",
         "kit.run.results": RESULTS + "\nfrom kit.run import preflight\n"},
        "kit.run.slurm.planted", "a placement submits"),
    "runtime -> a placement": (
        {"kit.runtime.planted": "from kit.run.slurm import script\n"},
        "kit.runtime.planted", "runtimes are plug-ins"),
    "engine -> one placement": (
        {"kit.run.engine": ENGINE + "\nfrom kit.run.multinode import runtime\n"},
        "kit.run.engine", "never one runtime"),
    "engine -> one runtime through another module": (
        {"kit.run.planted": "from kit.runtime.images import image\n",
         "kit.run.engine": ENGINE + "\nfrom kit.run import planted\n"},
        "kit.run.engine", "never one runtime"),
    "import_module imported under another name": (
        {"kit.report.planted": "from importlib import import_module as load\n"
                               "E = load('kit.run.engine')\n"},
        "kit.report.planted", "the report reads bundles"),
    "runpy.run_module": (
        {"kit.report.planted": "import runpy\n\ndef f():\n    runpy.run_module('kit.cli')\n"},
        "kit.report.planted", "the report reads bundles"),
    "inventory -> engine": (
        {"kit.inventory.planted": "from kit.run import engine\n"},
        "kit.inventory.planted", "the inventory measures a machine"),
    "model -> report": (
        {"kit.model.planted": "from kit.report import kinds\n"},
        "kit.model.planted", "the bundle model is read by everyone"),
    "import_module assigned to another name": (
        {"kit.report.planted": "import importlib\nload = importlib.import_module\n"
                               "E = load(name='kit.run.engine')\n"},
        "kit.report.planted", "the report reads bundles"),
    "__import__": (
        {"kit.report.planted": "E = __import__('kit.run.registry')\n"},
        "kit.report.planted", "the report reads bundles"),
    "runpy.run_module under another name": (
        {"kit.inventory.planted": "from runpy import run_module as go\ngo('kit.run.engine')\n"},
        "kit.inventory.planted", "the inventory measures a machine"),
    # the kinds issue 50 planted, which the rules once missed
    "model -> docker": (
        {"kit.model.planted": "import docker\n"},
        "kit.model.planted", "an engine's SDK"),
    "a new top-level module": (
        {"kit.planted": "X = 1\n"},
        "kit.planted", "does not name"),
    "runtime -> report": (
        {"kit.runtime.planted": "from kit.report import kinds\n"},
        "kit.runtime.planted", "never reads or renders a report"),
    "a lazy import docker inside a function": (
        {"kit.report.planted": "def f():\n    import docker\n\n    return docker\n"},
        "kit.report.planted", "an engine's SDK"),
    "matplotlib outside kit.report.mpl": (
        {"kit.report.planted": "from matplotlib.figure import Figure\n"},
        "kit.report.planted", "with stop signals held"),
    "a circle through a function-level import": (
        {"kit.report.facts.planted": "from kit.report.facts import window\n",
         "kit.report.facts.window": WINDOW + "\ndef planted():\n    from kit.report.facts import planted\n"},
        "kit.report.facts.planted", "an import circle"),
}  # fmt: skip


@pytest.mark.parametrize("case", PLANTED)
def test_planted_violations_fail(tmp_path, case):
    """The rules catch what they claim: each planted import is named, with its rule's words,
    in a copy of the tree's module map where the planted modules replace or join the real."""
    plants, who, words = PLANTED[case]
    modules = kit_modules()
    for name, source in plants.items():
        _plant(tmp_path, modules, name, source)
    imports = all_imports(modules)
    bad = layer_violations(imports, modules) + circle_violations(imports)
    assert any(f" {who} -> " in line and words in line for line in bad), bad


def test_a_file_run_by_its_path_is_a_dynamic_import_the_rules_cannot_see(tmp_path):
    modules = kit_modules()
    _plant(tmp_path, modules, "kit.report.facts.planted", "import runpy\nrunpy.run_path('x.py')\n")
    assert any(
        i.importer == "kit.report.facts.planted" and i.imported == "?" for i in all_imports(modules)
    )


def test_planted_worker_and_lazy_violations_fail(tmp_path):
    modules = kit_modules()
    _plant(tmp_path, modules, "kit.shared.planted", "import numpy\nfrom kit.worker import common\n")
    _plant(tmp_path, modules, "kit.report.facts.lazy", "def f():\n    from kit import stats\n")
    _plant(
        tmp_path,
        modules,
        "kit.report.facts.hidden",
        "import importlib\nM = importlib.import_module(x)\n",
    )
    imports = all_imports(modules)
    worker = worker_violations(imports)
    assert any("numpy: kit.shared is standard library only" in b for b in worker)
    assert any("kit.shared imports only kit.shared" in b for b in worker)
    assert any("kit.report.facts.lazy" in b for b in lazy_violations(imports))
    assert any(i.importer == "kit.report.facts.hidden" and i.imported == "?" for i in imports)


def test_the_checker_sees_what_it_checks():
    """The rules hold because the walker reads real imports, not because it reads none."""
    imports = all_imports()
    edges = graph(imports)
    assert any(e.imported == "kit.run.registry" for e in edges["kit.run.engine"])
    assert any(i.in_function and i.imported == "kit.run.engine" for i in imports
               if i.importer == "kit.cli")  # fmt: skip
    lazy = graph(imports, functions=True)["kit.workloads.registry"]
    assert any(e.imported == "kit.workloads.allreduce.spec" and e.dynamic for e in lazy)
    fake = {
        "a": [Import("a", "b", KIT / "a.py", 1, False)],
        "b": [Import("b", "c", KIT / "b.py", 2, False)],
        "c": [Import("c", "a", KIT / "c.py", 3, False)],
    }
    (chain,) = cycles(fake)
    assert [e.importer for e in chain] == ["a", "b", "c"]
