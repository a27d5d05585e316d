"""`kit reproduce`: plan the runs, launch each in a fresh process, keep every result, seal the bundle.

Whatever happens after a run finished (a later crash, a timeout, Ctrl-C, SIGTERM, a report that
fails to render), its result is already on disk: results.json is rewritten after each run and the
bundle is always sealed with its manifest before the command exits.
"""

from __future__ import annotations

import json
import re
import shlex
import signal
import statistics
import sys
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from kit.bundle import Bundle, default_bundle_dir, now_iso, write_manifest
from kit.errors import InputError, KitError
from kit.inventory import collect
from kit.plan import RunSpec, plan, plan_repeat
from kit.preflight import PreflightOptions, raise_if_fatal, run_checks
from kit.recipe import Recipe
from kit.runtime.base import RunOutcome, Runtime, tail
from kit.runtime.multinode import node_config, nodes_device
from kit.stats import AdaptiveRepeats, is_noisy
from kit.worker.common import RESULT_SCHEMA, write_json
from kit.worker.nccl_log import parse_nccl_log, verdict

console = Console(stderr=True, highlight=False, soft_wrap=True)  # a path never breaks


@dataclass
class Options:
    device: str = "auto"  # auto | cuda | cpu
    smoke: bool | None = None  # None: smoke on the CPU, full size on GPUs
    repeats: int | None = None
    out: Path | None = None
    runtime: str = "auto"  # host | docker | auto (docker for GPU runs when a daemon answers)
    command: str = ""
    environment: str | None = None  # docker runtime: overrides the recipe's environment
    base_image: str | None = None  # docker runtime: overrides the Dockerfile's BASE_IMAGE
    image_archive: Path | None = None  # docker runtime: run the image of a `kit export` archive
    strict: bool = False  # preflight warnings are fatal too
    allow: tuple[str, ...] = ()  # preflight checks that may fail without stopping the run
    # set by `kit reproduce BUNDLE` (kit/rerun.py): what is rerun, and its recorded environment
    reproduces: dict[str, Any] | None = None
    expected_environment: dict[str, Any] | None = None
    expected_hardware: dict[str, Any] | None = None
    nodes: tuple[str, ...] = ()  # --nodes: Docker daemon URLs, one per node (multi-node runs)


def detect_gpus() -> int:
    """How many NVIDIA GPUs the driver sees (NVML), 0 when there is no driver or no GPU."""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            return int(pynvml.nvmlDeviceGetCount())
        finally:
            pynvml.nvmlShutdown()
    except Exception:
        return 0


def resolve_device(requested: str) -> str:
    if requested not in ("auto", "cuda", "cpu"):
        raise InputError(f"--device {requested!r}: allowed: auto, cuda, cpu")
    if requested == "auto":
        return "cuda" if detect_gpus() > 0 else "cpu"
    if requested == "cuda" and detect_gpus() == 0:
        raise InputError(
            "--device cuda: no NVIDIA GPU is visible (NVML found none); use --device cpu"
        )
    return requested


_EXCEPTION_LINE = re.compile(r"^(?:\[rank\d+\]:\s*)?([A-Za-z_][\w.]*(?:Error|Exception)): (.+)$")


def worker_error(path: Path) -> str | None:
    """The first exception a rank raised, from the log (torchrun's own summary comes after it)."""
    if not path.is_file():
        return None
    for line in path.read_text(errors="replace").splitlines():
        match = _EXCEPTION_LINE.match(line.strip())
        if match and "ChildFailedError" not in match[1]:
            return f"{match[1]}: {match[2]}"[:300]
    return None


def result_of(spec: RunSpec, run_dir: Path, outcome: RunOutcome, log_path: Path) -> dict[str, Any]:
    """The run's result: the worker's own file when it wrote one, else a failed/timeout record."""
    file = run_dir / "result.json"
    result: dict[str, Any] | None = None
    if file.is_file():
        try:
            result = json.loads(file.read_text())
        except json.JSONDecodeError:
            result = None
    if result is None:
        if outcome.interrupted:
            status, error = "failed", "interrupted before it finished"
        elif outcome.timed_out:
            status, error = "timeout", f"no result after the {spec.timeout_s:g} s timeout; stopped"
        else:
            status = "failed"
            error = (
                outcome.error
                or f"worker exited with status {outcome.exit_code} and wrote no result"
            )
            cause = worker_error(log_path)
            if cause:
                error += f"; {cause}"
        result = {
            "schema": RESULT_SCHEMA,
            "run_id": spec.run_id,
            "benchmark": spec.benchmark,
            "kind": spec.kind,
            "variant": spec.variant.name,
            "repeat": spec.repeat,
            "status": status,
            "error": error,
            "world_size": spec.nproc,
            "device": spec.device,
            "env": spec.env,
            "metrics": {},
            "data": {},
        }
    elif outcome.timed_out and result.get("status") == "ok":
        result["status"], result["error"] = (
            "timeout",
            "the worker finished but did not exit in time",
        )
    elif outcome.exit_code not in (0, None) and result.get("status") == "ok":
        result["status"] = "failed"
        result["error"] = f"worker exited with status {outcome.exit_code} after writing its result"
    if spec.device == "cuda" and log_path.is_file():
        nccl = parse_nccl_log(log_path.read_text(errors="replace"))
        nccl["verdict"] = verdict(
            nccl,
            p2p_disabled=spec.env.get("NCCL_P2P_DISABLE") == "1",
            single_node=outcome.nodes is None or len(outcome.nodes) < 2,
        )
        result["nccl"] = nccl
    result["exit_code"] = outcome.exit_code
    result["launch"] = {"command": outcome.command, "wall_s": outcome.wall_s}
    result.setdefault("wall_s", outcome.wall_s)
    if result["status"] != "ok":
        result["log_tail"] = tail(log_path)
    if outcome.nodes is not None:
        from kit.runtime.multinode import annotate_result

        annotate_result(result, outcome)
    return result


def _headline(result: dict[str, Any]) -> str:
    metrics = result.get("metrics") or {}
    for name in ("throughput", "busbw_peak"):
        if name in metrics:
            m = metrics[name]
            return f"{name} {m['value']:.4g} {m['unit']}"
    return ""


class _Terminated(Exception):
    pass


def _on_sigterm(signum: int, frame: Any) -> None:
    raise _Terminated()


def _auto_runtime(device: str) -> str:
    """docker for GPU runs when a daemon answers and can hand out GPUs; host otherwise, said aloud.

    CPU runs check the method, not the hardware: they stay on the host unless asked
    (--runtime docker runs them in the pinned cpu image).
    """
    if device == "cpu":
        console.print("kit: CPU run: host runtime (not pinned); --runtime docker pins it")
        return "host"
    from kit.environment import docker_client
    from kit.runtime.docker import gpu_support

    try:
        client = docker_client()
    except KitError:
        console.print("kit: no Docker daemon answers: host runtime (not pinned)")
        return "host"
    if gpu_support(client) is None:
        console.print(
            "kit: Docker cannot give GPUs to containers (no NVIDIA Container Toolkit or CDI):"
            " host runtime (not pinned)"
        )
        return "host"
    return "docker"


def make_runtime(name: str, recipe: Recipe, options: Options, device: str = "cpu") -> Runtime:
    """The runtime the user asked for; docker builds (or reuses) the pinned image first."""
    if name not in ("host", "docker", "auto"):
        raise InputError(f"--runtime {name!r}: allowed: host, docker, auto")
    nodes = node_config(recipe.nodes, options.nodes)
    if nodes is not None:  # several machines: containers on each node's daemon
        if name == "host":
            raise InputError("multi-node runs (nodes:, --nodes) need the docker runtime")
        from kit.runtime import multinode

        return multinode.prepare(nodes, options.environment or recipe.environment, device,
                                 base_image=options.base_image,
                                 image_archive=options.image_archive, gpus=recipe.gpus)  # fmt: skip
    if name == "auto":
        name = _auto_runtime(device)
    if name == "host" and options.image_archive is not None:
        raise InputError("--image-archive: needs the docker runtime (--runtime docker)")
    if name == "host":
        from kit.runtime.host import HostRuntime

        return HostRuntime()
    from kit.runtime.docker import prepare

    return prepare(
        options.environment or recipe.environment,
        device,
        base_image=options.base_image,
        image_archive=options.image_archive,
    )


def preflight(recipe: Recipe, device: str, hardware: dict[str, Any], options: Options) -> list:
    """Check the machine is fit to measure before any run; refuse on fatal findings."""
    variants = recipe.resolved_variants()
    ids = {i for v in variants for i in (v.gpu_ids or [])}
    if any(not v.gpu_ids for v in variants):
        ids |= set(range(recipe.gpus))
    findings = run_checks(
        hardware,
        gpus_needed=recipe.gpus,
        gpu_ids=sorted(ids),
        needs_shm=any(v.env.get("NCCL_P2P_DISABLE") == "1" for v in variants),
        device=device,
        options=PreflightOptions(strict=options.strict, allow=frozenset(options.allow)),
    )
    for f in findings:
        console.print(f"kit: preflight {f['level']}: {f['check']}: {f['message']}")
    raise_if_fatal(findings)
    return findings


def run_recipe(
    recipe: Recipe,
    options: Options,
    on_result: Callable[[dict[str, Any]], None] | None = None,
) -> tuple[Bundle, int]:
    """Run every planned run and write the bundle. Returns the bundle and the exit code."""
    nodes = node_config(recipe.nodes, options.nodes)
    device = (
        resolve_device(options.device) if nodes is None else nodes_device(options.device, nodes)
    )
    smoke = options.smoke if options.smoke is not None else device == "cpu"
    repeats = options.repeats or (min(recipe.repeats, 2) if smoke else None)
    runs = plan(recipe, device, smoke, repeats)
    hardware = collect()
    # the driver's machine is not one of the nodes: each node's inventory goes to hardware.json
    findings = preflight(recipe, device, hardware, options) if nodes is None else []
    runtime = make_runtime(options.runtime, recipe, options, device)
    # absolute: the workers run with the run directory as their working directory
    out = (options.out or default_bundle_dir(Path("reports"), recipe.name)).resolve()
    bundle = Bundle.create(
        out,
        recipe.resolved(),
        {
            "recipe": recipe.name,
            "device": device,
            "runtime": runtime.name,
            "pinned": runtime.pinned,
            "smoke": smoke,
            "repeats": repeats or recipe.repeats,
            "command": options.command or "kit reproduce",
            "planned_runs": len(runs),
            "reproduces": options.reproduces,
        },
    )
    planned = repeats or recipe.repeats
    adaptive = (recipe.max_repeats or 0) > recipe.repeats  # off unless the recipe asks
    cap = max(planned, recipe.max_repeats or 0) if adaptive else planned
    policy = AdaptiveRepeats(planned, cap, recipe.cv_threshold)
    console.print(
        f"kit: {recipe.name}: {len(runs)} runs on {device} ({runtime.name} runtime"
        f"{', smoke scale' if smoke else ''}) -> {bundle.path}"
    )
    if getattr(runtime, "inventory", None):
        hardware["nodes"] = runtime.inventory
    bundle.write_json("hardware.json", hardware)
    bundle.results["preflight"] = findings
    bundle.write_json(
        "environment.json",
        getattr(runtime, "environment", None)
        or {"name": recipe.environment, "pinned": runtime.pinned, "runtime": runtime.name,
            "kit_version": bundle.results["kit_version"], "python_executable": sys.executable,
            "container": None},
    )  # fmt: skip
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    status, code = "complete", 0
    try:
        queue, i = deque(runs), 0
        while queue:
            spec = queue.popleft()
            i += 1
            run_dir = bundle.run_dir(spec.run_id)
            write_json(run_dir / "spec.json", spec.to_json())
            log_path = bundle.log_path(spec.run_id)
            console.print(f"[{i}/{i + len(queue)}] {spec.run_id} ...", end=" ")
            interrupted = False
            try:
                outcome = runtime.run(
                    run_dir,
                    spec.nproc,
                    spec.env,
                    log_path,
                    spec.timeout_s,
                    spec.variant.gpu_ids,
                    device,
                )
            except (KeyboardInterrupt, _Terminated):
                interrupted = True
                outcome = RunOutcome(None, False, True, 0.0, [], "interrupted")
            result = result_of(spec, run_dir, outcome, log_path)
            bundle.add_run(result)
            if on_result:
                on_result(result)
            if result["status"] == "ok":
                console.print(f"ok {result.get('wall_s', 0):.1f} s {_headline(result)}")
            else:
                code = 1
                # an error may hold [brackets] (gloo's "[/path/pair.cc:553]"): not rich markup
                console.print(f"{result['status'].upper()}: {result.get('error')}", markup=False)
            if interrupted:
                raise KeyboardInterrupt
            if not queue or queue[0].benchmark != spec.benchmark:  # its last planned repeat
                record = adaptive_record(bundle.results["runs"], spec.benchmark, policy)
                bundle.results.setdefault("adaptive", {})[spec.benchmark] = record
                bundle.save()
                if record["more"]:
                    extra = plan_repeat(recipe, spec.benchmark, record["repeats"], device, smoke)
                    console.print(f"kit: {spec.benchmark}: {record['reason']}; one more repeat")
                    queue.extendleft(reversed(extra))
    except (KeyboardInterrupt, _Terminated):
        status, code = "interrupted", 130
        console.print("kit: interrupted; writing the bundle with what finished")
    finally:
        signal.signal(signal.SIGTERM, previous)
        if status == "complete" and code != 0:
            status = "partial"
        ok = [r for r in bundle.results["runs"] if r.get("status") == "ok"]
        env = bundle.read_json("environment.json") or {}
        if ok and not env.get("container"):
            env["container"] = ok[0].get("versions")
            bundle.write_json("environment.json", env)
        if options.expected_environment is not None:
            from kit.rerun import check_after_run

            check_after_run(bundle, options.expected_environment, options.expected_hardware)
        bundle.finish(status)
        seal(bundle)
    return bundle, code


HEADLINE_METRICS = ("throughput", "busbw_peak")


def headline_name(runs: list[dict[str, Any]]) -> str | None:
    """The metric that adaptive repeats watch: throughput for training, peak busbw otherwise."""
    names = {n for r in runs if r.get("status") == "ok" for n in r.get("metrics") or {}}
    return next((n for n in HEADLINE_METRICS if n in names), min(names) if names else None)


def adaptive_record(
    runs: list[dict[str, Any]], benchmark: str, policy: AdaptiveRepeats
) -> dict[str, Any]:
    """Whether a benchmark needs another repeat (all variants together), and why.

    Repeats are counted whether they succeeded or not, so a failing benchmark never loops;
    only the spread of the successful samples asks for more.
    """
    mine = [r for r in runs if r.get("benchmark") == benchmark]
    done = 1 + max((r.get("repeat", 0) for r in mine), default=-1)
    metric = headline_name(mine)
    cvs: dict[str, float | None] = {}
    noisy: list[str] = []
    more = cap_reached = False
    for variant in dict.fromkeys(r["variant"] for r in mine):
        samples = [
            r["metrics"][metric]["value"]
            for r in mine
            if r["variant"] == variant and r.get("status") == "ok" and metric in r["metrics"]
        ]
        mean = statistics.fmean(samples) if samples else 0.0
        cvs[variant] = statistics.stdev(samples) / abs(mean) if len(samples) > 1 and mean else None
        if samples and is_noisy(samples, policy.cv_threshold):
            noisy.append(variant)
            more = more or policy.needs_more(samples, done)
            cap_reached = cap_reached or policy.cap_reached(samples, done)
    reason = (
        ", ".join(f"{v} CV {cvs[v]:.1%}" for v in noisy) + f" > {policy.cv_threshold * 100:.3g}%"
    )
    return {
        "metric": metric,
        "planned": policy.min_repeats,
        "max_repeats": policy.max_repeats,
        "cv_threshold": policy.cv_threshold,
        "repeats": done,
        "cv": cvs,
        "noisy": noisy,
        "more": more,
        "cap_reached": cap_reached,
        "reason": reason if noisy else "",
    }


def seal(bundle: Bundle) -> None:
    """Render the report (a failure there never costs the measurements) and write the manifest."""
    try:
        from kit.report.render import render_bundle

        render_bundle(bundle)
    except KitError as exc:
        console.print(f"kit: warning: {exc}")
    except Exception as exc:  # the measurements matter more than the page
        console.print(f"kit: warning: report not rendered: {type(exc).__name__}: {exc}")
    write_manifest(bundle.path)


def command_line(argv: list[str]) -> str:
    return "kit " + " ".join(shlex.quote(a) for a in argv)


__all__ = ["Options", "now_iso", "run_recipe", "seal"]
