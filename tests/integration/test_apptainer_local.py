"""The apptainer runtime end to end, through a stand-in `apptainer` (Apptainer itself cannot be
installed on the test machine: no Debian bookworm package).

The stand-in is written to a folder put first on PATH. It refuses any call but
`apptainer exec [--nv] [--bind SRC[:DST]]... [--pwd DIR] SIF COMMAND...` of an existing SIF, records
its argv, and runs COMMAND on this machine as a bind mount would show it (DST read as SRC in the
arguments and the variables), with the checkout as the image's own kit. So a real CPU recipe
goes through the real kit path: the registry, the probe, LocalRuntime, the heartbeat, torchrun,
the worker, the bundle, the report and a rerun.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, allreduce_recipe, run_kit

pytestmark = pytest.mark.slow

RECIPE = allreduce_recipe(
    "apptainer-smoke", "max_bytes: 4096, factor: 4, iters: 3, warmup_iters: 1, trials: 2"
)

STAND_IN = """\
#!{python}
import json, os, sys
args = sys.argv[1:]
with open({calls!r}, "a") as f:
    f.write(json.dumps(args) + "\\n")
if not args or args[0] != "exec":
    sys.exit("stand-in apptainer: only `exec` is expected, got %r" % args[:1])
binds, pwd, i = {{}}, None, 1
while i < len(args) and args[i].startswith("-"):
    if args[i] == "--nv":
        i += 1
    elif args[i] in ("--bind", "--pwd") and i + 1 < len(args):
        if args[i] == "--bind":
            src, _, dst = args[i + 1].partition(":")  # SRC alone: bound where it lies
            binds[dst or src] = src
        else:
            pwd = args[i + 1]
        i += 2
    else:
        sys.exit("stand-in apptainer: unexpected flag %r" % args[i])
if i + 1 >= len(args) or not os.path.isfile(args[i]):
    sys.exit("FATAL: could not open image %r" % args[i:i + 1])

def seen(text):
    for dst, src in binds.items():
        text = text.replace(dst, src)
    return text

command = [seen(a) for a in args[i + 1:]]
if os.path.basename(args[i]) == "unlisted.sif" and command[1:2] == ["-c"]:
    sys.exit("stand-in apptainer: this image cannot run the scan")
env = {{k: seen(v) for k, v in os.environ.items()}}
if "PYTHONPATH" in env:
    sys.exit("stand-in apptainer: the host's PYTHONPATH reached the container")
env["PYTHONPATH"] = {kit!r}  # the image's own copy of kit
if pwd:
    os.chdir(seen(pwd))
os.execvpe(command[0], command, env)
"""


@pytest.fixture
def stand_in(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """The environment of a `kit` command with the stand-in first on PATH (then this Python's
    torchrun, as the image's), and the file it records its calls in."""
    folder = tmp_path / "bin"
    folder.mkdir()
    calls = tmp_path / "calls.jsonl"
    exe = folder / "apptainer"
    exe.write_text(STAND_IN.format(python=sys.executable, calls=str(calls), kit=str(ROOT)))
    exe.chmod(0o755)
    path = os.pathsep.join((str(folder), str(Path(sys.executable).parent), os.environ["PATH"]))
    return {**os.environ, "PATH": path}, calls


def calls_of(path: Path) -> list[list[str]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []


def test_a_recipe_runs_in_the_sif_and_the_bundle_says_so(tmp_path, stand_in):
    env, calls = stand_in
    sif = tmp_path / "kit-cpu.sif"
    # any bytes, the kit records their sha256; this run's own: the inventory cache is shared
    # and outlives the run (tmp_path repeats from one pytest session to the next)
    sif.write_bytes(f"stand-in SIF of {tmp_path} {os.urandom(8).hex()}\n".encode())
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(RECIPE)
    out = tmp_path / "bundle"
    proc = run_kit("reproduce", str(recipe), "--device", "cpu", "--apptainer", str(sif),
                   "--out", str(out), env=env)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    fp = json.loads((out / "environment.json").read_text())
    assert (fp["placement"], fp["engine"], fp["runtime"]) == ("local", "apptainer", "apptainer")
    assert fp["pinned"] is True and fp["image"] == str(sif.resolve())
    digest = hashlib.sha256(sif.read_bytes()).hexdigest()
    assert (fp["image_id"], fp["content_hash"]) == (f"sha256:{digest}", digest)
    assert fp["container"]["torch"]  # probed inside "the image"
    results = json.loads((out / "results.json").read_text())
    assert results["runtime"] == "apptainer" and results["pinned"] is True
    (run,) = results["runs"]
    assert run["status"] == "ok" and run["world_size"] == 2
    probe, scan, launch = calls_of(calls)
    assert probe == ["exec", str(sif.resolve()), "python", "-m", "kit.worker.probe"]
    # the SIF's inventory (issue 49): kit.shared.imagescan run inside it, once per SIF content
    assert scan[:4] == ["exec", str(sif.resolve()), "python", "-c"]
    software = json.loads((out / "software.json").read_text())
    assert software["image_id"] == fp["image_id"] and software["distributions"]
    assert "image inventory:" in proc.stderr and "made in" in proc.stderr
    run_dir = out / "runs" / run["run_id"]
    # the launch's own TMPDIR (torchrun's torchelastic_* folders go there, not into the /tmp that
    # Apptainer shares with the host), bound where it lies, and removed with the launch
    tmp = Path(os.environ["TMPDIR"]).resolve()
    scratch = Path(launch[2])
    assert scratch.parent.resolve() == tmp and scratch.name.startswith("kit-launch-"), launch
    assert launch == ["exec", "--bind", str(scratch), "--bind", f"{run_dir.resolve()}:/kit/run",
                      "--pwd", "/kit/run", str(sif.resolve()), "torchrun", "--standalone",
                      "--nproc-per-node=2", "-m", "kit.worker", "/kit/run/spec.json"]  # fmt: skip
    assert not scratch.exists() and not list(tmp.glob("torchelastic_*"))
    assert "in an apptainer container" in (out / "report.html").read_text()

    # a rerun: the SIF is the user's to name again
    again = tmp_path / "again"
    proc = run_kit("reproduce", str(out), "--out", str(again), env=env)
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0, proc.stderr
    assert "ran in an Apptainer image" in proc.stderr and "--apptainer IMAGE.sif" in proc.stderr
    assert str(sif.resolve()) in proc.stderr and not again.exists()
    proc = run_kit("reproduce", str(out), "--apptainer", str(sif), "--out", str(again), env=env)
    assert proc.returncode == 0, proc.stderr
    rerun = json.loads((again / "environment.json").read_text())
    assert (rerun["engine"], rerun["image_id"]) == ("apptainer", fp["image_id"])
    assert json.loads((again / "results.json").read_text())["environment_diff"] in (None, [])
    assert "image inventory:" in proc.stderr and "(cached)" in proc.stderr
    assert (again / "software.json").read_bytes() == (out / "software.json").read_bytes()
    assert len(calls_of(calls)) == 5  # a probe and a launch again: the inventory was cached

    # another SIF whose inventory cannot be made: only its hash is known, and it differs, so
    # --strict-env refuses before any run
    unlisted = tmp_path / "unlisted.sif"
    unlisted.write_bytes(f"an image of {tmp_path} that cannot be scanned\n".encode())
    proc = run_kit("reproduce", str(out), "--apptainer", str(unlisted), "--strict-env",
                   "--out", str(tmp_path / "unlisted"), env=env)  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert "--strict-env: the environment differs" in proc.stderr and "content_hash" in proc.stderr
    assert not (tmp_path / "unlisted").exists()
    assert [c[3:5] for c in calls_of(calls)[5:]] == [["-m", "kit.worker.probe"], ["-c", scan[4]]]

    # another SIF that holds what this one holds (the stand-in runs every SIF on this machine):
    # its hash is a note that cannot change a number, the contents match, and it runs
    other = tmp_path / "other.sif"
    other.write_bytes(f"another image of {tmp_path} {os.urandom(8).hex()}\n".encode())
    proc = run_kit("reproduce", str(out), "--apptainer", str(other), "--strict-env",
                   "--out", str(tmp_path / "other"), env=env)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "content_hash" in proc.stderr and "(cannot change a number)" in proc.stderr
    assert "The environment matches: nothing the runs loaded differs" in proc.stderr


def test_without_apptainer_on_path_one_line_names_it(tmp_path):
    sif = tmp_path / "kit-cpu.sif"
    sif.write_bytes(b"x")
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(RECIPE)
    env = {**os.environ, "PATH": str(Path(sys.executable).parent)}
    proc = run_kit("reproduce", str(recipe), "--device", "cpu", "--apptainer", str(sif),
                   "--out", str(tmp_path / "b"), env=env)  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        "kit: error: --runtime apptainer: `apptainer` is not on PATH (install Apptainer, or use "
        "another --runtime: host, docker, podman)"
    )
    assert not (tmp_path / "b").exists()
