"""`kit slurm`: run a recipe on a Slurm cluster whose nodes have no Docker, then collect it.

The driver plans the runs as `kit reproduce` does and writes the bundle's run directories (each
with its spec.json) on a filesystem the nodes share. An sbatch script then runs, one after the
other, each run on every node of the allocation, one task per node:

    srun --ntasks-per-node=1 <container> torchrun --nnodes N --nproc-per-node G
         --rdzv-backend c10d --rdzv-endpoint $HEAD_NODE:PORT --rdzv-id $SLURM_JOB_ID-RUN
         -m kit.worker /kit/run/spec.json

where <container> is enroot/pyxis (`--container-image=IMG --container-mounts=RUN_DIR:/kit/run`),
Apptainer (`apptainer exec --nv --bind RUN_DIR:/kit/run SIF`), or nothing (`--host-python`:
the nodes' own Python, for clusters with a shared environment and for testing). HEAD_NODE is the
first host of $SLURM_JOB_NODELIST (`scontrol show hostnames`). Every node's output goes to
logs/<run>.node<i>.log, each run's exit status to slurm/exit_codes.tsv, each node's inventory to
slurm/nodes/. `kit slurm collect BUNDLE` turns them into results.json, hardware.json and the
report through the same code as `kit reproduce` (or `--wait` submits with `sbatch --wait` and
collects at once). Planned repeats only: adaptive repeats need the driver between runs.
"""

from __future__ import annotations

import re
import shlex
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kit.bundle import default_bundle_dir
from kit.io.errors import InputError
from kit.recipe import Recipe
from kit.recipe import gpus as recipe_gpus
from kit.run.batch import BatchJob, check_batch_options
from kit.run.plan import plan
from kit.runtime.apptainer import sif_file
from kit.runtime.base import check_no_control
from kit.runtime.containers.process import Apptainer, NoContainer
from kit.runtime.containers.pyxis import Pyxis
from kit.runtime.launch import KIT_ROOT, Rendezvous, torchrun
from kit.runtime.launch import environment as launch_environment
from kit.shared.engines import Engine

TIMEOUT_EXIT = 124  # timeout(1)'s status when the limit passed
TIME_PATTERN = r"^(\d+-)?\d+(:\d{2}){0,2}$"


@dataclass
class SlurmOptions:
    nodes: int | None = None  # default: len(recipe nodes.hosts), else 1
    gpus_per_node: int | None = None  # default: recipe nodes.gpus_per_node, else recipe gpus
    partition: str | None = None
    time: str | None = None  # sbatch --time (e.g. 01:00:00); default: the cluster's
    container_image: str | None = None  # enroot/pyxis
    apptainer: str | None = None  # a SIF file
    host_python: str | None = None  # no container: this Python on the nodes
    device: str = "cuda"
    smoke: bool | None = None
    repeats: int | None = None
    out: Path | None = None
    command: str = "kit slurm"
    extra: list[str] = field(default_factory=list)  # more #SBATCH lines, e.g. --account=X

    @property
    def launcher(self) -> str:
        return "pyxis" if self.container_image else "apptainer" if self.apptainer else "host"


PARTITION = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*(,[A-Za-z0-9_][A-Za-z0-9_.-]*)*$")
"""sbatch --partition: one name or a comma-separated list of them, each starting with a letter,
digit or _ (never `-`: `--partition=--privileged` is no partition)."""


def check_options(opts: SlurmOptions) -> None:
    chosen = [o for o in (opts.container_image, opts.apptainer, opts.host_python) if o]
    if len(chosen) != 1:
        raise InputError(
            "kit slurm: name exactly one of --container-image IMG (enroot/pyxis), --apptainer SIF,"
            " --host-python PY (no container)"
        )
    check_batch_options(opts.device, opts.nodes, opts.gpus_per_node)
    if opts.time is not None and not re.match(TIME_PATTERN, opts.time):
        raise InputError(f"--time {opts.time!r}: expected MINUTES, HH:MM:SS or D-HH:MM:SS")
    # every value below becomes a line of the sbatch script: no control character (line break,
    # NUL, ESC)
    for name, value in (
        ("--partition", opts.partition),
        ("--time", opts.time),
        ("--container-image", opts.container_image),
        ("--apptainer", opts.apptainer),
        ("--host-python", opts.host_python),
        *(("--sbatch-arg", x) for x in opts.extra),
    ):
        if value is not None:
            check_no_control(name, str(value))
    if opts.container_image is not None and opts.container_image.startswith("-"):
        raise InputError(
            f"--container-image {opts.container_image!r}: an option, not an image "
            "(a .sqsh file, docker://IMAGE or REGISTRY#IMAGE)"
        )
    for arg in opts.extra:  # an #SBATCH line holds options: anything else is no sbatch's
        if not re.match(r"^--?[A-Za-z]", arg):
            raise InputError(
                f"--sbatch-arg {arg!r}: expected an sbatch option, e.g. --sbatch-arg=--account=lab"
            )
    if opts.partition is not None and not PARTITION.fullmatch(opts.partition):
        raise InputError(
            f"--partition {opts.partition!r}: expected a Slurm partition name "
            "(letters, digits, _ - ., starting with a letter, digit or _; several "
            "separated by commas)"
        )
    # the SIF may be only on the cluster's disk: said, not refused
    if opts.apptainer is not None and not sif_file(opts.apptainer, absent_ok=True).exists():
        print(
            f"kit: note: --apptainer {opts.apptainer}: not on this machine; every node must "
            "find it at that path",
            file=sys.stderr,
        )


def _q(text: str | Path) -> str:
    return shlex.quote(str(text))


@dataclass
class Job(BatchJob):
    """What the script is made of: the batch job, and the launch settings."""

    opts: SlurmOptions


def make_job(recipe: Recipe, opts: SlurmOptions) -> Job:
    check_options(opts)
    smoke = opts.smoke if opts.smoke is not None else opts.device == "cpu"
    repeats = opts.repeats or (min(recipe.repeats, 2) if smoke else None)
    section = recipe.nodes
    nodes = opts.nodes or (len(section.hosts) if section else 1)
    named = opts.gpus_per_node or (section.gpus_per_node if section else None)
    recipe = recipe_gpus.resolve(  # the driver cannot count the nodes' GPUs: the count is named
        recipe, named, "a Slurm job cannot count the nodes' GPUs from here; name --gpus-per-node"
    )
    per_node = named or recipe_gpus.counted(recipe)
    env = dict(section.env) if section else {}
    if section and section.nccl_socket_ifname:
        env.setdefault("NCCL_SOCKET_IFNAME", section.nccl_socket_ifname)
        env.setdefault("GLOO_SOCKET_IFNAME", section.nccl_socket_ifname)
    bundle = (opts.out or default_bundle_dir(Path("reports"), recipe.name)).resolve()
    return Job(
        recipe=recipe,
        runs=plan(recipe, opts.device, smoke, repeats, per_node),
        bundle=bundle,
        nodes=nodes,
        gpus_per_node=per_node,
        rdzv_port=section.rdzv_port if section else 29400,
        env=env,
        opts=opts,
    )


CONTAINERS: dict[str, Callable[[Job], Any]] = {
    "pyxis": lambda job: Pyxis(_q(job.opts.container_image or ""), f"kit-{job.recipe.name}"),
    "apptainer": lambda job: Apptainer(job.opts.apptainer or ""),
    "host": lambda job: NoContainer(job.opts.host_python),
}
"""Each launcher's container: the script composes its command-line face (`face`), whatever it is."""


def container(job: Job) -> Any:
    """The container every task of the job runs in (NoContainer: the nodes' own Python)."""
    return CONTAINERS[job.opts.launcher](job)


def engine(launcher: str) -> str:
    """environment.json's `engine` of a job's launcher (pyxis, apptainer, host)."""
    return {"pyxis": Pyxis.engine, "apptainer": Apptainer.engine}.get(launcher, Engine.NONE)


def render_script(job: Job) -> str:
    """The sbatch script: a pure function of the job (the tests check its exact text): its
    #SBATCH header, the job's set-up, each node's inventory, the run() function and one call of
    it per planned run."""
    python = [_q(job.opts.host_python or "")] if job.opts.launcher == "host" else ["python"]
    lines = [*_header(job), *_setup(job), *_inventory(job, python), *_run_function(job)]
    lines += _runs(job)
    return "\n".join(lines) + "\n"


def _header(job: Job) -> list[str]:
    """What the script is, for a person reading it, and its #SBATCH lines."""
    o, name = job.opts, job.recipe.name
    lines = [
        "#!/bin/bash",
        f"# kit: Slurm job for recipe {name}, written by `{o.command}`.",
        f"# {len(job.runs)} runs, each on {job.nodes} node(s) x {job.gpus_per_node} processes, "
        "one after the other,",
        "# through torchrun's c10d rendezvous on the first node of the allocation.",
        f"# The bundle must be on a filesystem every node sees: {job.bundle}",
        f"# After the job: kit slurm collect {job.bundle}",
        f"#SBATCH --job-name=kit-{name}",
        f"#SBATCH --nodes={job.nodes}",
        "#SBATCH --ntasks-per-node=1",
    ]
    if o.device == "cuda":
        lines.append(f"#SBATCH --gpus-per-node={job.gpus_per_node}")
    if o.partition:
        lines.append(f"#SBATCH --partition={o.partition}")
    if o.time:
        lines.append(f"#SBATCH --time={o.time}")
    lines += [f"#SBATCH {x}" for x in o.extra]
    return [*lines, f"#SBATCH --output={job.bundle}/slurm/job-%j.out"]


def _setup(job: Job) -> list[str]:
    """The bundle, the rendezvous on the first node, and each node's scratch folder."""
    lines = [
        "set -uo pipefail",
        "",
        f"BUNDLE={_q(job.bundle)}",
        'HEAD_NODE="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)"',
        f"RDZV_PORT={job.rdzv_port}",
        'echo "kit: job $SLURM_JOB_ID on $SLURM_JOB_NODELIST, rendezvous on $HEAD_NODE:$RDZV_PORT"',
        "export PYTHONUNBUFFERED=1",
    ]
    if job.opts.launcher == "host":
        lines.append(f"export PYTHONPATH={_q(KIT_ROOT)}${{PYTHONPATH:+:$PYTHONPATH}}")
    return [
        *lines,
        "# each node's scratch for this job, the runs' TMPDIR (torchrun's own folders went to",
        "# the node's /tmp and stayed there, one a run), removed at the end",
        'SCRATCH="${TMPDIR:-/tmp}/kit-job-$SLURM_JOB_ID"',
        'srun --ntasks-per-node=1 mkdir -p "$SCRATCH"',
    ]


def _inventory(job: Job, python: list[str]) -> list[str]:
    """Each node's inventory, written beside the bundle by one task per node."""
    face = container(job).face(None, job.opts.device)
    info = [*face.flags, *face.prefix]
    return [
        "",
        "# each node's inventory: name, CPUs, memory, GPUs, network interfaces and link speeds",
        'srun --ntasks-per-node=1 --output="$BUNDLE/slurm/nodes/node%n.json" \\',
        '    --error="$BUNDLE/slurm/nodes/node%n.err" '
        + " ".join([*info, *python, "-m", "kit.worker.nodeinfo"]),
    ]


def _run_function(job: Job) -> list[str]:
    """run(): one run on every node through torchrun, its exit status and times recorded."""
    o = job.opts
    face = container(job).face("$BUNDLE/runs/$run_id", o.device)
    cmd = [
        '    timeout --signal=TERM --kill-after=30 "$timeout_s" srun --ntasks-per-node=1',
        '        --kill-on-bad-exit=1 --output="$BUNDLE/logs/$run_id.node%n.log"',
    ]
    if face.flags:
        cmd.append("        " + " ".join(face.flags))
    rdzv = Rendezvous(job.nodes, '"$HEAD_NODE:$RDZV_PORT"', '"$SLURM_JOB_ID-$run_id"')
    argv = torchrun(job.gpus_per_node, face.spec, o.host_python and _q(o.host_python), rdzv)
    head = 3 if o.launcher == "host" else 1  # PYTHON -m torch.distributed.run | torchrun
    cmd += [
        "        " + " ".join([*face.prefix, "env", '"$@"', 'TMPDIR="$SCRATCH"', *argv[:head]]),
        "        " + " ".join(argv[head : head + 3]),
        "        " + " ".join(argv[head + 3 : head + 5]),
        "        " + " ".join(argv[head + 5 :]),
    ]
    return [
        "",
        "# run RUN_ID TIMEOUT_S [VAR=VALUE...]: one run on every node; its status goes to",
        "# slurm/exit_codes.tsv (124: the timeout passed), each node's output to",
        "# logs/RUN_ID.node<i>.log",
        "run() {",
        "    local run_id=$1 timeout_s=$2 start code",
        "    shift 2",
        "    start=$(date +%s.%N)",
        " \\\n".join(cmd),
        "    code=$?",
        '    printf "%s\\t%s\\t%s\\t%s\\n" "$run_id" "$code" "$start" "$(date +%s.%N)" \\',
        '        >>"$BUNDLE/slurm/exit_codes.tsv"',
        '    echo "kit: $run_id: exit status $code"',
        "}",
        "",
    ]


def _runs(job: Job) -> list[str]:
    """One call of run() per planned run, with its variables; then the scratch removed."""
    lines = []
    for spec in job.runs:
        # no heartbeat (the driver is not there while the job runs), no HOME: the task's own
        env = launch_environment(spec.env, job.opts.device, extra=job.env)
        env.pop("PYTHONUNBUFFERED")  # exported once for the whole job
        assigns = " ".join(_q(f"{k}={v}") for k, v in env.items())
        lines.append(f"run {_q(spec.run_id)} {spec.timeout_s:g} {assigns}".rstrip())
    return [
        *lines,
        'srun --ntasks-per-node=1 rm -rf "$SCRATCH"',
        'echo "kit: done; collect with: kit slurm collect $BUNDLE"',
    ]
