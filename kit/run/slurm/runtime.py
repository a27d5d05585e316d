"""The Slurm batch runtime: write the bundle and the sbatch script, submit it, collect after the job.

A batch runtime has no per-launch `run`: the scheduler runs the whole plan later, one run after
the other on every node of the allocation. `collect` turns what the job left (exit codes, logs,
result files, each node's inventory) into results through the engine's own code
(kit.run.results), so a Slurm bundle reads, renders and compares as any other. Planned repeats
only: adaptive repeats need the driver between runs.
"""

from __future__ import annotations

import contextlib
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from kit.bundle import Bundle
from kit.io import terminal
from kit.io.errors import InputError, KitError
from kit.io.outputs import check_bundle_dir
from kit.io.safe import write_text
from kit.model import NodeRecord, SlurmInfo, load_bundle
from kit.model.environment import axes_record
from kit.recipe import Recipe, load_recipe
from kit.run.batch import gather_inventory, write_batch_bundle
from kit.run.plan import plan
from kit.run.results import close_bundle, record_container, result_of
from kit.run.slurm.script import (
    TIMEOUT_EXIT,
    Job,
    SlurmOptions,
    engine,
    make_job,
    render_script,
)
from kit.runtime.base import RunOutcome, tail

console = terminal.console(highlight=False)


def write_bundle(job: Job) -> Path:
    """The bundle before the job: recipe, results.json header, run specs, the script."""
    o = job.opts
    record = SlurmInfo(
        nodes=job.nodes,
        gpus_per_node=job.gpus_per_node,
        launcher=o.launcher,
        image=o.container_image or o.apptainer or None,
        python=o.host_python,
        partition=o.partition,
        time=o.time,
        job_id=None,
    )
    pinned = o.launcher != "host"
    bundle = write_batch_bundle(
        job, o.device, "slurm", pinned, o.command, status="submitted", slurm=record
    )
    (bundle.path / "slurm" / "nodes").mkdir(parents=True)
    script = bundle.path / "slurm" / "job.sbatch"
    script.write_text(render_script(job))
    return script


def submit(script: Path, wait: bool = False) -> str:
    """sbatch the script; the job id. With `wait`, returns when the job has ended."""
    cmd = ["sbatch", "--parsable", *(["--wait"] if wait else []), str(script)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    out = proc.stdout.strip().splitlines()
    job_id = out[0].split(";")[0] if out else ""
    if proc.returncode != 0 and not (wait and job_id):
        last = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise KitError(f"sbatch failed (exit {proc.returncode}): {last}")
    return job_id


def first_made(folder: Path) -> Path | None:
    """The outermost of `folder` and its parents that do not exist yet (None: it exists)."""
    made = None
    for path in (folder, *folder.parents):
        if path.exists() or path.is_symlink():
            return made
        made = path
    return made


def undo(folder: Path, made: Path | None) -> None:
    """Remove what writing the bundle created: the folders it made, or (an empty folder that
    was there, as check_bundle_dir requires) what it put inside."""
    with contextlib.suppress(OSError):
        if made is not None:
            shutil.rmtree(made)
            return
        for entry in folder.iterdir():
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()


def launch(recipe: Recipe, opts: SlurmOptions, dry_run: bool = False, wait: bool = False) -> str:
    """`kit slurm RECIPE`: the script (dry run), or the written bundle, submitted when possible.

    Returns what the command prints on stdout.
    """
    job = make_job(recipe, opts)
    check_bundle_dir(job.bundle)  # a dry run shows what a real run would do: refuse it alike
    if dry_run:
        return render_script(job)
    made = first_made(job.bundle)
    script = write_bundle(job)
    if shutil.which("sbatch") is None:
        print(  # one line, unwrapped: it holds paths to copy
            f"kit: sbatch is not on PATH: wrote {script}; submit it where Slurm runs "
            f"(sbatch {script}), then: kit slurm collect {job.bundle}",
            file=sys.stderr,
        )
        return str(script)
    try:
        job_id = submit(script, wait=wait)
    except KitError as exc:  # nothing was submitted: leave --out as it was before
        undo(job.bundle, made)
        raise KitError(f"{exc}; removed what it wrote to {job.bundle}") from None
    bundle = Bundle.load(job.bundle)
    if bundle.results.slurm is not None:  # write_bundle's
        bundle.results.slurm.job_id = job_id
    bundle.save()
    console.print(f"kit: submitted Slurm job {job_id}: {script}")
    if wait:
        collect(job.bundle)
    else:
        console.print(f"kit: when it has ended: kit slurm collect {job.bundle}")
    return str(job.bundle)


# --- after the job ----------------------------------------------------------------------------


def read_exit_codes(path: Path) -> dict[str, tuple[int, float]]:
    """slurm/exit_codes.tsv -> {run_id: (exit status, wall seconds)}."""
    out: dict[str, tuple[int, float]] = {}
    if not path.is_file():
        return out
    for line in path.read_text().splitlines():
        parts = line.split("\t")
        if len(parts) == 4 and parts[1].lstrip("-").isdigit():
            try:
                wall = float(parts[3]) - float(parts[2])
            except ValueError:
                wall = 0.0
            out[parts[0]] = (int(parts[1]), wall)
    return out


def _merge_logs(bundle: Bundle, run_id: str, info: SlurmInfo) -> list[NodeRecord]:
    """logs/<run>.log from the nodes' logs, each line prefixed with its node (as docker does);
    each node's record."""
    records, combined = [], []
    for i in range(info.nodes):
        path = bundle.path / "logs" / f"{run_id}.node{i}.log"
        text = path.read_text(errors="replace") if path.is_file() else ""
        combined += [f"[node{i}] {line}\n" for line in text.splitlines()]
        log, found = f"logs/{path.name}", path.is_file()
        records.append(NodeRecord(node=i, log=log, found=found, nproc=info.gpus_per_node))
    write_text(bundle.log_path(run_id), "".join(combined))  # created anew, never through a link
    return records


def collect(path: Path) -> tuple[Bundle, int]:
    """`kit slurm collect BUNDLE`: results, inventory and report from what the job wrote."""
    bundle = Bundle.load(path)
    header = bundle.results  # through the typed model: one line if it does not validate
    info = header.slurm
    if info is None:
        raise InputError(f"{path}: not a bundle made by `kit slurm` (no slurm section)")
    recipe = bundle.recipe_model()
    runs = plan(recipe, header.device, header.smoke, header.planned_repeats)
    codes = read_exit_codes(bundle.path / "slurm" / "exit_codes.tsv")
    job_out = f"slurm/job-{info.job_id or '<id>'}.out"
    header.runs = []
    code = 0
    for spec in runs:
        nodes = _merge_logs(bundle, spec.run_id, info)
        log_path = bundle.log_path(spec.run_id)
        if spec.run_id in codes:
            status, wall = codes[spec.run_id]
            command = ["sbatch", "slurm/job.sbatch", "run", spec.run_id]
            outcome = RunOutcome(status, status == TIMEOUT_EXIT, False, wall, command)
        else:
            outcome = RunOutcome(
                None,
                False,
                False,
                0.0,
                [],
                f"the Slurm job did not run it (ended or was cancelled before; see {job_out})",
            )
        if outcome.timed_out:
            # timeout(1)'s 124 is the script's, not the worker's: no status of the worker
            outcome = RunOutcome(None, True, False, outcome.wall_s, outcome.command)
        outcome.nodes = nodes  # result_of adds them, the world size and the network transport
        result = result_of(spec, bundle.run_dir(spec.run_id), outcome, log_path)
        if result.status != "ok":
            for node in nodes:
                node.log_tail = tail(bundle.path / node.log) if node.log else None
            code = 1
        if result.launch is not None:  # result_of records it
            result.launch.launcher = info.launcher
        bundle.add_run(result)
        console.print(
            f"kit: {spec.run_id}: {result.status}" + (f" ({result.error})" if result.error else ""),
            markup=False,
        )
    gather_inventory(
        bundle, bundle.path / "slurm" / "nodes", "kit slurm: each node's kit.worker.nodeinfo"
    )
    record_container(
        bundle,
        {
            **axes_record("slurm", engine(info.launcher)),
            "name": recipe.environment,
            "pinned": info.launcher != "host",
            "runtime": "slurm",
            "launcher": info.launcher,
            "image": info.image,
            "python_executable": info.python,
            "kit_version": header.kit_version,
            "container": None,
        },
    )
    planned = header.planned_runs or len(header.runs)
    # what collect wrote reads back through the one loader, then the report and the manifest
    close_bundle(bundle, planned, check=load_bundle)
    return bundle, code


def load(path: Path) -> Recipe:
    if path.is_dir():
        raise InputError(f"{path}: a bundle; `kit slurm collect {path}` gathers a finished job")
    return load_recipe(path)


def command_line() -> str:
    return "kit " + " ".join(shlex.quote(a) for a in sys.argv[1:])


class SlurmRuntime:
    """The batch runtime chosen from kit.run.registry for `kit slurm` (see the module doc)."""

    name = placement = "slurm"  # its engine is the job's launcher (SlurmOptions.launcher)

    def __init__(self, opts: SlurmOptions) -> None:
        self.opts = opts

    @property
    def pinned(self) -> bool:
        """A container image (enroot/pyxis, Apptainer) pins the environment; the nodes' Python not."""
        return self.opts.launcher != "host"

    def submit(self, recipe: Recipe, dry_run: bool = False, wait: bool = False) -> str:
        return launch(recipe, self.opts, dry_run=dry_run, wait=wait)

    @staticmethod
    def collect(bundle: Path) -> tuple[Bundle, int]:
        return collect(bundle)
