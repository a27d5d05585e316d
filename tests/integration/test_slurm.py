"""The Slurm launcher: the sbatch script checked against its exact text for a fixed input, the
other launchers and the option errors, the CLI without sbatch, and (marker `slurm`) a real
submission to a one-node Slurm cluster on this machine (scripts/ci-slurm.sh) running a CPU smoke
recipe with the host's Python instead of a container.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kit.bundle import verify_manifest
from kit.io.errors import InputError
from kit.recipe import parse_recipe
from kit.run import registry
from kit.run.slurm.runtime import read_exit_codes, write_bundle
from kit.run.slurm.script import SlurmOptions, check_options, make_job, render_script
from tests.conftest import needs_pdf

ROOT = Path(__file__).resolve().parents[2]
PY = sys.executable

RECIPE = """\
kit: 1
name: allreduce-2node
gpus: 8
repeats: 1
timeout_s: 600
benchmarks:
  - kind: allreduce
nodes:
  hosts: ["ssh://node1", "ssh://node2"]
  nccl_socket_ifname: ib0
  env: {NCCL_IB_HCA: mlx5}
"""

EXPECTED = r"""#!/bin/bash
# kit: Slurm job for recipe allreduce-2node, written by `kit slurm recipes/allreduce-2node.yaml`.
# 2 runs, each on 2 node(s) x 8 processes, one after the other,
# through torchrun's c10d rendezvous on the first node of the allocation.
# The bundle must be on a filesystem every node sees: /shared/kit/allreduce-2node
# After the job: kit slurm collect /shared/kit/allreduce-2node
#SBATCH --job-name=kit-allreduce-2node
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --gpus-per-node=8
#SBATCH --partition=gpu
#SBATCH --time=01:00:00
#SBATCH --account=lab
#SBATCH --output=/shared/kit/allreduce-2node/slurm/job-%j.out
set -uo pipefail

BUNDLE=/shared/kit/allreduce-2node
HEAD_NODE="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)"
RDZV_PORT=29400
echo "kit: job $SLURM_JOB_ID on $SLURM_JOB_NODELIST, rendezvous on $HEAD_NODE:$RDZV_PORT"
export PYTHONUNBUFFERED=1
# each node's scratch for this job, the runs' TMPDIR (torchrun's own folders went to
# the node's /tmp and stayed there, one a run), removed at the end
SCRATCH="${TMPDIR:-/tmp}/kit-job-$SLURM_JOB_ID"
srun --ntasks-per-node=1 mkdir -p "$SCRATCH"

# each node's inventory: name, CPUs, memory, GPUs, network interfaces and link speeds
srun --ntasks-per-node=1 --output="$BUNDLE/slurm/nodes/node%n.json" \
    --error="$BUNDLE/slurm/nodes/node%n.err" --container-image=/shared/images/kit-cuda13.sqsh --container-name=kit-allreduce-2node python -m kit.worker.nodeinfo

# run RUN_ID TIMEOUT_S [VAR=VALUE...]: one run on every node; its status goes to
# slurm/exit_codes.tsv (124: the timeout passed), each node's output to
# logs/RUN_ID.node<i>.log
run() {
    local run_id=$1 timeout_s=$2 start code
    shift 2
    start=$(date +%s.%N)
    timeout --signal=TERM --kill-after=30 "$timeout_s" srun --ntasks-per-node=1 \
        --kill-on-bad-exit=1 --output="$BUNDLE/logs/$run_id.node%n.log" \
        --container-image=/shared/images/kit-cuda13.sqsh --container-name=kit-allreduce-2node --container-mounts="$BUNDLE/runs/$run_id:/kit/run" --container-workdir=/kit/run \
        env "$@" TMPDIR="$SCRATCH" torchrun \
        --nnodes=2 --nproc-per-node=8 --rdzv-backend=c10d \
        --rdzv-endpoint="$HEAD_NODE:$RDZV_PORT" --rdzv-id="$SLURM_JOB_ID-$run_id" \
        --max-restarts=0 -m kit.worker /kit/run/spec.json
    code=$?
    printf "%s\t%s\t%s\t%s\n" "$run_id" "$code" "$start" "$(date +%s.%N)" \
        >>"$BUNDLE/slurm/exit_codes.tsv"
    echo "kit: $run_id: exit status $code"
}

run allreduce.p2p.r0 600 NCCL_IB_HCA=mlx5 NCCL_SOCKET_IFNAME=ib0 GLOO_SOCKET_IFNAME=ib0 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 NCCL_DEBUG=INFO CUDA_DEVICE_ORDER=PCI_BUS_ID
run allreduce.no-p2p.r0 600 NCCL_IB_HCA=mlx5 NCCL_SOCKET_IFNAME=ib0 GLOO_SOCKET_IFNAME=ib0 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 NCCL_DEBUG=INFO CUDA_DEVICE_ORDER=PCI_BUS_ID NCCL_P2P_DISABLE=1
srun --ntasks-per-node=1 rm -rf "$SCRATCH"
echo "kit: done; collect with: kit slurm collect $BUNDLE"
"""


def _opts(**kw) -> SlurmOptions:
    base = dict(partition="gpu", time="01:00:00", out=Path("/shared/kit/allreduce-2node"),
                command="kit slurm recipes/allreduce-2node.yaml", extra=["--account=lab"])  # fmt: skip
    base.update(kw)
    return SlurmOptions(**base)


def _script(**kw) -> str:
    return render_script(make_job(parse_recipe(RECIPE, "r.yaml"), _opts(**kw)))


def test_pyxis_script_exact_text():
    assert _script(container_image="/shared/images/kit-cuda13.sqsh") == EXPECTED


def test_apptainer_script():
    text = _script(apptainer="/shared/kit.sif")
    assert "--container" not in text
    assert (
        '    apptainer exec --nv --bind "$BUNDLE/runs/$run_id:/kit/run" --pwd /kit/run '
        '/shared/kit.sif env "$@" TMPDIR="$SCRATCH" torchrun \\\n' in text
    )
    assert (
        '--error="$BUNDLE/slurm/nodes/node%n.err" apptainer exec --nv /shared/kit.sif python -m kit.worker.nodeinfo'
        in text
    )


def test_host_python_cpu_script():
    text = _script(host_python="/opt/venv/bin/python", device="cpu", nodes=1, gpus_per_node=2)
    assert "#SBATCH --gpus-per-node" not in text
    assert "#SBATCH --nodes=1\n" in text
    assert f"export PYTHONPATH={ROOT}${{PYTHONPATH:+:$PYTHONPATH}}\n" in text
    assert '        --chdir="$BUNDLE/runs/$run_id"\n' in text.replace(" \\\n", "\n")
    assert 'env "$@" TMPDIR="$SCRATCH" /opt/venv/bin/python -m torch.distributed.run' in text
    assert '--max-restarts=0 -m kit.worker "$BUNDLE/runs/$run_id/spec.json"' in text
    assert "--nnodes=1 --nproc-per-node=2 --rdzv-backend=c10d" in text
    assert " OMP_NUM_THREADS=1" in text and "NCCL_DEBUG" not in text  # smoke on the CPU


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({}, "kit slurm: name exactly one of --container-image IMG (enroot/pyxis), --apptainer SIF, --host-python PY (no container)"),
        ({"container_image": "a", "apptainer": "b"}, "kit slurm: name exactly one of"),
        ({"container_image": "a", "time": "1h"}, "--time '1h': expected MINUTES, HH:MM:SS or D-HH:MM:SS"),
        ({"container_image": "a", "device": "tpu"}, "--device 'tpu': allowed: cuda, cpu"),
        ({"container_image": "a", "nodes": 0}, "--nodes 0: must be at least 1"),
    ],
)  # fmt: skip
def test_option_errors(kw, message):
    with pytest.raises(InputError) as info:
        check_options(SlurmOptions(**kw))
    assert str(info.value).startswith(message)


def test_exit_codes_file(tmp_path):
    f = tmp_path / "exit_codes.tsv"
    f.write_text("a.p2p.r0\t0\t10.5\t12.0\nb.p2p.r0\t124\t12.0\t20.0\nbroken line\n")
    assert read_exit_codes(f) == {"a.p2p.r0": (0, 1.5), "b.p2p.r0": (124, 8.0)}
    assert read_exit_codes(tmp_path / "absent.tsv") == {}


def _kit(
    *args: str, path: str | None = None, tmp: Path | None = None
) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if path is not None:
        env["PATH"] = path
    if tmp is not None:  # the TMPDIR the job's tasks inherit (sbatch exports the environment)
        env["TMPDIR"] = str(tmp)
    return subprocess.run([PY, "-m", "kit.cli", *args], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=300)  # fmt: skip


def test_cli_dry_run_prints_the_script_and_writes_nothing(tmp_path):
    recipe = tmp_path / "allreduce-2node.yaml"
    recipe.write_text(RECIPE)
    out = tmp_path / "bundle"
    proc = _kit("slurm", str(recipe), "--container-image", "/shared/images/kit-cuda13.sqsh",
                "--partition", "gpu", "--time", "01:00:00", "--sbatch-arg=--account=lab",
                "--out", str(out), "--dry-run")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    expected = EXPECTED.replace("/shared/kit/allreduce-2node", str(out))
    _header, _, rest = proc.stdout.partition("\n")
    assert rest == expected.partition("\n")[2].replace(
        "written by `kit slurm recipes/allreduce-2node.yaml`",
        f"written by `kit slurm {recipe} --container-image /shared/images/kit-cuda13.sqsh "
        f"--partition gpu --time 01:00:00 --sbatch-arg=--account=lab --out {out} --dry-run`",
    )
    assert not out.exists()


def test_cli_errors_are_one_line(tmp_path):
    recipe = tmp_path / "r.yaml"
    recipe.write_text(RECIPE)
    proc = _kit("slurm", str(recipe), "--dry-run")
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "kit: error: kit slurm: name exactly one of --container-image IMG (enroot/pyxis), "
        "--apptainer SIF, --host-python PY (no container)"
    ]
    proc = _kit("slurm", "collect")
    assert proc.returncode == 2
    assert (
        proc.stderr.strip()
        == "kit: error: kit slurm collect BUNDLE: name the bundle the job wrote into"
    )


def test_without_sbatch_the_script_is_written_and_said_so(tmp_path):
    recipe = tmp_path / "r.yaml"
    recipe.write_text(RECIPE)
    out = tmp_path / "bundle"
    proc = _kit("slurm", str(recipe), "--apptainer", "/shared/kit.sif", "--out", str(out),
                path=str(tmp_path / "no-bin"))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    script = out / "slurm" / "job.sbatch"
    assert proc.stdout.strip() == str(script)
    assert proc.stderr.strip().splitlines() == [
        "kit: note: --apptainer /shared/kit.sif: not on this machine; every node must find it "
        "at that path",
        f"kit: sbatch is not on PATH: wrote {script}; submit it where Slurm runs "
        f"(sbatch {script}), then: kit slurm collect {out}",
    ]
    assert "apptainer exec --nv" in script.read_text()
    specs = sorted(p.parent.name for p in (out / "runs").glob("*/spec.json"))
    assert specs == ["allreduce.no-p2p.r0", "allreduce.p2p.r0"]
    results = json.loads((out / "results.json").read_text())
    assert results["status"] == "submitted" and results["runtime"] == "slurm"
    assert results["slurm"]["launcher"] == "apptainer" and results["slurm"]["nodes"] == 2


def test_a_sif_on_this_machine_needs_no_note(tmp_path):
    recipe = tmp_path / "r.yaml"
    recipe.write_text(RECIPE)
    sif = tmp_path / "kit.sif"
    sif.write_bytes(b"")
    proc = _kit("slurm", str(recipe), "--apptainer", str(sif), "--dry-run",
                path=str(tmp_path / "no-bin"))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "note" not in proc.stderr and f"apptainer exec --nv {sif}" in proc.stdout


def _slurm_up() -> str | None:
    if shutil.which("sbatch") is None or shutil.which("sinfo") is None:
        return "needs a Slurm cluster (no sbatch/sinfo): as root, bash scripts/ci-slurm.sh"
    proc = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True)
    if proc.returncode != 0 or "idle" not in proc.stdout:
        why = " ".join((proc.stderr or proc.stdout).split())[:100]
        return f"needs an idle Slurm node ({why}): as root, bash scripts/ci-slurm.sh"
    return None


def test_collect_of_a_job_that_never_ran_seals_every_run_as_failed(tmp_path):
    """A cancelled job left no exit codes: each planned run is failed with the reason, and the
    bundle is sealed (through the batch runtime the registry names)."""
    recipe = parse_recipe(RECIPE.replace("gpus: 8", "gpus: 2"), "allreduce-2node.yaml")
    opts = SlurmOptions(host_python=PY, device="cpu", out=tmp_path / "b")
    write_bundle(make_job(recipe, opts))
    bundle, code = registry.batch("slurm").collect(tmp_path / "b")
    assert code == 1 and bundle.results.status == "failed"  # no run is ok
    runs = bundle.results.runs
    assert len(runs) == 2 and {r.status for r in runs} == {"failed"}
    assert all("the Slurm job did not run it" in (r.error or "") for r in runs)
    assert all(r.launch is not None and r.launch.launcher == "host" for r in runs)
    for r in runs:  # each node's record, typed: its log was not found, its tail is empty
        assert r.nodes is not None and [(n.node, n.found, n.log_tail) for n in r.nodes] == [
            (0, False, ""), (1, False, "")
        ]  # fmt: skip
        assert r.world_size == 4 and r.network is not None
    assert verify_manifest(tmp_path / "b").ok
    written = json.loads((tmp_path / "b" / "results.json").read_text())["runs"]
    assert [r["launch"]["launcher"] for r in written] == ["host", "host"]


@pytest.mark.slurm
@pytest.mark.slow
@needs_pdf
def test_real_submission_on_a_one_node_cluster(tmp_path):
    """Real: sbatch, srun, scontrol, torchrun's c10d rendezvous, the worker, collect, report.
    Not real here: the container (the task runs the host's Python, --host-python) and a second
    node (the cluster is this one machine)."""
    why = _slurm_up()
    if why:
        pytest.skip(why)
    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        RECIPE.replace("gpus: 8", "gpus: 2")
        .replace("  - kind: allreduce", "  - kind: allreduce\n    params: {max_bytes: 4096, factor: 8, iters: 3, warmup_iters: 1, trials: 1}")
        .split("nodes:")[0]
    )  # fmt: skip
    out = tmp_path / "bundle"
    node_tmp = tmp_path / "node-tmp"
    node_tmp.mkdir()
    proc = _kit("slurm", str(recipe), "--device", "cpu", "--host-python", PY, "--out", str(out),
                "--wait", tmp=node_tmp)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    # the node's temporary folder as the job found it: torchrun's folders (one a run) went to the
    # job's scratch, which the job removed
    assert sorted(p.name for p in node_tmp.iterdir()) == []
    results = json.loads((out / "results.json").read_text())
    assert results["status"] == "complete" and results["runtime"] == "slurm"
    assert results["slurm"]["job_id"].isdigit()
    assert [r["status"] for r in results["runs"]] == ["ok", "ok"]
    for r in results["runs"]:
        assert r["world_size"] == 2 and r["backend"] == "gloo"
        assert r["metrics"]["wrong_total"]["value"] == 0
        assert r["nodes"][0]["found"] and r["network"] == {"transport": ["gloo/TCP"]}
    assert [r["env"].get("NCCL_P2P_DISABLE") for r in results["runs"]] == [None, "1"]
    job_out = (out / "slurm" / f"job-{results['slurm']['job_id']}.out").read_text()
    assert "rendezvous on" in job_out and "allreduce.no-p2p.r0: exit status 0" in job_out
    hardware = json.loads((out / "hardware.json").read_text())
    assert hardware["nodes"][0]["hostname"] == os.uname().nodename
    assert (out / "report.pdf").is_file() and "<h3>Nodes</h3>" in (out / "report.html").read_text()
    assert verify_manifest(out).ok
