"""What differs inside two environments, sorted by whether the runs loaded it.

Why: two images can differ in a hash of their base (each lent machine's own stack imported as the
base) while every library a run touches is the same; a buyer needs to know which. Each side is an
image's inventory (software.json: kit.runtime.images.software) and what its runs loaded (each
run's `loaded`: kit.worker.loaded). A difference is a Python distribution, a Debian package, a
CUDA/cuDNN/NCCL/driver library, a library or module the runs mapped, or a variable, added,
removed or changed; it is "loaded" when a run of either side mapped one of its files or imported
one of its modules (a variable: when it is read at run time, not a version label). The
environments match when nothing loaded differs; the unloaded differences are counted beside.

One function (`content_diff`) decides; the rerun's lines, the comparison's page-1 sentence, its
section and compare.json all read its result (kit.env.check).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import TypeVar

from kit.model import Environment, Loaded, RunResult, Software
from kit.model.software import DebianPackage, Distribution

KINDS = ("python", "debian", "library", "module", "variable")
"""What a difference is, in the order a list shows them."""
LABEL_PREFIXES = ("NV_", "NVIDIA_REQUIRE")
"""Variables that only label versions (NGC's NV_CUDNN_VERSION...): nothing reads them at run
time; a `*_VERSION` variable is one too."""

P = TypeVar("P", Distribution, DebianPackage)  # a package list _package_changes compares


@dataclass(frozen=True)
class Side:
    """One bundle's environment as the content diff reads it."""

    environment: Environment | None
    software: Software | None
    loaded: tuple[Loaded, ...] = ()

    @property
    def image_id(self) -> str | None:
        env_id = self.environment.image_id if self.environment else None
        return env_id or (self.software.image_id if self.software else None)


def side(
    environment: Environment | None, software: Software | None, runs: Iterable[RunResult | None]
) -> Side:
    """A bundle's side: its environment, its image's inventory, and each run's `loaded`."""
    loaded = tuple(r.loaded for r in runs if r is not None and r.loaded is not None)
    return Side(environment, software, loaded)


@dataclass(frozen=True)
class Change:
    """One difference: `old` or `new` None when absent on that side."""

    kind: str
    name: str
    old: str | None
    new: str | None
    loaded: bool

    def words(self, old_label: str = "baseline", new_label: str = "here") -> str:
        """ "python torch 2.11.0 (baseline) -> 2.12.0 (here)", "debian kit-planted: only here"."""
        if self.old is None:
            return f"{self.kind} {self.name} {self.new}: only {new_label}"
        if self.new is None:
            return f"{self.kind} {self.name} {self.old}: only {old_label}"
        return f"{self.kind} {self.name}: {self.old} ({old_label}) -> {self.new} ({new_label})"

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


@dataclass
class ContentDiff:
    """What differs inside two environments, as far as both sides recorded it."""

    same_image: bool
    image_id: str | None
    inventories: bool  # both sides list their image's contents (software.json)
    loaded_known: bool  # a run of either side recorded what it loaded
    changes: list[Change] = field(default_factory=list)

    @property
    def compared(self) -> bool:
        """Anything was compared: the same image, both inventories, or both runs' records."""
        return self.same_image or self.inventories or self.loaded_known

    @property
    def loaded(self) -> list[Change]:
        return [c for c in self.changes if c.loaded]

    @property
    def unloaded(self) -> list[Change]:
        return [c for c in self.changes if not c.loaded]

    @property
    def matches(self) -> bool:
        return self.compared and not self.loaded

    def to_dict(self) -> dict[str, object]:
        return {
            "same_image": self.same_image,
            "image_id": self.image_id,
            "inventories": self.inventories,
            "loaded_known": self.loaded_known,
            "matches": self.matches,
            "loaded": [c.to_dict() for c in self.loaded],
            "unloaded": [c.to_dict() for c in self.unloaded],
        }


def _short(sha: str | None) -> str:
    return f"sha256 {sha[:12]}" if sha else "no hash"


def _versioned(version: str, sha: str | None, other_version: str, other_sha: str | None) -> str:
    """A version, with its files' hash when the versions are equal and the files are not."""
    if version == other_version and sha != other_sha:
        return f"{version} ({_short(sha)})"
    return version or "?"


def _pair(
    kind: str, name: str, old: tuple[str, str | None] | None, new: tuple[str, str | None] | None
) -> Change | None:
    """(version, sha256) on each side, None where absent: the change, or None when equal."""
    if old is None and new is None:
        return None
    if old is not None and new is not None:
        if old[0] == new[0] and (old[1] is None or new[1] is None or old[1] == new[1]):
            return None
        a = _versioned(old[0], old[1], new[0], new[1])
        b = _versioned(new[0], new[1], old[0], old[1])
        return Change(kind, name, a, b, False)
    if old is not None:
        return Change(kind, name, old[0] or "present", None, False)
    assert new is not None
    return Change(kind, name, None, new[0] or "present", False)


def _library_key(path: str) -> str:
    """A mapped library by folder and name up to `.so`: libcuda.so.580.95 and libcuda.so.570.1
    are one library in two versions."""
    folder, name = os.path.split(path)
    stem = name[: name.index(".so") + 3] if ".so" in name else name
    return f"{folder}/{stem}"


def _loaded_libraries(records: Iterable[Loaded]) -> dict[str, tuple[str, str]]:
    """key -> (path, sha256) over a side's runs (the first run's where two disagree)."""
    out: dict[str, tuple[str, str]] = {}
    for rec in records:
        for path, sha in rec.libraries.items():
            out.setdefault(_library_key(path), (path, sha))
    return out


def _loaded_modules(records: Iterable[Loaded]) -> dict[str, str]:
    out: dict[str, str] = {}
    for rec in records:
        for name, digest in rec.modules.items():
            out.setdefault(name, digest)
    return out


def is_label(name: str) -> bool:
    """A variable that only names a version: nothing reads it at run time."""
    return name.endswith("_VERSION") or name.startswith(LABEL_PREFIXES)


def _inventory_changes(a: Software, b: Software, paths: set[str], names: set[str]) -> list[Change]:
    """Distributions, Debian packages, CUDA libraries and variables that differ; each marked
    loaded when a run mapped one of its files (`paths`) or imported one of its modules."""
    out: list[Change] = []
    da = {d.name: d for d in a.distributions}
    db = {d.name: d for d in b.distributions}
    out += _package_changes("python", da, db, lambda d: d.top, names)
    pa = {f"{p.name}:{p.arch}" if p.arch else p.name: p for p in a.debian}
    pb = {f"{p.name}:{p.arch}" if p.arch else p.name: p for p in b.debian}
    out += _package_changes("debian", pa, pb, lambda p: p.libs, paths)
    la = {lib.path: lib.sha256 for lib in a.libraries}
    lb = {lib.path: lib.sha256 for lib in b.libraries}
    for path in sorted(la.keys() | lb.keys()):
        x, y = la.get(path), lb.get(path)
        if x != y:
            change = Change(
                "library", path, _short(x) if x else None, _short(y) if y else None, False
            )
            out.append(_marked(change, path in paths))
    for name in sorted(a.variables.keys() | b.variables.keys()):
        x, y = a.variables.get(name), b.variables.get(name)
        if x != y:
            out.append(Change("variable", name, x, y, not is_label(name)))
    return out


def _package_changes(
    kind: str,
    a: Mapping[str, P],
    b: Mapping[str, P],
    owns: Callable[[P], list[str]],
    loaded: set[str],
) -> list[Change]:
    """Packages (Python distributions, Debian packages) by key whose version or hash differs;
    each marked loaded when a run loaded one of the names it owns (import names, library paths)."""
    out: list[Change] = []
    for name in sorted(a.keys() | b.keys()):
        x, y = a.get(name), b.get(name)
        change = _pair(
            kind,
            name,
            (x.version, x.sha256) if x else None,
            (y.version, y.sha256) if y else None,
        )
        if change is not None:
            mine = set((owns(x) if x else []) + (owns(y) if y else []))
            out.append(_marked(change, bool(mine & loaded)))
    return out


def _marked(change: Change, loaded: bool) -> Change:
    return Change(change.kind, change.name, change.old, change.new, loaded)


def _claims(a: Software | None, b: Software | None) -> tuple[dict[str, str], set[str]]:
    """(import name -> its distribution, the Debian packages' library paths) of both sides."""
    tops: dict[str, str] = {}
    libs: set[str] = set()
    for sw in (a, b):
        if sw is None:
            continue
        for d in sw.distributions:
            for t in d.top:
                tops.setdefault(t, d.name)
        for p in sw.debian:
            libs.update(p.libs)
    return tops, libs


def _run_changes(old: Side, new: Side) -> list[Change]:
    """Libraries and modules both sides' runs loaded whose hashes differ, where the inventories
    do not already compare them (a package's file, a CUDA library, a distribution's module)."""
    tops, package_libs = _claims(old.software, new.software)
    inventoried = {lib.path for sw in (old.software, new.software) if sw for lib in sw.libraries}
    out: list[Change] = []
    la, lb = _loaded_libraries(old.loaded), _loaded_libraries(new.loaded)
    for key in sorted(la.keys() & lb.keys()):
        (pa, sa), (pb, sb) = la[key], lb[key]
        if sa == sb or pa in inventoried or pb in inventoried:
            continue  # equal, or the inventories' own list names it
        if {pa, pb} & package_libs or _under(pa, tops) or _under(pb, tops):
            continue  # a package's file: its package's change (or its files' hash) names it
        name = pa if pa == pb else key + ".*"
        a = _short(sa) if pa == pb else f"{os.path.basename(pa)} ({_short(sa)})"
        b = _short(sb) if pa == pb else f"{os.path.basename(pb)} ({_short(sb)})"
        out.append(Change("library", name, a, b, True))
    ma, mb = _loaded_modules(old.loaded), _loaded_modules(new.loaded)
    for name in sorted(ma.keys() & mb.keys()):
        if ma[name] == mb[name] or name in tops:
            continue  # a distribution's module: the distributions' hashes compare its files
        out.append(Change("module", name, f"files {ma[name]}", f"files {mb[name]}", True))
    return out


def _under(path: str, tops: dict[str, str]) -> bool:
    """The file belongs to an installed distribution (…/site-packages/<import name>/…)."""
    parts = path.split("/")
    return any(
        p in ("site-packages", "dist-packages") and i + 1 < len(parts) and parts[i + 1] in tops
        for i, p in enumerate(parts)
    )


def content_diff(old: Side, new: Side) -> ContentDiff:
    """Every difference inside the two environments, each marked loaded or not (module doc)."""
    same = old.image_id is not None and old.image_id == new.image_id
    inventories = old.software is not None and new.software is not None
    records = old.loaded + new.loaded
    paths = {p for rec in records for p in rec.libraries}
    names = {n for rec in records for n in rec.modules}
    listed: list[Change] = []
    if inventories and not same:
        assert old.software is not None and new.software is not None
        listed = _inventory_changes(old.software, new.software, paths, names)
        if not records:  # nothing tells what the runs loaded: every difference may matter
            listed = [_marked(c, True) for c in listed]
    changes = listed + (_run_changes(old, new) if old.loaded and new.loaded else [])
    changes.sort(key=lambda c: (not c.loaded, KINDS.index(c.kind), c.name))
    image = old.image_id if same else None
    return ContentDiff(same, image, inventories, bool(old.loaded and new.loaded), changes)
