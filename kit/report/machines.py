"""The bundles a comparison reads, and what it says before any number: hardware, software,
recipe and scale differences, and which bundle reruns which.

Every bundle must match its manifest: a comparison of edited numbers would be worthless.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from kit.bundle import MANIFEST, Bundle, sha256_file, verify_manifest
from kit.envdiff import environment_diff, environment_versions
from kit.errors import InputError, KitError
from kit.recipe import Recipe
from kit.report import analysis
from kit.report.render import machine_line

RECIPE_NOTES = ("description", "verified_on")  # recipe fields that do not change a measurement


@dataclass
class Machine:
    """One bundle as a column of the comparison."""

    index: int  # 1-based, as the user counts on the command line
    path: Path
    bundle: Bundle
    hardware: dict[str, Any]
    environment: dict[str, Any]

    @property
    def results(self) -> dict[str, Any]:
        return self.bundle.results

    @property
    def hostname(self) -> str:
        return str((self.hardware.get("host") or {}).get("hostname") or "unknown host")

    @property
    def label(self) -> str:
        return f"#{self.index} {self.hostname}"

    @property
    def summary(self) -> str:
        return machine_line(self.hardware, {})

    @cached_property
    def benches(self) -> list[analysis.Benchmark]:
        """The bundle read the way its report reads it (one reader of results.json)."""
        return analysis.build_benchmarks(self.results, recipe_of(self.bundle))


def recipe_of(bundle: Bundle) -> dict[str, Any]:
    try:
        recipe = bundle.recipe
    except Exception:  # a missing or broken recipe.yaml: compare what the results hold
        return {}
    return recipe if isinstance(recipe, dict) else {}


def load_machines(paths: list[Path]) -> list[Machine]:
    """Each bundle, refused unless it matches its manifest."""
    if len(paths) < 2:
        raise InputError("kit compare needs at least two bundles")
    machines = []
    for i, path in enumerate(paths, 1):
        bundle = Bundle.load(Path(path))
        check = verify_manifest(bundle.path)
        if not check.ok:
            names = ", ".join(check.changed + check.missing + check.extra)
            raise KitError(
                f"{path}: does not match its {MANIFEST} ({names}); `kit verify {path}` shows "
                "what changed; compare only untouched bundles"
            )
        machines.append(
            Machine(
                i,
                Path(path),
                bundle,
                bundle.read_json("hardware.json") or {},
                bundle.read_json("environment.json") or {},
            )
        )
    return machines


def pick_baseline(spec: str | int | None, machines: list[Machine]) -> int:
    """The 0-based index of the baseline: a 1-based position or one of the bundle paths."""
    if spec is None or spec == "":
        return 0
    text = str(spec)
    if text.isdigit():
        n = int(text)
        if not 1 <= n <= len(machines):
            raise InputError(f"--baseline {n}: allowed: 1 to {len(machines)} (a bundle's position)")
        return n - 1
    wanted = Path(text).resolve()
    for i, m in enumerate(machines):
        if m.path.resolve() == wanted:
            return i
    raise InputError(
        f"--baseline {text}: not one of the compared bundles; give its position (1 to "
        f"{len(machines)}) or one of: {', '.join(str(m.path) for m in machines)}"
    )


# --- hardware, environment, warnings -------------------------------------------------------------


def hardware_rows(machines: list[Machine]) -> list[dict[str, Any]]:
    def gpus(h: dict[str, Any]) -> str:
        names = [g.get("name") or "?" for g in h.get("gpus") or []]
        return ", ".join(f"{names.count(n)}x {n}" for n in dict.fromkeys(names)) or "none"

    def gpu_mem(h: dict[str, Any]) -> str:
        mems = {g.get("memory_total_gib") for g in h.get("gpus") or []} - {None}
        return ", ".join(f"{v:g} GiB" for v in sorted(mems)) or "-"

    def links(h: dict[str, Any]) -> str:
        matrix = (h.get("topology") or {}).get("matrix") or []
        words = sorted({w for row in matrix for w in row} - {"X"})
        return ", ".join(words) or "-"

    def host(h: dict[str, Any], *keys: str) -> str:
        hh = h.get("host") or {}
        return next((str(hh[k]) for k in keys if hh.get(k)), "-")

    getters = [
        ("summary", lambda h: machine_line(h, {})),
        ("host", lambda h: host(h, "hostname")),
        ("GPUs", gpus),
        ("GPU memory", gpu_mem),
        ("GPU links", links),
        ("driver", lambda h: str((h.get("driver") or {}).get("version") or "-")),
        ("CPU", lambda h: host(h, "cpu_model", "cpu_count")),
        ("logical CPUs", lambda h: host(h, "logical_cpus", "cpu_count")),
        ("OS", lambda h: host(h, "os")),
    ]
    rows = []
    for name, get in getters:
        values = [get(m.hardware) for m in machines]
        rows.append({"name": name, "values": values, "differs": len(set(values)) > 1})
    return rows


def environment_rows(machines: list[Machine], base: int) -> list[dict[str, Any]]:
    """Every fingerprint field any bundle knows; cells that differ from the baseline marked."""
    flat = [environment_versions(m.environment, m.hardware) for m in machines]
    rows = []
    for key in flat[0]:
        values = [f[key] for f in flat]
        if all(v is None for v in values):
            continue
        ref = values[base]
        differs = [v is not None and ref is not None and v != ref for v in values]
        rows.append(
            {
                "name": key,
                "values": [v or "-" for v in values],
                "differs": differs,
                "any": any(differs),
            }
        )
    return rows


def _recipe_core(recipe: dict[str, Any]) -> dict[str, Any]:
    """The recipe as it ran: validated (defaults filled, so a field added later or written as
    null reads the same as one left out), without the fields that change no measurement."""
    try:
        full = Recipe.model_validate(recipe).model_dump(mode="json")
    except ValidationError:  # a recipe this kit no longer accepts: compare what is written
        full = {k: v for k, v in recipe.items() if v is not None}
    return {k: v for k, v in full.items() if k not in RECIPE_NOTES}


def warnings_for(machines: list[Machine], base: int) -> list[dict[str, str]]:
    """What the first page must say before any number: software differs, scale, edits, failures."""
    out: list[dict[str, str]] = []
    ref = machines[base]
    for m in machines:
        if m is ref:
            continue
        diffs = environment_diff(ref.environment, m.environment, ref.hardware, m.hardware)
        if diffs:
            what = "; ".join(f"{d.field} {d.new} vs {d.old}" for d in diffs)
            out.append(
                {
                    "level": "env",
                    "text": (
                        f"Different environments: {m.label} differs from the baseline {ref.label} in "
                        f"{what}. These results compare software as well as hardware."
                    ),
                }
            )
    recipes = [_recipe_core(m.bundle.recipe) for m in machines]
    for m, r in zip(machines, recipes, strict=True):
        keys = sorted(k for k in set(r) | set(recipes[base]) if r.get(k) != recipes[base].get(k))
        if m is not ref and keys:
            out.append(
                {
                    "level": "recipe",
                    "text": (
                        f"Different recipes: {m.label} ran a recipe that differs from the baseline's in "
                        f"{', '.join(keys)}; its numbers are not like for like."
                    ),
                }
            )
    for key, word in (("smoke", "smoke scale"), ("device", "device")):
        values = {str(m.results.get(key)) for m in machines}
        if len(values) > 1:
            out.append(
                {
                    "level": "recipe",
                    "text": f"The bundles differ in {word}: "
                    + ", ".join(f"{m.label} {m.results.get(key)}" for m in machines),
                }
            )
    if any(m.results.get("smoke") for m in machines):
        out.append(
            {
                "level": "note",
                "text": (
                    "Smoke scale: sizes were shrunk to check the method; these numbers do not measure "
                    "the hardware."
                ),
            }
        )
    for m in machines:
        if not m.results.get("pinned"):
            out.append(
                {
                    "level": "note",
                    "text": (
                        f"{m.label} ran on the {m.results.get('runtime', 'host')} runtime: its software "
                        "environment was not pinned."
                    ),
                }
            )
        if m.results.get("status") != "complete":
            out.append(
                {"level": "note", "text": f"{m.label}: bundle status {m.results.get('status')!r}."}
            )
        for bench, rec in (m.results.get("adaptive") or {}).items():
            if rec.get("cap_reached"):
                out.append(
                    {
                        "level": "note",
                        "text": (
                            f"{m.label}: {bench} stayed noisy ({rec.get('reason')}) after "
                            f"{rec.get('repeats')} repeats, the cap."
                        ),
                    }
                )
    return out


def reproductions(machines: list[Machine]) -> list[str]:
    """Which bundle reruns which, checked by the recorded manifest hash."""
    digests = {sha256_file(m.path / MANIFEST): m for m in machines}
    lines = []
    for m in machines:
        src = m.results.get("reproduces") or {}
        if not src:
            continue
        other = digests.get(src.get("manifest_sha256"))
        target = other.label if other else f"{src.get('bundle')} (not in this comparison)"
        lines.append(f"{m.label} reruns {target}, created {src.get('created_at')}.")
    return lines
