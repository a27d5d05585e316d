"""The report's "what ran" line of a benchmark, in the words its workload gives
(WorkloadSpec.ran): the report names no workload's parameter."""

from __future__ import annotations

from typing import Any

from kit.refs.nccl_tests import size_words
from kit.report.analysis.model import Benchmark
from kit.workloads.base import Phrase


def recorded(data: Any, name: str) -> Any:
    """A fact the run's result recorded under `name` (typed or a workload's own), else None."""
    if data is None:
        return None
    return getattr(data, name) if name in type(data).model_fields else data.extra(name)


def _phrase(phrase: Phrase, values: dict[str, Any]) -> str | None:
    """One phrase of the "what ran" line from the values it names (Phrase says how)."""
    present = [n for n in phrase.names if values.get(n) not in (None, "")]
    if phrase.words.count("{}") > 1:
        if len(present) < len(phrase.names):
            return None
        chosen = [values[n] for n in phrase.names]
    elif present:
        chosen = [values[present[0]]]
    else:
        return None
    if isinstance(chosen[0], bool):
        return phrase.words if chosen[0] else phrase.off
    shown = [
        size_words(v)
        if phrase.sizes
        else "/".join(map(str, v))
        if isinstance(v, list | tuple)
        else v
        for v in chosen
    ]
    return phrase.words.format(*shown)


def ran_line(bench: Benchmark, smoke: bool = False) -> str:
    """What ran, in the words its workload gives (WorkloadSpec.ran): each value from the first
    finished run's parameters (a Phrase marked `recorded`: its recorded fact first), else the
    recipe's; e.g. "32 layers, 4096
    wide, sequence 4096, micro batch 1, LoRA r8, bf16 on 2 GPUs"."""
    ok = [r for v in bench.variants for r in v.ok]
    data = ok[0].data if ok else None
    params = {**bench.params, **((data.params if data else None) or {})}
    phrases = bench.spec.ran if bench.spec is not None else ()
    values = {
        n: r if p.recorded and (r := recorded(data, n)) is not None else params.get(n)
        for p in phrases
        for n in p.names
    }
    parts = [words for p in phrases if (words := _phrase(p, values))]
    world = sorted({r.world_size for r in ok if r.world_size})
    on = "processes" if ok and ok[0].device == "cpu" else "GPUs"
    if world == [1]:
        on = on.removesuffix("es" if on == "processes" else "s")
    where = f" on {'/'.join(map(str, world))} {on}" if world else ""
    text = ", ".join(parts) + where if parts else "parameters not recorded" + where
    return text


def alone(benches: list[Benchmark]) -> str | None:
    """Why page 1's interconnect section compares nothing when every finished run was one
    process ("each run used one GPU"): nothing crossed a link between GPUs, which "only one
    variant was run" did not say (a one-GPU bundle read as if a variant had been left out).
    None when any finished run had more processes, or none finished."""
    ok = [r for b in benches for v in b.variants for r in v.ok]
    if not ok or any(r.world_size != 1 for r in ok):
        return None
    return "each run used one GPU" if ok[0].device == "cuda" else "each run was one process"


NOTES_SHOWN = 20  # a benchmark's distinct run notes the report lists; the rest it counts
NOTE_CHARS = 600  # a note's characters the report prints


def run_notes(bench: Benchmark) -> list[tuple[str, str]]:
    """What the benchmark's finished runs noted about how they ran (each result's `notes`: the
    kernels a step ran, a fallback, a parameter a variant could not honour), each note once in
    the order first said, with who said it where not every finished run did: the variants whose
    every finished run said it, else the runs by id."""
    ok = [r for v in bench.variants for r in v.ok]
    said: dict[str, list[str]] = {}
    for r in ok:
        for note in r.notes:
            ids = said.setdefault(note, [])
            if r.run_id not in ids:  # a run that said it twice said it once
                ids.append(r.run_id)
    out = []
    shown = list(said.items())[:NOTES_SHOWN]
    for note, ids in shown:
        who = ""
        if len(ids) < len(ok):
            whole = [
                v.name for v in bench.variants if v.ok and {r.run_id for r in v.ok} <= set(ids)
            ]
            covered = {r.run_id for v in bench.variants if v.name in whole for r in v.ok}
            who = ", ".join(whole) if covered == set(ids) else ", ".join(ids)
        if len(note) > NOTE_CHARS:
            note = note[:NOTE_CHARS] + " [cut: the whole note is in the run's result.json]"
        out.append((note, who))
    if len(said) > NOTES_SHOWN:
        rest = len(said) - NOTES_SHOWN
        out.append((f"and {rest} more note{'s' if rest > 1 else ''}, in the runs' result.json", ""))
    return out
