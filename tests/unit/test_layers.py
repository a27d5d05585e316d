"""The architecture, enforced: read every module of kit/ with `ast` and check its imports.

The rules are the table below (ARCHITECTURE.md explains them). A failure names each offending
import as `file:line: importer -> imported`. Imports are read from the real source: module level
and inside functions, `import x` and `from x import y`, relative ones resolved.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path

from tests.conftest import ROOT

KIT = ROOT / "kit"

# The worker half: what runs inside the container, where the driver's packages are absent.
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
}  # fmt: skip

# (modules the rule covers, kit modules they must not reach, directly or through others, why)
FORBIDDEN: list[tuple[tuple[str, ...], tuple[str, ...], str]] = [
    (("kit.report", "kit.report.*"), ("kit.runtime", "kit.runtime.*", "kit.run", "kit.run.*",
                                      "kit.cli", "kit.cli.*"),
     "the report reads bundles; it never runs anything"),
    (("kit.bundle", "kit.model", "kit.model.*"), ("kit.cli", "kit.cli.*", "kit.runtime", "kit.runtime.*"),
     "the bundle model is read by everyone; it depends on no command and no runtime"),
    (("kit.runtime", "kit.runtime.*"), ("kit.run.engine", "kit.run.rerun", "kit.cli", "kit.cli.*"),
     "runtimes are plug-ins the engine chooses; they never call the engine or the CLI"),
    (("kit.run.engine",), ("kit.run.rerun", "kit.cli", "kit.cli.*"),
     "rerun wraps the engine (a hook); the engine never imports rerun"),
]  # fmt: skip
# Modules that may import kit modules inside functions: the CLI imports each command's
# modules when the command runs, so that `kit --help` starts in a fraction of a second.
LAZY_IMPORTS_ALLOWED = ("kit.cli", "kit.cli.*")


@dataclass(frozen=True)
class Import:
    importer: str
    imported: str  # the module the statement loads (a kit module, or a top-level package)
    path: Path
    line: int
    in_function: bool

    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}: {self.importer} -> {self.imported}"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def kit_modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(KIT.rglob("*.py"))}


def matches(module: str, patterns: tuple[str, ...]) -> bool:
    return any(fnmatchcase(module, p) for p in patterns)


def _imports(name: str, path: Path, modules: dict[str, Path]) -> list[Import]:
    """Every import statement of one module, each resolved to the module it loads."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[Import] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            nested = in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
            if isinstance(child, ast.Import):
                for alias in child.names:
                    found.append(Import(name, alias.name, path, child.lineno, in_function))
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    anchor = package.split(".")[: len(package.split(".")) - child.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                for alias in child.names:
                    target = f"{base}.{alias.name}"
                    target = target if target in modules else base
                    found.append(Import(name, target, path, child.lineno, in_function))
            visit(child, nested)

    visit(tree, False)
    return found


def all_imports() -> list[Import]:
    modules = kit_modules()
    return [i for name, path in modules.items() for i in _imports(name, path, modules)]


def is_kit(module: str) -> bool:
    return module == "kit" or module.startswith("kit.")


def graph(imports: list[Import]) -> dict[str, list[Import]]:
    """Module-level kit -> kit edges (what runs when the module is imported)."""
    edges: dict[str, list[Import]] = {}
    for i in imports:
        if is_kit(i.imported) and not i.in_function and i.imported != i.importer:
            edges.setdefault(i.importer, []).append(i)
    return edges


def reach(start: str, edges: dict[str, list[Import]]) -> dict[str, list[Import]]:
    """Every kit module `start` loads, directly or not, with the chain of imports to it."""
    paths: dict[str, list[Import]] = {start: []}
    todo = [start]
    while todo:
        here = todo.pop(0)
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


def test_worker_side_imports_nothing_from_the_driver():
    imports = all_imports()
    worker = {i.importer for i in imports if matches(i.importer, WORKER_SIDE)}
    # importing kit.workloads.x.worker runs kit/workloads/__init__.py and kit/workloads/x/
    # __init__.py first: those packages are on the worker side too
    worker |= {".".join(m.split(".")[:n]) for m in worker for n in range(1, len(m.split(".")))}
    bad = []
    for i in imports:
        if i.importer not in worker:
            continue
        top = i.imported.split(".")[0]
        if is_kit(i.imported):
            if i.imported not in worker and not matches(i.imported, WORKER_SIDE):
                bad.append(i.where() + " (a driver module)")
        elif top not in sys.stdlib_module_names and top not in WORKER_THIRD_PARTY:
            bad.append(i.where() + f" ({top}: not a worker dependency)")
    assert not bad, "the worker must not import the driver:\n" + "\n".join(bad)


def test_forbidden_layers():
    imports = all_imports()
    edges = graph(imports)
    bad = []
    for covered, forbidden, why in FORBIDDEN:
        for module in sorted(kit_modules()):
            if not matches(module, covered):
                continue
            for target, chain in reach(module, edges).items():
                if chain and matches(target, forbidden):
                    via = " -> ".join(e.imported for e in chain[1:])
                    bad.append(f"{chain[0].where()}{' -> ' + via if via else ''} ({why})")
                    break
    assert not bad, "layer rules broken:\n" + "\n".join(bad)


def test_no_import_circles():
    found = cycles(graph(all_imports()))
    text = "\n\n".join("\n".join(e.where() for e in chain) for chain in found)
    assert not found, "import circles:\n" + text


def test_no_kit_import_inside_a_function():
    bad = [
        i.where()
        for i in all_imports()
        if i.in_function and is_kit(i.imported) and not matches(i.importer, LAZY_IMPORTS_ALLOWED)
    ]
    assert not bad, "kit imports inside functions (import at the top instead):\n" + "\n".join(bad)


def test_every_kit_import_names_a_module_of_this_tree():
    """A moved module leaves no stale path behind (an installed older kit could still answer it)."""
    modules = kit_modules()
    bad = [i.where() for i in all_imports() if is_kit(i.imported) and i.imported not in modules]
    assert not bad, "imports of kit modules that do not exist here:\n" + "\n".join(bad)


def test_the_checker_sees_what_it_checks():
    """The rules hold because the walker reads real imports, not because it reads none."""
    imports = all_imports()
    edges = graph(imports)
    assert any(e.imported == "kit.runtime.registry" for e in edges["kit.run.engine"])
    assert any(i.in_function and i.imported == "kit.run.engine" for i in imports
               if i.importer == "kit.cli")  # fmt: skip
    fake = {
        "a": [Import("a", "b", KIT / "a.py", 1, False)],
        "b": [Import("b", "c", KIT / "b.py", 2, False)],
        "c": [Import("c", "a", KIT / "c.py", 3, False)],
    }
    (chain,) = cycles(fake)
    assert [e.importer for e in chain] == ["a", "b", "c"]
