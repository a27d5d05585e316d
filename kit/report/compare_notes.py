"""What a comparison says beside its numbers, before any ratio: the hardware and environment side
by side, the bundles that ran on the same machine, software, recipe and scale differences, edits
and failures, and which bundle reruns which."""

from __future__ import annotations

from typing import Any

from kit.bundle import MANIFEST, content_sha256, sha256_file
from kit.env.check import Check, check
from kit.env.content import Side, side
from kit.env.diff import environment_versions
from kit.model import Hardware, recipe_differences
from kit.model.results import Reproduces
from kit.recipe import Recipe
from kit.report.machines import Machine, same_machine
from kit.report.method import adaptive_why
from kit.report.render import machine_line

REPEAT_FIELDS = ("repeats", "max_repeats", "cv_threshold", "timeout_s")
"""Recipe fields that change how many runs there are or how long one may take, not what runs."""


def hardware_rows(machines: list[Machine]) -> list[dict[str, Any]]:
    def gpus(h: Hardware) -> str:
        names = [g.name or "?" for g in h.gpus]
        return ", ".join(f"{names.count(n)}x {n}" for n in dict.fromkeys(names)) or "none"

    def gpu_mem(h: Hardware) -> str:
        mems = {g.memory_total_gib for g in h.gpus} - {None}
        return ", ".join(f"{v:g} GiB" for v in sorted(mems)) or "-"

    def links(h: Hardware) -> str:
        matrix = h.topology.matrix if h.topology else []
        words = sorted({w for row in matrix for w in row} - {"X"})
        return ", ".join(words) or "-"

    def host(h: Hardware, *fields: str) -> str:
        values = (getattr(h.host, f) for f in fields) if h.host else iter(())
        return next((str(v) for v in values if v), "-")

    getters = [
        ("summary", machine_line),
        ("host", lambda h: host(h, "hostname")),
        ("GPUs", gpus),
        ("GPU memory", gpu_mem),
        ("GPU links", links),
        ("driver", lambda h: str((h.driver and h.driver.version) or "-")),
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


def redefined(a: Recipe, b: Recipe) -> list[str]:
    """The variants both recipes name but define differently (their variables or GPUs): a
    figure of that name is then not the same measurement on both sides."""
    theirs = {v.name: (v.env, v.gpu_ids) for v in b.resolved_variants()}
    return [
        v.name
        for v in a.resolved_variants()
        if v.name in theirs and (v.env, v.gpu_ids) != theirs[v.name]
    ]


def path_words(path: str, recipe: Recipe) -> str:
    """A recipe difference's dotted path as a reader says it: "benchmarks.1.variants" is "the
    variants of benchmark hbm-copy" (the benchmark named as the recipe names it)."""
    parts = path.split(".")
    if len(parts) >= 3 and parts[0] == "benchmarks" and parts[1].isdigit():
        items = [b.label for b in recipe.benchmarks]
    elif len(parts) >= 3 and parts[0] == "variants" and parts[1].isdigit():
        items = [v.name for v in recipe.resolved_variants()]
    else:
        return path
    i = int(parts[1])
    name = items[i] if i < len(items) else f"number {i + 1}"
    return f"the {'.'.join(parts[2:])} of {parts[0].removesuffix('s')} {name}"


def recipe_notes(ref: Machine, m: Machine) -> list[dict[str, str]]:
    """How m's recipe differs from the baseline's (kit.model.recipe_differences, defaults filled):
    the GPU count (a scale difference the per-GPU figures answer), repeat counts (the width of
    the intervals, not the measurement), and anything else (not like for like). [] when equal."""
    diffs = recipe_differences(ref.data.recipe, m.data.recipe)
    scale = [d for d in diffs if d == "gpus"]
    repeats = [d for d in diffs if d in REPEAT_FIELDS]
    # which variants a benchmark runs: the page compares only those both ran, like for like
    # where each variant of one name is the same on both sides (else not, below)
    chosen = [d for d in diffs if d == "variants" or d.endswith(".variants")]
    if redefined(ref.data.recipe, m.data.recipe):
        chosen = []
    other = [d for d in diffs if d not in scale and d not in repeats and d not in chosen]
    recipe = m.data.recipe
    out = []
    if other:
        out.append(
            {
                "level": "recipe",
                "text": (
                    f"Different recipes: {m.label} ran a recipe that differs from the baseline's in "
                    f"{', '.join(path_words(d, recipe) for d in other)}; its numbers are not like "
                    "for like."
                ),
            }
        )
    if chosen:
        out.append(
            {
                "level": "note",
                "text": (
                    f"{m.label} and the baseline ran other variants "
                    f"({', '.join(path_words(d, recipe) for d in chosen)}): only the variants both "
                    "ran are compared."
                ),
            }
        )
    if scale:
        out.append(
            {
                "level": "scale",
                "text": (
                    f"Different scale: {m.label} ran the same workloads on "
                    f"{_gpus(m.data.recipe.gpus)}, the baseline {ref.label} on "
                    f"{ref.data.recipe.gpus}."
                ),
            }
        )
    if repeats:
        out.append(
            {
                "level": "note",
                "text": (
                    f"{m.label} and the baseline differ in {', '.join(repeats)}: the intervals differ in "
                    "width; each run measured the same way."
                ),
            }
        )
    return out


def same_machine_notes(machines: list[Machine]) -> list[dict[str, str]]:
    """One line per group of bundles that ran on the same machine (the same GPU UUIDs): their
    differences are the runs' (software, settings, the day), not the hardware's."""
    out, seen = [], set()
    for m in machines:
        group = [o for o in machines if same_machine(m.hardware, o.hardware)]
        if len(group) < 2 or m.index in seen:
            continue
        seen.update(o.index for o in group)
        names = ", ".join(o.label for o in group[:-1]) + f" and {group[-1].label}"
        text = (
            f"{names} are the same machine (the same GPU UUIDs in hardware.json): what differs "
            "between them is the runs (software, settings, the day), not the hardware."
        )
        out.append({"level": "same", "text": text})
    return out


def warnings_for(machines: list[Machine], base: int) -> list[dict[str, str]]:
    """What the first page must say before any number: the same machine, software differs,
    scale, edits, failures."""
    out: list[dict[str, str]] = same_machine_notes(machines)
    ref = machines[base]
    for m in machines:
        if m is ref:
            continue
        chk = machine_check(ref, m)
        if not chk.matches:
            measures = (
                "software on the same machine"
                if same_machine(ref.hardware, m.hardware)
                else "software as well as hardware"
            )
            text = (
                f"Different environments: {m.label} against the baseline {ref.label}: "
                f"{chk.sentence()} These results compare {measures}."
            )
            out.append({"level": "env", "text": text})
        elif chk.content.compared:
            text = f"{m.label} against the baseline {ref.label}: {chk.sentence()}"
            out.append({"level": "envsame", "text": text})
    for m in machines:
        if m is not ref:
            out.extend(recipe_notes(ref, m))
    for key, word in (("smoke", "smoke scale"), ("device", "device")):
        values = {str(getattr(m.results, key)) for m in machines}
        if len(values) > 1:
            out.append(
                {
                    "level": "recipe",
                    "text": f"The bundles differ in {word}: "
                    + ", ".join(f"{m.label} {getattr(m.results, key)}" for m in machines),
                }
            )
    if any(m.results.smoke for m in machines):
        out.append(
            {
                "level": "note",
                "text": (
                    "Smoke scale: sizes were shrunk to check the method; these numbers do not measure "
                    "the hardware."
                ),
            }
        )
    unpinned: dict[str, list[str]] = {}  # how: machines, one line each, a fleet too
    for m in machines:
        pinned, how = pin_of_machine(m)
        if not pinned:
            unpinned.setdefault(how, []).append(m.label)
    for how, labels in unpinned.items():
        who = labels[0] if len(labels) == 1 else f"{len(labels)} machines ({', '.join(labels)})"
        verb = "ran" if len(labels) == 1 else "each ran"
        out.append({"level": "note", "text": f"{who} {verb} {how}."})
    for m in machines:
        if m.results.status != "complete":
            out.append({"level": "note", "text": f"{m.label}: bundle status {m.results.status!r}."})
        for bench, rec in m.results.adaptive.items():
            if rec.cap_reached:
                out.append(
                    {
                        "level": "note",
                        "text": (
                            f"{m.label}: {bench} stayed noisy "
                            f"({adaptive_why(rec)}) after "
                            f"{rec.repeats} repeats, the cap."
                        ),
                    }
                )
    return out


def machine_side(m: Machine) -> Side:
    """A compared bundle's environment, its image's inventory and what its runs loaded."""
    return side(m.environment, m.data.software, (rf.result for rf in m.data.runs.values()))


def machine_check(ref: Machine, m: Machine) -> Check:
    """The one verdict on m's environment against the baseline's (kit.env.check): the page-1
    sentence, the section's list and compare.json all come from it."""
    return check(machine_side(ref), machine_side(m), ref.hardware, m.hardware)


def environment_checks(machines: list[Machine], base: int) -> list[dict[str, Any]]:
    """Each machine's full list of environment differences against the baseline (the section
    "Environment differences" and compare.json)."""
    ref = machines[base]
    return [
        {"machine": m.label, "baseline": ref.label, **machine_check(ref, m).to_dict()}
        for m in machines
        if m is not ref
    ]


def pin_of_machine(m: Machine) -> tuple[bool, str]:
    """Whether m's environment was pinned and, when not, the words for how it ran: "on the host
    runtime: the software environment was not pinned", "in an image built FROM a local base
    image, not by digest (kit-base:local)"."""
    env = m.environment
    pinned, how = env.pin() if env is not None else (m.results.pinned, None)
    if pinned:
        return True, how or "pinned"
    if env is not None and env.in_container() and how:
        base = (env.build_args or {}).get("BASE_IMAGE") or env.base_image or "unknown"
        return False, f"in an image built FROM a {how} ({base})"
    return False, f"on the {m.results.runtime} runtime: the software environment was not pinned"


def reproductions(machines: list[Machine]) -> list[str]:
    """Which bundle reruns which (`source_of`), with how the source was known where its
    manifest is no longer the one the rerun recorded."""
    lines = []
    for m in machines:
        src = m.results.reproduces
        if src is None:
            continue
        other, how = source_of(src, m, machines)
        target = other.label if other else f"{src.bundle} (not in this comparison{how})"
        known = f" ({how})" if other and how else ""
        lines.append(f"{m.label} reruns {target}, created {src.created_at}{known}.")
    return lines


def source_of(
    src: Reproduces, rerun: Machine, machines: list[Machine]
) -> tuple[Machine | None, str]:
    """The compared bundle a rerun reproduces, and the words for how it was known ("" when its
    manifest is the one recorded). `kit report` of the source re-seals its report files and so
    changes its manifest: the manifest less its report lines (kit.bundle.content_sha256), which
    reruns record, still names it. A rerun made before that was recorded names its source by its
    recipe and creation time, and says so."""
    for m in machines:
        if m is not rerun and sha256_file(m.path / MANIFEST) == src.manifest_sha256:
            return m, ""
    alike = [
        m
        for m in machines
        if m is not rerun
        and (m.results.recipe, m.results.created_at) == (src.recipe, src.created_at)
    ]
    if src.content_sha256 is None:
        if alike:
            return alike[0], (
                "matched by its recipe and creation time: its manifest has changed since the "
                "rerun recorded it, as a re-rendered report changes it, and the rerun is older "
                "than the kit's record of a bundle's content"
            )
        return None, ""
    for m in alike:
        if content_sha256(m.path) == src.content_sha256:
            return m, "its report re-rendered since: every file but the report is as recorded"
    if alike:
        return None, f": {alike[0].label} has its recipe and creation time, not its content"
    return None, ""


def _gpus(n: object) -> str:
    return f"{n} GPU" if n == 1 else f"{n} GPUs"
