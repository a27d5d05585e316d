"""The run engine of `kit reproduce`: plan, launch each run in a fresh process, keep every result.

Whatever happens after a run finished (a later crash, a timeout, Ctrl-C, SIGTERM, a report that
fails to render), its result is already on disk: results.json is rewritten after each run and the
bundle is always sealed with its manifest before the command exits.
"""

from __future__ import annotations

import shlex
import signal
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kit.bundle import Bundle, default_bundle_dir, now_iso
from kit.inventory import measure
from kit.io.errors import KitError
from kit.io.outputs import check_bundle_dir
from kit.model import PreflightFinding, RunResult
from kit.recipe import Recipe
from kit.run import registry
from kit.run.adaptive import adaptive_record
from kit.run.devices import detect_gpus, every_gpu, resolve_device
from kit.run.memory import check_cpu_sweeps, check_gpu_sweeps
from kit.run.plan import RunSpec, plan, plan_repeat
from kit.run.preflight import (
    PreflightOptions,
    check_allowances,
    check_recipe,
    raise_if_fatal,
)
from kit.run.results import (
    close_bundle,
    console,
    open_bundle,
    record_container,
    result_of,
    write_specs,
)
from kit.runtime.base import LaunchRequest, RunOutcome, Runtime, RuntimeRequest
from kit.shared import files, stop
from kit.shared import scratch as launch_dir
from kit.shared.metrics import figure
from kit.stats.spread import AdaptiveRepeats
from kit.workloads.registry import headline_metric


@dataclass(frozen=True)
class Options:
    device: str = "auto"  # auto | cuda | cpu (kit.runtime.base.DEVICES)
    smoke: bool | None = None  # None: smoke on the CPU, full size on GPUs
    repeats: int | None = None
    out: Path | None = None
    runtime: str = "auto"  # a registry CHOICE; auto: apptainer for --apptainer, docker for GPU runs
    # when a daemon answers, host otherwise
    command: str = ""
    environment: str | None = None  # docker runtime: overrides the recipe's environment
    base_image: str | None = None  # docker runtime: overrides the Dockerfile's BASE_IMAGE
    image_archive: Path | None = None  # docker runtime: run the image of a `kit export` archive
    strict: bool = False  # preflight warnings are fatal too
    allow: tuple[str, ...] = ()  # preflight checks that may fail without stopping the run
    # a rerun (kit.run.rerun) builds its own Options with this set: the bundle it reproduces
    reproduces: dict[str, Any] | None = None
    nodes: tuple[str, ...] = ()  # --nodes: Docker daemon URLs, one per node (multi-node runs)
    apptainer: Path | None = None  # --apptainer: the SIF the apptainer runtime runs


def _headline(result: RunResult) -> str:
    """The run's headline metric for the progress line: the one its workload is judged by, else
    (not measured here: bf16 on a CPU) the first it recorded, as the report falls back."""
    name = headline_metric(result.kind)
    if name not in result.metrics:
        name = next(iter(result.metrics), name)
    m = result.metrics.get(name)
    if not m:
        return ""
    return f"{name} {figure(m.value)} {m.unit}"


_Terminated = stop.Terminated


def _on_sigterm(signum: int, frame: Any) -> None:
    stop.note(signum)  # kept even where the exception below is swallowed (kit.shared.stop)
    raise _Terminated(signum)


def _install() -> dict[int, Any]:
    """The run's handlers (each records its signal before raising); the ones they replace."""
    previous = {
        sig: signal.signal(sig, _on_sigterm)
        for sig in STOP_SIGNALS
        # a SIGHUP ignored when the kit started (nohup) stays ignored: the user asked the run
        # to outlive the terminal, and the report's rendering would ignore it anyway
        if not (sig == signal.SIGHUP and signal.getsignal(sig) == signal.SIG_IGN)
    }
    # Ctrl-C, kept as SIGTERM is (stop_code gives 130 either way), unless ignored (nohup, &)
    if signal.getsignal(signal.SIGINT) in (signal.default_int_handler, stop.interrupt):
        previous[signal.SIGINT] = signal.signal(signal.SIGINT, stop.interrupt)
    return previous


def _restore(previous: dict[int, Any]) -> None:
    for sig, handler in previous.items():
        signal.signal(sig, handler)


def stop_code(exc: BaseException) -> int:
    """The exit code of a stop: 128 + the signal that asked for it (SIGINT 130, SIGTERM 143)."""
    return 128 + (exc.signum if isinstance(exc, _Terminated) else signal.SIGINT)


# SIGHUP (the terminal closed, the ssh session dropped) ends the run like SIGTERM: runs stopped,
# containers removed, the bundle sealed with what finished.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


@dataclass
class Choice:
    """The runtime a run will use, chosen and checked (every refusal that needs no work), with
    the notes to print once nothing can refuse any more."""

    name: str
    request: RuntimeRequest
    notes: list[str]


def choose_runtime(name: str, recipe: Recipe, options: Options, device: str = "cpu") -> Choice:
    """The runtime the user asked for and its request, refused now if it cannot be (an option
    it cannot take, no daemon answering): nothing is printed or built here."""
    request = RuntimeRequest(
        environment=options.environment or recipe.environment,
        device=device,
        gpus=recipe.gpus,
        base_image=options.base_image,
        image_archive=options.image_archive,
        nodes=registry.nodes(recipe.nodes, options.nodes),
        apptainer=options.apptainer,
    )
    chosen, note = registry.choose(name, request)
    request, why = registry.fit_environment(  # refuses --env where no image is built: first
        chosen, request, recipe.environment, options.environment
    )
    registry.check_ready(chosen, request)
    return Choice(chosen, request, [n for n in (note, why) if n])


def make_runtime(
    name: str, recipe: Recipe, options: Options, device: str = "cpu", choice: Choice | None = None
) -> Runtime:
    """The runtime the user asked for, from the registry; docker builds (or reuses) its image.
    `choice`: choose_runtime's, made earlier (before any notice), else made here."""
    choice = choice or choose_runtime(name, recipe, options, device)
    for note in choice.notes:
        console.print(f"kit: {note}")
    return registry.prepare(choice.name, choice.request)


@dataclass
class Prepared:
    """Everything `execute` needs: the plan, the runtime and the bundle it writes into."""

    recipe: Recipe
    device: str
    smoke: bool
    runs: list[RunSpec]
    runtime: Runtime
    bundle: Bundle
    policy: AdaptiveRepeats


@dataclass
class Execution:
    """How the runs ended: interrupted (Ctrl-C, SIGTERM), the exit code, an engine fault."""

    interrupted: bool = False
    code: int = 0
    fault: Exception | None = None


def prepare(
    recipe: Recipe, options: Options, runtime: Runtime | None = None, device: str | None = None
) -> Prepared:
    """Device, plan, inventory, preflight (a fatal finding stops here), runtime, and the bundle
    with its header, hardware.json and environment.json. `device`: already resolved (a rerun
    resolves it once, to prepare its runtime); else resolved here from options.device."""
    if options.out is not None:  # before any work: the folder as the user named it (no link)
        check_bundle_dir(options.out)
    nodes = registry.nodes(recipe.nodes, options.nodes)
    if device is None:
        device = (
            resolve_device(options.device)
            if nodes is None
            else registry.device_of_nodes(options.device, nodes)
        )
    check_allowances(options.allow, device, nodes is not None)
    recipe = every_gpu(recipe, device, nodes is not None)  # `gpus: all` counted, once
    # the runtime's refusals (no daemon answers) before the first notice (preflight's)
    choice = choose_runtime(options.runtime, recipe, options, device) if runtime is None else None
    smoke = options.smoke if options.smoke is not None else device == "cpu"
    planned = options.repeats or (min(recipe.repeats, 2) if smoke else recipe.repeats)
    runs = plan(recipe, device, smoke, planned)
    if nodes is None:  # a message no rank on this machine can hold: before any work
        check_cpu_sweeps(runs, device)
    hardware = measure()
    if nodes is None:  # the nodes' GPUs are not this machine's
        check_gpu_sweeps(runs, device, [g.memory_total_bytes for g in hardware.gpus])
    # the driver's machine is not one of the nodes: each node's inventory goes to hardware.json
    checks = PreflightOptions(strict=options.strict, allow=frozenset(options.allow))
    findings = check_recipe(recipe, device, hardware, checks) if nodes is None else []
    for finding in findings:
        console.print(
            f"kit: preflight {finding['level']}: {finding['check']}: {finding['message']}"
        )
    raise_if_fatal(findings)
    if runtime is None:
        runtime = make_runtime(options.runtime, recipe, options, device, choice)
    # absolute: the workers run with the run directory as their working directory
    out = (options.out or default_bundle_dir(Path("reports"), recipe.name)).resolve()
    # pinned as environment.json says (an image FROM a local base is not: kit.model.pin_of)
    pinned = bool((runtime.environment or {}).get("pinned", runtime.pinned))
    bundle = open_bundle(
        out,
        recipe,
        device,
        runtime.name,
        pinned,
        smoke,
        planned,
        options.command or "kit reproduce",
        len(runs),
        options.reproduces,
    )
    # the machine first: a bundle is never without it, whenever a stop comes (kit seal needs it)
    if runtime.inventory:
        hardware.nodes = runtime.inventory
    bundle.write_json(files.HARDWARE, hardware.dump(as_written=True))
    bundle.results.preflight = [PreflightFinding.model_validate(f) for f in findings]
    bundle.write_json(files.ENVIRONMENT, runtime.environment)
    software = getattr(runtime, "software", None)  # what its image holds, where it has one
    if software:
        bundle.write_json(files.SOFTWARE, software)
    if swept := launch_dir.sweep():  # what drivers killed outright (SIGKILL) left in TMPDIR
        console.print(f"kit: removed {swept} folder(s) of killed kit runs from TMPDIR")
    adaptive = (recipe.max_repeats or 0) > recipe.repeats  # off unless the recipe asks
    cap = max(planned, recipe.max_repeats or 0) if adaptive else planned
    console.print(
        f"kit: {recipe.name}: {len(runs)} runs on {device} ({runtime.name} runtime"
        f"{', smoke scale' if smoke else ''}) -> {bundle.path}"
    )
    policy = AdaptiveRepeats(planned, cap, recipe.cv_threshold)
    return Prepared(recipe, device, smoke, runs, runtime, bundle, policy)


def _launch(p: Prepared, spec: RunSpec) -> tuple[RunOutcome, BaseException | None]:
    """One run through the runtime; a runtime fault is this run's failure. (outcome, the stop:
    Ctrl-C or a stop signal that came during the run, re-raised once the run is recorded)."""
    run_dir = p.bundle.run_dir(spec.run_id)
    log_path = p.bundle.log_path(spec.run_id)
    try:
        outcome = p.runtime.run(
            LaunchRequest(
                run_dir, spec.nproc, spec.env, log_path, spec.timeout_s, spec.gpu_ids, p.device
            )
        )
    except (KeyboardInterrupt, _Terminated) as halt:
        return RunOutcome(None, False, True, 0.0, [], "interrupted"), halt
    except KitError as exc:  # the runtime's own one-line reason: this run failed
        return RunOutcome(None, False, False, 0.0, [], str(exc)), None
    except Exception as exc:  # a runtime fault (daemon gone, ...): this run failed
        why = f"runtime error: {type(exc).__name__}: {exc}"
        return RunOutcome(None, False, False, 0.0, [], why), None
    return outcome, None


def execute(
    p: Prepared, state: Execution, on_result: Callable[[RunResult], None] | None = None
) -> None:
    """Every planned run in order, results.json rewritten after each; after a benchmark's last
    planned repeat, adaptive repeats may add whole repeats. Ctrl-C or SIGTERM stop it (state)."""
    bundle = p.bundle
    previous = _install()
    try:
        queue, i = deque(p.runs), 0
        while queue:
            spec = queue.popleft()
            i += 1
            stop.check()  # a signal whose exception a library swallowed between runs
            write_specs(bundle, [spec])
            console.print(f"[{i}/{i + len(queue)}] {spec.run_id} ...", end=" ")
            outcome, stopped = _launch(p, spec)
            if stopped is None and stop.pending is not None:
                stopped = _Terminated(stop.pending)
            run_dir, log_path = bundle.run_dir(spec.run_id), bundle.log_path(spec.run_id)
            result = result_of(spec, run_dir, outcome, log_path)
            bundle.add_run(result)
            if on_result:
                on_result(result)
            if result.status == "ok":
                console.print(f"ok {result.wall_s or 0:.1f} s {_headline(result)}")
            else:
                state.code = 1
                # an error may hold [brackets] (gloo's "[/path/pair.cc:553]"): not rich markup
                console.print(f"{result.status.upper()}: {result.error}", markup=False)
            if stopped is not None:
                raise stopped
            if not queue or queue[0].benchmark != spec.benchmark:  # its last planned repeat
                record = adaptive_record(bundle.results.runs, spec.benchmark, p.policy)
                # assigned, not updated in place: the dump writes what was set
                bundle.results.adaptive = {**bundle.results.adaptive, spec.benchmark: record}
                bundle.save()
                if record.more:
                    extra = plan_repeat(p.recipe, spec.benchmark, record.repeats, p.device, p.smoke)
                    console.print(f"kit: {spec.benchmark}: {record.reason}; one more repeat")
                    queue.extendleft(reversed(extra))
        stop.check()
    except (KeyboardInterrupt, _Terminated) as halt:
        state.interrupted, state.code = True, stop_code(halt)
        by = signal.Signals(state.code - 128).name
        console.print(f"kit: interrupted by {by}; writing the bundle with what finished")
    except Exception as exc:  # the engine itself: never a `complete` bundle, then one line
        state.fault, state.code = exc, 1
        bundle.results.error = f"{type(exc).__name__}: {exc}"
        console.print(f"kit: run stopped by {type(exc).__name__}: {exc}", markup=False)
    finally:
        _restore(previous)


def finalize(
    p: Prepared, state: Execution, after_runs: Callable[[Bundle], None] | None = None
) -> str:
    """The bundle's status from its runs, the container's versions from the first finished run,
    the `after_runs` hook, then sealed (report and manifest) and the runtime closed. The status.

    A stop signal (a second Ctrl-C) while the environment is recorded waits for the seal: what
    finished is sealed as interrupted, then the stop goes on to the command."""
    bundle = p.bundle
    halt: BaseException | None = None
    try:
        try:
            with stop.held():  # environment.json written whole; a stop then waits for the seal
                record_container(bundle)
            if after_runs is not None:
                try:  # a malformed record must not leave the bundle unsealed
                    after_runs(bundle)
                except Exception as exc:
                    console.print(f"kit: warning: environment not compared: {exc}", markup=False)
        except BaseException as exc:
            if not (isinstance(exc, KeyboardInterrupt) or hasattr(exc, "signum")):
                raise
            halt = exc
        # a stop whose exception was swallowed after the runs still makes the bundle interrupted
        interrupted = state.interrupted or halt is not None or stop.pending is not None
        status = close_bundle(bundle, len(p.runs), interrupted, state.fault is not None)
        if halt is not None:
            raise halt
        return status
    finally:
        p.runtime.close()


def run_recipe(
    recipe: Recipe,
    options: Options,
    on_result: Callable[[RunResult], None] | None = None,
    after_runs: Callable[[Bundle], None] | None = None,
    runtime: Runtime | None = None,
    device: str | None = None,
) -> tuple[Bundle, int]:
    """Run every planned run and write the bundle (prepare, execute, finalize). Returns the bundle
    and the exit code.

    `on_result` sees each run's result as it lands; `after_runs` sees the bundle once the runs
    ended (also when interrupted), before it is sealed: the hook a rerun checks its environment in.
    `runtime`: one already prepared (a rerun's, from the recorded environment); else the
    registry prepares the one the options ask for; `device`: the device it was prepared for.
    """
    previous = _install()  # a stop from here on is recorded (kit.shared.stop), never lost
    p: Prepared | None = None
    state = Execution()
    try:
        p = prepare(recipe, options, runtime, device)
        execute(p, state, on_result)
    finally:
        _restore(previous)  # while sealing: the command's own (one line, 128 + the signal)
        if p is not None:  # a stop between prepare and the runs: sealed as interrupted too
            status = finalize(p, state, after_runs)
    if stop.pending is not None and not state.interrupted:  # came after the runs: said once
        state.interrupted, state.code = True, 128 + stop.pending
        console.print(f"kit: interrupted by {signal.Signals(stop.pending).name}; bundle sealed")
    if state.fault is not None:
        raise KitError(
            f"the run stopped: {type(state.fault).__name__}: {state.fault}; "
            f"bundle {p.bundle.path} is {status}"
        ) from state.fault
    return p.bundle, state.code


def command_line(argv: list[str]) -> str:
    return "kit " + " ".join(shlex.quote(a) for a in argv)


__all__ = [
    "Options",
    "Prepared",
    "detect_gpus",
    "execute",
    "finalize",
    "now_iso",
    "prepare",
    "resolve_device",
    "run_recipe",
]
