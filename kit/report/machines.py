"""The bundles a comparison reads, and what it says before any number: hardware, software,
recipe and scale differences, and which bundle reruns which.

Every bundle is read with the typed loader (kit.model.load_bundle: a malformed file is one line)
and must match its manifest: a comparison of edited numbers would be worthless. Machines are
named by their hardware ("2x H200 NV18") and an optional label the user gives.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from kit.bundle import MANIFEST, sha256_file
from kit.bundle.intake import receive
from kit.envdiff import environment_diff, environment_versions
from kit.errors import InputError
from kit.facts.price import Price, parse_price
from kit.inventory.topology import first_pair_link
from kit.model import BundleData, Environment, Hardware, Results, recipe_differences
from kit.model.hardware import Host
from kit.report import analysis
from kit.report.render import machine_line

MAX_LABEL = 40
REPEAT_FIELDS = ("repeats", "max_repeats", "cv_threshold", "timeout_s")
"""Recipe fields that change how many runs there are or how long one may take, not what runs."""


def short_hardware(hardware: Hardware) -> str:
    """The machine in a few words: "2x H200 NV18" (GPU model and count, link of GPU0-GPU1)."""
    if not hardware.gpus:
        host = hardware.host or Host()
        cores = host.logical_cpus or host.cpu_count
        return f"CPU only, {cores} CPUs" if cores else "CPU only"
    names = [str(g.name or "GPU").removeprefix("NVIDIA ") for g in hardware.gpus]
    model = ", ".join(f"{names.count(n)}x {n}" for n in dict.fromkeys(names))
    link = first_pair_link(hardware)
    return f"{model} {link}" if link and link != "X" else model


@dataclass
class Machine:
    """One bundle as a column of the comparison."""

    index: int  # 1-based, as the user counts on the command line
    path: Path
    data: BundleData
    user_label: str | None = None
    label: str = ""  # set by load_machines: hardware, user label, position if still ambiguous

    @property
    def results(self) -> Results:
        return self.data.results

    @property
    def hardware(self) -> Hardware:
        """hardware.json; an inventory that knows nothing where the bundle has none."""
        return self.data.hardware or Hardware()

    @property
    def environment(self) -> Environment | None:
        return self.data.environment

    @property
    def hostname(self) -> str:
        return (self.hardware.host and self.hardware.host.hostname) or "unknown host"

    @property
    def hardware_label(self) -> str:
        return short_hardware(self.hardware)

    @property
    def summary(self) -> str:
        return machine_line(self.hardware)

    @property
    def gpus_total(self) -> int:
        return len(self.hardware.gpus)

    def gpus_used(self, benchmark: str | None = None) -> int:
        """GPUs (ranks) the runs used: the largest world size of the benchmark's runs."""
        sizes = [
            r.world_size or 0
            for r in self.results.runs
            if benchmark is None or r.benchmark == benchmark
        ]
        return max(sizes, default=0)

    def sharding(self, benchmark: str) -> str | None:
        """ "FSDP" when the benchmark's runs record a parallelism that shards the model (its
        words, from the run's data), else None: memory per GPU then falls with the GPU count."""
        for r in self.results.runs:
            words = str(getattr(r.data, "parallelism", None) or "")  # the workload's own field
            if r.benchmark == benchmark and "shard" in words.lower():
                found = re.match(r"[A-Za-z]+", words)
                return found.group(0) if found else "sharding"
        return None

    @cached_property
    def benches(self) -> list[analysis.Benchmark]:
        """The bundle read the way its report reads it (one reader of results.json)."""
        return analysis.build_benchmarks(self.results, self.data.recipe)


def parse_labels(specs: list[str] | None, paths: list[Path]) -> dict[int, str]:
    """`POSITION=TEXT` or `BUNDLE=TEXT` (repeatable) -> {0-based index: text}; one-line errors."""
    out: dict[int, str] = {}
    for spec in specs or []:
        key, sep, text = spec.partition("=")
        text = " ".join(text.split())
        if not sep or not key or not text:
            raise InputError(
                f"--label {spec!r}: expected POSITION=TEXT or BUNDLE=TEXT, e.g. 2=vendor-x"
            )
        if len(text) > MAX_LABEL or not re.fullmatch(r"[\w .,:+()/@#-]+", text):
            raise InputError(
                f"--label {spec!r}: at most {MAX_LABEL} letters, digits, spaces and .,:+()/@#-_"
            )
        index = _position(key, paths, "--label")
        if index in out:
            raise InputError(f"--label: bundle {index + 1} is labelled twice")
        same = next((i for i, given in out.items() if given == text), None)
        if same is not None:  # labels name the columns (and --price KEY): two alike say neither
            raise InputError(
                f"--label {spec!r}: bundle {same + 1} is labelled {text!r} already; give each "
                "machine its own label"
            )
        out[index] = text
    return out


def parse_prices(
    specs: list[str] | None,
    paths: list[Path],
    labels: dict[int, str] | None = None,
    source: str | None = None,
) -> dict[int, Price]:
    """`--price KEY=PRICE` (repeatable), KEY a position, a bundle or a --label text, PRICE one
    GPU for one hour as --price-per-gpu-hour takes it -> {0-based index: Price}. Every price in
    one currency: a cost in USD beside one in EUR is no comparison."""
    out: dict[int, Price] = {}
    by_label = {text: i for i, text in (labels or {}).items()}
    for spec in specs or []:
        key, sep, value = spec.partition("=")
        if not sep or not key or not value:
            raise InputError(
                f"--price {spec!r}: expected POSITION=PRICE, BUNDLE=PRICE or LABEL=PRICE, "
                "e.g. 2=3.50USD (one GPU for one hour)"
            )
        index = by_label[key] if key in by_label else _position(key, paths, "--price")
        if index in out:
            raise InputError(f"--price: bundle {index + 1} is priced twice")
        try:
            out[index] = parse_price(value, source)
        except InputError as e:
            raise InputError(f"--price {spec!r}: {str(e).split(': ', 1)[-1]}") from None
    currencies = {p.currency for p in out.values()}
    if len(currencies) > 1:
        named = ", ".join(f"{i + 1}: {p.currency or 'none'}" for i, p in sorted(out.items()))
        raise InputError(f"--price: one currency for every machine ({named})")
    return out


def _position(key: str, paths: list[Path], option: str) -> int:
    if key.isdigit():
        n = int(key)
        if not 1 <= n <= len(paths):
            raise InputError(f"{option} {n}: allowed: 1 to {len(paths)} (a bundle's position)")
        return n - 1
    wanted = Path(key).resolve()
    for i, path in enumerate(paths):
        if Path(path).resolve() == wanted:
            return i
    raise InputError(
        f"{option} {key}: not one of the compared bundles; give its position (1 to "
        f"{len(paths)}) or one of: {', '.join(str(p) for p in paths)}"
    )


def _name(machines: list[Machine]) -> None:
    """User label with the hardware, else the hardware; the position where two still read alike."""
    for m in machines:
        m.label = f"{m.user_label} ({m.hardware_label})" if m.user_label else m.hardware_label
    labels = [m.label for m in machines]
    for m in machines:
        if labels.count(m.label) > 1:
            m.label = f"{m.label} [{m.index}]"


def refuse_same_bundle(paths: list[Path]) -> None:
    """One folder named twice (the same path, another spelling of it, a link to it) is one
    machine compared with itself: every ratio 1.00 and a sentence with nothing in it."""
    seen: dict[tuple[int, int], Path] = {}
    for path in paths:
        try:
            st = os.stat(path)
        except OSError:
            continue  # the intake names what is wrong with it
        first = seen.setdefault((st.st_dev, st.st_ino), Path(path))
        if first != Path(path) or paths.count(path) > 1:
            raise InputError(
                f"{path}: the same bundle as {first}; compare a bundle with another one"
            )


def load_machines(
    paths: list[Path],
    labels: dict[int, str] | None = None,
    allowed_signers: Path | None = None,
    allow_unsigned: bool = False,
    read_broken: bool = False,
) -> list[Machine]:
    """Each bundle, refused unless it matches its manifest, is complete and (with an
    allowed-signers file) is signed by a listed signer (kit.bundle.intake), read by the typed loader."""
    if len(paths) < 2:
        raise InputError("kit compare needs at least two bundles")
    refuse_same_bundle(paths)
    labels = labels or {}
    machines = []
    for i, path in enumerate(paths, 1):
        data = receive(Path(path), "compare only untouched bundles", allowed_signers,
                       allow_unsigned, read_broken)  # fmt: skip
        machines.append(Machine(i, Path(path), data, labels.get(i - 1)))
    _name(machines)
    return machines


def pick_baseline(spec: str | int | None, machines: list[Machine]) -> int:
    """The 0-based index of the baseline: a 1-based position or one of the bundle paths."""
    if spec is None or spec == "":
        return 0
    return _position(str(spec), [m.path for m in machines], "--baseline")


# --- hardware, environment, warnings -------------------------------------------------------------


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


def recipe_notes(ref: Machine, m: Machine) -> list[dict[str, str]]:
    """How m's recipe differs from the baseline's (kit.model.recipe_differences, defaults filled):
    the GPU count (a scale difference the per-GPU figures answer), repeat counts (the width of
    the intervals, not the measurement), and anything else (not like for like). [] when equal."""
    diffs = recipe_differences(ref.data.recipe, m.data.recipe)
    scale = [d for d in diffs if d == "gpus"]
    repeats = [d for d in diffs if d in REPEAT_FIELDS]
    other = [d for d in diffs if d not in scale and d not in repeats]
    out = []
    if other:
        out.append({"level": "recipe", "text": (
            f"Different recipes: {m.label} ran a recipe that differs from the baseline's in "
            f"{', '.join(other)}; its numbers are not like for like.")})  # fmt: skip
    if scale:
        out.append({"level": "scale", "text": (
            f"Different scale: {m.label} ran the same workloads on {m.data.recipe.gpus} GPUs, the "
            f"baseline {ref.label} on {ref.data.recipe.gpus}.")})  # fmt: skip
    if repeats:
        out.append({"level": "note", "text": (
            f"{m.label} and the baseline differ in {', '.join(repeats)}: the intervals differ in "
            "width; each run measured the same way.")})  # fmt: skip
    return out


def _release(version: object) -> str:
    """A version without its local build tag: "0.26.0+cu130" -> "0.26.0"."""
    return str(version).partition("+")[0]


def build_last(diffs: list[Any]) -> list[Any]:
    """Differences in release first, those only in a build tag (+cu130) last: a box that leads
    with "0.26.0+cu130 vs 0.26.0" hides what really differs behind what hardly does."""
    return sorted(diffs, key=lambda d: _release(d.new) == _release(d.old))


def diff_words(field: str, new: object, old: object) -> str:
    """ "torch 2.14.1 vs 2.11.0", or "torchvision 0.26.0 on both, build +cu130 vs none"."""
    if new is not None and old is not None and _release(new) == _release(old):
        tag_new = str(new).partition("+")[2] or "none"
        tag_old = str(old).partition("+")[2] or "none"
        return f"{field} {_release(new)} on both, build {tag_new} vs {tag_old}"
    return f"{field} {new} vs {old}"


def warnings_for(machines: list[Machine], base: int) -> list[dict[str, str]]:
    """What the first page must say before any number: software differs, scale, edits, failures."""
    out: list[dict[str, str]] = []
    ref = machines[base]
    for m in machines:
        if m is ref:
            continue
        diffs = environment_diff(ref.environment, m.environment, ref.hardware, m.hardware)
        if diffs:
            what = "; ".join(diff_words(d.field, d.new, d.old) for d in build_last(diffs))
            out.append(
                {
                    "level": "env",
                    "text": (
                        f"Different environments: {m.label} differs from the baseline {ref.label} in "
                        f"{what}. These results compare software as well as hardware."
                    ),
                }
            )
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
    unpinned: dict[str, list[str]] = {}  # runtime -> machines: one line each, a fleet too
    for m in machines:
        if not m.results.pinned:
            unpinned.setdefault(m.results.runtime, []).append(m.label)
    for runtime, labels in unpinned.items():
        who = labels[0] if len(labels) == 1 else f"{len(labels)} machines ({', '.join(labels)})"
        verb = "ran" if len(labels) == 1 else "each ran"
        out.append({"level": "note", "text": f"{who} {verb} on the {runtime} runtime: the software "
                    "environment was not pinned."})  # fmt: skip
    for m in machines:
        if m.results.status != "complete":
            out.append({"level": "note", "text": f"{m.label}: bundle status {m.results.status!r}."})
        for bench, rec in m.results.adaptive.items():
            if rec.cap_reached:
                out.append(
                    {
                        "level": "note",
                        "text": (
                            f"{m.label}: {bench} stayed noisy ({rec.reason}) after "
                            f"{rec.repeats} repeats, the cap."
                        ),
                    }
                )
    return out


def reproductions(machines: list[Machine]) -> list[str]:
    """Which bundle reruns which, checked by the recorded manifest hash."""
    digests = {sha256_file(m.path / MANIFEST): m for m in machines}
    lines = []
    for m in machines:
        src = m.results.reproduces
        if src is None:
            continue
        other = digests.get(src.manifest_sha256 or "")
        target = other.label if other else f"{src.bundle} (not in this comparison)"
        lines.append(f"{m.label} reruns {target}, created {src.created_at}.")
    return lines
