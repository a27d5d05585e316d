"""The bundles a comparison reads: each loaded and checked, named by its hardware and the user's
label, and which of them ran on one machine (what the comparison says beside its numbers is
kit.report.compare_notes).

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

from kit.bundle.intake import receive
from kit.inventory.topology import first_pair_link
from kit.io.errors import InputError
from kit.model import BundleData, Environment, Hardware, Results
from kit.model.hardware import Host
from kit.report import analysis
from kit.report.facts.price import Price, parse_price
from kit.report.render import machine_line

MAX_LABEL = 40


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


def gpu_uuids(hardware: Hardware) -> frozenset[str]:
    """The GPUs' UUIDs hardware.json lists: what names one physical machine (empty: not known)."""
    return frozenset(g.uuid for g in hardware.gpus if g.uuid)


def same_machine(a: Hardware, b: Hardware) -> bool:
    """Two bundles ran on one machine: the same GPU UUIDs, every one (none known: not said)."""
    return bool(gpu_uuids(a)) and gpu_uuids(a) == gpu_uuids(b)


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

    @property
    def gpu_models(self) -> frozenset[str]:
        """The GPU models of the box (one, on a machine of one kind)."""
        return frozenset(g.name for g in self.hardware.gpus if g.name)

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
    """User label with the hardware, else the hardware; where two still read alike, the
    position: "bundle N" where they are one machine (the same GPU UUIDs), else "[N]"."""
    for m in machines:
        m.label = f"{m.user_label} ({m.hardware_label})" if m.user_label else m.hardware_label
    labels = [m.label for m in machines]
    for m, label in zip(machines, labels, strict=True):
        alike = [
            o for o, other in zip(machines, labels, strict=True) if other == label and o is not m
        ]
        if alike:
            one = any(same_machine(m.hardware, o.hardware) for o in alike)
            m.label = f"{label}, bundle {m.index}" if one else f"{label} [{m.index}]"


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
        data = receive(
            Path(path),
            "compare only untouched bundles",
            allowed_signers,
            allow_unsigned,
            read_broken,
        )
        machines.append(Machine(i, Path(path), data, labels.get(i - 1)))
    _name(machines)
    return machines


def pick_baseline(spec: str | int | None, machines: list[Machine]) -> int:
    """The 0-based index of the baseline: a 1-based position or one of the bundle paths."""
    if spec is None or spec == "":
        return 0
    return _position(str(spec), [m.path for m in machines], "--baseline")
