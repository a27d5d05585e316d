"""What every workload folder builds on: its spec type and the checks its parameters use.

Standard library only: the worker imports the workloads' params (and may import their specs)
inside the container, where the driver's packages are absent.
"""

from __future__ import annotations

import typing
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, ClassVar

from kit.shared.metrics import CATALOG, Metric

# Pydantic reads this attribute when it validates a plain dataclass: unknown keys are errors.
STRICT = {"extra": "forbid"}


class SpecError(ValueError):
    """A workload folder's spec that cannot be built (a metric the catalog lacks, a field the
    training loop needs): the registry sets that workload aside with this one line, so every
    other command still starts, and a recipe naming it fails validation with the line."""


def check(ok: bool, field_name: str, allowed: str) -> None:
    """A parameter check whose message names its field first (the recipe loader points there)."""
    if not ok:
        raise ValueError(f"{field_name}: must be {allowed}")


def check_sizes(params: Any, names: Iterable[str]) -> None:
    """Each named size or count is at least 1, checked in the order given: the first wrong one
    is the one the message names."""
    for name in names:
        check(getattr(params, name) >= 1, name, "at least 1")


COUNT_BOUNDS = {
    "iters": 10**6,
    "steps": 10**6,
    "loop_count": 10**6,
    "pair_loop_count": 10**6,
    "warmup": 10**5,
    "warmup_iters": 10**5,
    "warmup_steps": 10**5,
    "trials": 10**4,
    "samples": 10**4,
    "pair_samples": 10**4,
    "data_batches": 10**6,
}
"""The most any workload's counts may ask for: 10**12 iterations would hold the GPUs for years
and is refused at validation (kit recipes validate, kit reproduce) with one line."""


def check_counts(params: dict[str, Any]) -> None:
    """Every count parameter within COUNT_BOUNDS (one place for every workload)."""
    for name, most in COUNT_BOUNDS.items():
        value = params.get(name)
        if isinstance(value, int) and value > most:
            check(False, name, f"at most {most:,} (got {value:,})")


def _numbers(hint: Any) -> tuple[type, ...] | None:
    """The number types a field's hint takes: (int,) for int, list[int] and int | None; (int,
    float, str) for float (YAML reads 1e3 as a string, pydantic as 1000.0; never a bool);
    None for any other field (pydantic checks those)."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if typing.get_origin(hint) is list and args == [int]:
        return (int,)
    if hint in (int, float) or (
        len(args) == 1 and args[0] in (int, float) and typing.get_origin(hint) is not list
    ):
        kind = hint if hint in (int, float) else args[0]
        return (int,) if kind is int else (int, float, str)
    return None


def check_numbers(params_class: type, params: dict[str, Any]) -> None:
    """Every integer parameter a true integer, as the recipe wrote it: `iters: true`,
    `iters: "3"` and `iters: 2.5` are refused, never coerced (YAML's true is no count), and no
    float parameter is a boolean; one place for every workload's dataclass."""
    hints = typing.get_type_hints(params_class)
    for name, value in params.items():
        allowed = _numbers(hints.get(name))
        if allowed is None or value is None:
            continue
        items = value if isinstance(value, list) else [value]
        for item in items:
            if type(item) not in allowed:  # bool is a subclass of int: type(), not isinstance
                word = "an integer" if allowed == (int,) else "a number"
                check(False, name, f"{word} (got {item!r})")


# What every training workload's SAME_FIGURE names: the parameters that change how long or how
# often a figure is measured, never the figure (kit.refs matches on every other parameter and
# names these). How many steps are warm-up and timed, and how long the window lasts at least:
# the throughput is per step of the same shape. The seed (random weights and data) is not among
# them: the values a GPU multiplies can change its power, so its clocks under a cap.
TRAINING_SAME_FIGURE = frozenset({"warmup_steps", "steps", "min_window_s"})


class TrainingParams:
    """What every training workload's params class shares besides its fields: strict keys, the
    parameters that leave the figure unchanged, and the checks of the one loop's fields.

    A mixin without fields: each params class declares the loop's fields (warmup_steps, steps,
    min_window_s, data_batches, seed) itself, with its own defaults and in its own place, since
    results and recipes record parameters in declaration order (a base dataclass's come first)."""

    __pydantic_config__ = STRICT
    SAME_FIGURE: ClassVar[frozenset[str]] = TRAINING_SAME_FIGURE

    def check_loop(self: Any) -> None:
        """The checks every training workload's steps and timed window need (one place)."""
        check(self.warmup_steps >= 0, "warmup_steps", "0 or more")
        check(self.steps >= 2, "steps", "at least 2 (a loss that changes needs two steps)")
        check(self.data_batches >= 1, "data_batches", "at least 1")
        check(0 <= self.min_window_s <= 3600, "min_window_s", "between 0 and 3600 seconds")


@dataclass(frozen=True)
class Sweep:
    """What a message-size sweep measures, in the words of the nccl-tests program it follows."""

    op: str  # "all-reduce": the words for one operation
    tool: str  # "all_reduce_perf": the nccl-tests program measured the same way
    bus_factor: str  # "2(n-1)/n": busbw = algbw x this
    size: str  # what a size means (nccl-tests' conventions differ per collective)
    check: str  # what #wrong counts
    # which of nccl-tests' two columns the timed operation is: "in-place" (one buffer is input
    # and output) or "out-of-place"; and why, with what became of the other placement
    placement: str = "out-of-place"
    placement_why: str = ""


@dataclass(frozen=True)
class Phrase:
    """One phrase of the report's "what ran" line, from the names of this workload's parameters.

    Each name is read from the run's parameters, else the recipe's; with `recorded`, first from
    the fact the run's result recorded under that name (a run in fp32 says fp32 whatever was
    asked). `words` holds one
    "{}" per value: with one, the first name present is said; with several, all of them or
    nothing. A boolean says `words` when on and `off` (None: nothing) when off; `sizes` says
    byte counts in nccl-tests' words (8 B, 1 GiB); a list is joined with "/".
    """

    names: tuple[str, ...]
    words: str = "{}"
    off: str | None = None
    sizes: bool = False
    recorded: bool = False


@dataclass(frozen=True)
class Beside:
    """One column page 1 shows beside a workload's headline: a metric, the heading it goes by
    there (page 1 holds the verdicts and one table a benchmark across an A4 page: the catalog's
    full words, seven columns of them, pushed decode's table to page 2), and optionally a second
    metric said under it with its own short words ("p90 3.146 ms" under the median time)."""

    metric: str
    heading: str
    under: str | None = None
    under_words: str = ""


@dataclass(frozen=True)
class RecordedEnergy:
    """Page 1's energy figures for a workload whose result records its joules per unit of work
    itself (decode: per output token, from NVML's energy counter at each batch size's edges),
    where a training run's come from its timed window. `metric` at the headline's conditions
    (`words`), then `under` (`under_words`): decode's largest batch, then batch 1."""

    metric: str
    unit: str  # the unit of work, singular: "output token"
    basis: str  # what was counted, over what
    words: str = ""
    under: str | None = None
    under_words: str = ""


@dataclass(frozen=True)
class Silent:
    """When a run moves no data between GPUs, read from a fact its result recorded under `name`
    (its parameter of that name else): `value` there means none moves (decode with tp 1: every
    GPU serves its own model), so peer-to-peer carries nothing and a P2P on/off comparison of
    such runs says nothing about the link. `why` says so on page 1 in the workload's words."""

    name: str
    value: Any
    why: str


TIMED_WINDOW = "the timed window"
"""What a run's recorded window holds, where a workload says nothing else (WorkloadSpec.window)."""


@dataclass(frozen=True)
class WorkloadSpec:
    """Everything the driver (recipe, report, compare, adaptive repeats) knows about one kind.

    headline: the one metric a benchmark is judged by: adaptive repeats watch it, the report's
    verdicts, headline cells and bars use it, and compare's headline table and P2P effect too.
    metrics: the catalog's entries (kit.shared.metrics) this workload reports.
    secondary: further metrics that get a verdict sentence of their own when present.
    figures: its figure kind, a name in kit.report.kinds.KINDS, which says what the report and
    compare draw and print for it ("sweep", "training", "matrix", "ceiling").
    ran: what the report's "what ran" line says of its runs, in order (Phrase).
    page1: columns page 1 shows beside the headline, per variant (Beside; decode: the batch-1
    time per output token and tokens/s, which the largest-batch headline does not say).
    silent: when its runs move no data between GPUs (Silent): no P2P verdict is given for them.
    energy: page 1's energy figures where the workload records joules per unit itself
    (RecordedEnergy; training's come from the timed window, kit.report.facts.efficiency).
    window: what the window its runs record (data.window_monotonic_s) holds, in words: page 1
    reads power and clocks over it (decode's spans the whole batch sweep, warm-ups included).
    method: the workload's paragraph on the report's Method page, a Jinja template that sees `a`
    (facts read from the runs: label, params, world, backend, timing, bus_factor, ...) and `s`
    (this spec).
    """

    kind: str
    label: str
    description: str
    params: type
    headline: str
    figures: str  # a figure kind's name (kit.report.kinds)
    method: str
    metrics: tuple[Metric, ...] = ()
    secondary: tuple[str, ...] = ()
    sweep: Sweep | None = None
    ran: tuple[Phrase, ...] = ()
    page1: tuple[Beside, ...] = ()
    silent: Silent | None = None
    energy: RecordedEnergy | None = None
    window: str = TIMED_WINDOW
    smoke_model: bool = False  # a smoke run builds a smaller model than the label names

    @property
    def worker(self) -> str:
        """The module whose run(ctx, params) the worker calls: the kind's folder's worker.py."""
        return f"kit.workloads.{self.kind}.worker"

    def metric(self, name: str) -> Metric | None:
        return next((m for m in self.metrics if m.name == name), None)


def metrics(*names: str) -> tuple[Metric, ...]:
    """A workload's metrics, by their names in the catalog."""
    unknown = [n for n in names if n not in CATALOG]
    if unknown:
        raise SpecError(
            f"no metric named {', '.join(map(repr, unknown))} in the catalog: add an entry to "
            "kit/shared/metrics.py (CATALOG), or correct the name"
        )
    return tuple(CATALOG[n] for n in names)
