"""Round five of the black-box pass (issue 37): a run killed in flight, stop signals at every
stage, notices before errors, options that mean nothing for the run, strict recipe integers,
refs' messages, an empty KIT_REFS_DB, a bundle compared with itself, CPU bundles and buying.

Every case runs the real `kit` command in a subprocess, as a user would."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kit.bundle import verify_manifest
from kit.shared import files
from tests.conftest import ROOT, run_kit, sigint_as_default

KILLED = """\
kit: 1
name: killed
gpus: 2
repeats: 1
timeout_s: 600
variants: [p2p]
benchmarks:
  - kind: allreduce
    name: fast
    params: {max_bytes: 4096, factor: 4, iters: 2, warmup_iters: 1, trials: 1}
  - kind: allreduce
    name: slow
    params: {max_bytes: 4096, factor: 4, iters: 1000000, warmup_iters: 1, trials: 100}
"""


def _start(tmp_path: Path, recipe: str = KILLED) -> tuple[subprocess.Popen, Path, Path]:
    """`kit reproduce` of a CPU recipe (host runtime): the first benchmark finishes in seconds,
    the second runs until it is stopped. Returns once the second is in flight."""
    path = tmp_path / "recipe.yaml"
    path.write_text(recipe)
    out, log = tmp_path / "bundle", tmp_path / "out.txt"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "kit", "reproduce", str(path), "--device", "cpu",
           "--runtime", "host", "--out", str(out)]  # fmt: skip
    with open(log, "w") as f:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=f, stderr=subprocess.STDOUT,
                                preexec_fn=sigint_as_default)  # fmt: skip
    deadline = time.monotonic() + 180
    beat = out / files.RUNS / "slow.p2p.r0" / "heartbeat"
    while not beat.exists():
        assert proc.poll() is None, log.read_text()
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.3)
    time.sleep(0.5)  # its ranks are working (in flight since their first heartbeat)
    return proc, out, log


@pytest.mark.slow
def test_seal_after_sigkill_records_the_run_in_flight(tmp_path):
    proc, out, _ = _start(tmp_path)
    proc.kill()
    proc.wait(timeout=30)
    time.sleep(1)
    sealed = run_kit("seal", str(out), timeout=300)
    assert sealed.returncode == 0, sealed.stderr
    assert sealed.stderr.count("\n") == 1, sealed.stderr
    line = sealed.stderr
    assert "the driver was killed during slow.p2p.r0" in line
    assert "did not run to the end: slow.p2p.r0" in line and "seal" in line
    assert "interrupted (no manifest" not in line  # not "the seal was interrupted"
    results = json.loads((out / files.RESULTS).read_text())
    runs = {r["run_id"]: r for r in results["runs"]}
    assert runs["fast.p2p.r0"]["status"] == "ok" and runs["fast.p2p.r0"]["metrics"]
    stopped = runs["slow.p2p.r0"]
    assert (stopped["benchmark"], stopped["variant"], stopped["repeat"]) == ("slow", "p2p", 0)
    assert stopped["status"] == "failed" and stopped["metrics"] == {}
    assert stopped["error"].startswith("did not run to the end")
    assert results["sealed_after"]["in_flight_runs"] == ["slow.p2p.r0"]
    assert results["status"] == "interrupted"
    assert verify_manifest(out).ok
    html = (out / "report.html").read_text()
    assert "did not run to the end" in html and "slow.p2p.r0" in html


@pytest.mark.slow
@pytest.mark.parametrize(
    "sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=lambda s: s.name
)
def test_a_stop_signal_during_a_run_exits_as_at_every_stage(tmp_path, sig):
    """SIGINT 130, SIGTERM 143 (SIGHUP 129) while a run goes, as while the report renders
    (tests/hostile/test_hostile_sigterm.py) or the image is chosen: 128 + the signal; the bundle
    is sealed with the run that finished."""
    proc, out, log = _start(tmp_path)
    proc.send_signal(sig)
    proc.wait(timeout=300)
    text = log.read_text()
    assert proc.returncode == 128 + sig, text
    assert "Traceback" not in text and f"interrupted by {sig.name}" in text
    results = json.loads((out / files.RESULTS).read_text())
    assert results["status"] == "interrupted"
    assert [r["status"] for r in results["runs"]] == ["ok", "failed"]
    assert verify_manifest(out).ok


def test_a_stop_signal_before_the_runs_exits_128_plus_it(tmp_path):
    """The same codes before any run: the driver is still taking the inventory."""
    path = tmp_path / "recipe.yaml"
    path.write_text(KILLED)
    for sig in (signal.SIGINT, signal.SIGTERM):
        proc = subprocess.Popen(
            [sys.executable, "-m", "kit", "reproduce", str(path), "--device", "cpu",
             "--runtime", "host", "--out", str(tmp_path / sig.name)],
            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, preexec_fn=sigint_as_default,
        )  # fmt: skip
        time.sleep(1.0)  # importing: no run has started
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 128 + sig, err
        assert "Traceback" not in err


SMOKE = ROOT / "tests" / "fixtures" / "bundles" / "cpu-smoke"


@pytest.mark.parametrize("where", ["not-empty", "under-a-file", "in-a-bundle"])
def test_a_rerun_s_bad_out_is_the_only_line(tmp_path, where):
    """No notice (rerunning, the recipe's variables, the environment) before the path's error."""
    full = tmp_path / "full"
    full.mkdir()
    (full / "f").write_text("x")
    out = {"not-empty": full, "under-a-file": full / "f" / "x",
           "in-a-bundle": SMOKE / "sub"}[where]  # fmt: skip
    proc = run_kit("reproduce", str(SMOKE), "--out", str(out), timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and proc.stdout == "", proc.stderr
    assert proc.stderr.startswith(f"kit: error: --out {out}"), proc.stderr


@pytest.mark.parametrize("how", ["recipe", "rerun"])
def test_allow_on_a_cpu_run_is_refused(tmp_path, how):
    """Every preflight check is a GPU check: --allow on a CPU run means nothing; one line, 2,
    before any run (no bundle made)."""
    out = tmp_path / "out"
    target = str(ROOT / "recipes" / "allreduce.yaml") if how == "recipe" else str(SMOKE)
    extra = ["--device", "cpu"] if how == "recipe" else []
    proc = run_kit("reproduce", target, *extra, "--allow", "ecc", "--out", str(out), timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and "--allow ecc" in proc.stderr, proc.stderr
    assert "cpu run" in proc.stderr and not out.exists()


@pytest.mark.parametrize(
    "field, value",
    [("iters", "true"), ("iters", "2.5"), ("iters", '"3"'), ("warmup_iters", "false"),
     ("max_bytes", "1.0e3"), ("gpus", "true"), ("expect_value", "true")],
)  # fmt: skip
def test_recipe_numbers_are_strict(tmp_path, field, value):
    """A bool, a float or a string where an integer belongs is refused, never coerced (YAML's
    `true` is no iteration count): one line naming the field and its line, exit 2."""
    params = {"iters": "5", "warmup_iters": "1", "max_bytes": "4096"}
    gpus, expect = "2", "1"
    if field == "gpus":
        gpus = value
    elif field == "expect_value":
        expect = value
    else:
        params[field] = value
    text = (
        f"kit: 1\nname: strict\ngpus: {gpus}\nbenchmarks:\n  - kind: allreduce\n    params:\n"
        + "".join(f"      {k}: {v}\n" for k, v in params.items())
        + f"    expect:\n      busbw_largest: {{value: {expect}, unit: GB/s}}\n"
    )
    path = tmp_path / "r.yaml"
    path.write_text(text)
    proc = run_kit("recipes", "validate", str(path))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.count("\n") == 1, proc.stderr
    name = {"expect_value": "value"}.get(field, field)
    assert f"{path}:" in proc.stderr and name in proc.stderr, proc.stderr
    good = "4096" if field == "max_bytes" else "2"
    path.write_text(
        text.replace(f": {value}\n", f": {good}\n").replace(f"value: {value},", "value: 3,")
    )
    ok = run_kit("recipes", "validate", str(path))
    assert ok.returncode == 0, ok.stderr


@pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="ssh-keygen missing")
@pytest.mark.parametrize("command", ["add", "standing"])
def test_refs_errors_suggest_only_their_own_options(tmp_path, command):
    """`kit refs add` / `standing` have no --read-broken-signature: their refusal of a bundle
    whose signature is broken must not suggest it (and the command really lacks it)."""
    from tests.hostile.test_hostile_broken_signature import garbage

    b = garbage(tmp_path)
    env = {**os.environ, "KIT_REFS_DB": str(tmp_path / "refs.sqlite")}
    proc = run_kit("refs", command, str(b), env=env)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "signature" in proc.stderr.lower() and "--read-broken-signature" not in proc.stderr
    options = [w for w in proc.stderr.split() if w.startswith("--")]
    helptext = run_kit("refs", command, "--help").stdout
    assert all(o.strip("(),;.") in helptext for o in options), (options, proc.stderr)
    compare = run_kit("compare", str(b), str(SMOKE))  # a command that has it still names it
    assert compare.returncode == 2 and "--read-broken-signature" in compare.stderr


def test_a_float_parameter_is_never_a_boolean(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text(
        "kit: 1\nname: f\nbenchmarks:\n  - kind: gpt2_ddp\n    params: {min_window_s: true}\n"
    )
    proc = run_kit("recipes", "validate", str(path))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "min_window_s" in proc.stderr


@pytest.mark.parametrize("value", ["", "  "], ids=["empty", "blank"])
@pytest.mark.parametrize("command", [["list"], ["add", str(SMOKE)], ["standing", str(SMOKE)]])
def test_an_empty_kit_refs_db_is_refused(tmp_path, value, command):
    """KIT_REFS_DB set but empty never falls back to the default store (which is left alone)."""
    home = tmp_path / "home"
    env = {**os.environ, "KIT_REFS_DB": value, "HOME": str(home),
           "XDG_DATA_HOME": str(home / "data")}  # fmt: skip
    proc = run_kit("refs", *command, env=env)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "KIT_REFS_DB is set but empty" in proc.stderr and proc.stdout == ""
    assert not (home / "data" / "kit").exists()


@pytest.mark.parametrize("spelling", ["same", "slash", "dotdot", "symlink"])
def test_compare_refuses_the_same_bundle_twice(tmp_path, spelling):
    link = tmp_path / "link"
    link.symlink_to(SMOKE)
    other = {
        "same": str(SMOKE),
        "slash": f"{SMOKE}/",
        "dotdot": str(SMOKE.parent / ".." / SMOKE.parent.name / SMOKE.name),
        "symlink": str(link),
    }[spelling]
    out = tmp_path / "cmp"
    proc = run_kit("compare", str(SMOKE), other, "--out", str(out))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "the same bundle" in proc.stderr and not out.exists()


def _cpu_bundle(tmp_path: Path, name: str, cpu_model: str | None, created: str) -> Path:
    """The CPU smoke fixture as a bundle this kit writes now (hardware.json names the CPU's
    model), another run of it (its own created_at), resealed."""
    from kit.bundle import write_manifest

    b = tmp_path / name
    shutil.copytree(SMOKE, b)
    hardware = json.loads((b / files.HARDWARE).read_text())
    hardware.setdefault("host", {})["cpu_model"] = cpu_model
    (b / files.HARDWARE).write_text(json.dumps(hardware))
    results = json.loads((b / files.RESULTS).read_text())
    results["created_at"] = created
    (b / files.RESULTS).write_text(json.dumps(results))
    write_manifest(b)
    return b


def test_a_cpu_run_is_not_comparable_with_a_gpu_figure_given_as_a_number(tmp_path):
    proc = run_kit("accept", str(SMOKE), "--against", "1GB/s")
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert "NOT COMPARABLE" in proc.stdout and "device cpu" in proc.stdout
    anyway = run_kit("accept", str(SMOKE), "--against", "1GB/s", "--judge-anyway")
    assert anyway.returncode in (0, 1, 3), anyway.stdout + anyway.stderr
    assert "judged despite" in anyway.stdout and "device cpu" in anyway.stdout


def test_a_price_per_gpu_hour_for_a_cpu_bundle_is_refused(tmp_path):
    a = _cpu_bundle(tmp_path, "a", "AMD EPYC", "2026-11-21T00:00:00+00:00")
    for args in (["compare", str(SMOKE), str(a), "--price", "1=3USD"],
                 ["compare", str(SMOKE), str(a), "--price-per-gpu-hour", "3USD"],
                 ["report", str(a), "--price-per-gpu-hour", "3USD"]):  # fmt: skip
        proc = (
            run_kit(*args, "--out", str(tmp_path / "c")) if args[0] == "compare" else run_kit(*args)
        )
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1, (args, proc.stderr)
        assert "device cpu" in proc.stderr and "GPU-hour" in proc.stderr, proc.stderr
    assert not (tmp_path / "c").exists()


def test_like_for_like_cpu_bundles_compare(tmp_path):
    """Two runs on one CPU model, as many processes: judged one against the other (the GPU
    fields they lack are no difference); another CPU model is a real difference."""
    a = _cpu_bundle(tmp_path, "a", "AMD EPYC 7B13", "2026-11-21T00:00:00+00:00")
    b = _cpu_bundle(tmp_path, "b", "AMD EPYC 7B13", "2026-11-21T01:00:00+00:00")
    c = _cpu_bundle(tmp_path, "c", "Intel Xeon 8480", "2026-11-21T02:00:00+00:00")
    same = run_kit("accept", str(a), "--against", str(b))
    assert same.returncode in (0, 1, 3), same.stdout + same.stderr
    assert "NOT COMPARABLE" not in same.stdout
    other = run_kit("accept", str(a), "--against", str(c))
    assert other.returncode == 4, other.stdout + other.stderr
    assert "CPU Intel Xeon 8480 there, AMD EPYC 7B13 here" in other.stdout
