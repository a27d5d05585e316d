"""`kit k8s`: the manifests (the issue's command, checked by the kubernetes client's models), the
option errors, and the real CLI against a localhost Kubernetes API (kmock's emulator, with the
test playing the Job controller and kubelet: tests/integration/k8s_cluster.py): submit, wait,
gather into a bundle that verifies; a pod failing; a pod evicted; Ctrl-C deleting what the kit
created. No real cluster runs here: no API server can be installed on these machines.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

pytest.importorskip("kmock", reason="kmock (the localhost Kubernetes API) is a dev dependency")
from kubernetes import client

from kit.io.errors import InputError
from kit.run.k8s.manifests import validate
from kit.run.k8s.runtime import split_log
from tests.conftest import run_kit, sigint_as_default
from tests.integration.k8s_cluster import NS, Controller, Emulator

ROOT = Path(__file__).resolve().parents[2]
PY = Path(sys.executable)
IMAGE = "registry.example/kit-cuda13@sha256:" + "0123456789abcdef" * 4
# the issue's command: two nodes of eight GPUs, the image by digest, nothing submitted
TWO_NODES_DRY = ("k8s", "recipes/allreduce.yaml", "--nodes", "2", "--gpus-per-node", "8",
                 "--image", IMAGE, "--dry-run")  # fmt: skip


def kit(*args: str) -> subprocess.CompletedProcess[str]:
    """`python -m kit ARGS` in the checkout, forked from the test worker's kit zygote."""
    return run_kit(*args, cwd=ROOT, timeout=600)


def docs(text: str) -> list[dict]:
    return [d for d in yaml.safe_load_all(text) if d is not None]


def _models(objs: list[dict]) -> None:
    """Every manifest through the client's own models, independently of the kit's check."""
    api = client.ApiClient()
    for obj in objs:
        model = {"Service": "V1Service", "ConfigMap": "V1ConfigMap", "Job": "V1Job"}.get(
            obj["kind"]
        )
        if model:
            parsed = api._ApiClient__deserialize(obj, model)
            assert api.sanitize_for_serialization(parsed) == obj


def test_dry_run_manifests_of_the_issue() -> None:
    proc = kit(
        *TWO_NODES_DRY,
        "--namespace",
        "ml",
        "--node-selector",
        "nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3",
        "--toleration",
        "nvidia.com/gpu:NoSchedule",
        "--service-account",
        "bench",
    )
    assert proc.returncode == 0, proc.stderr
    objs = docs(proc.stdout)
    _models(objs)
    kinds = [o["kind"] for o in objs]
    # 3 repeats x P2P on and off, interleaved: a ConfigMap and an Indexed Job each
    assert kinds == ["Service"] + ["ConfigMap", "Job"] * 6
    svc, jobs = objs[0], [o for o in objs if o["kind"] == "Job"]
    assert svc["spec"]["clusterIP"] == "None" and svc["spec"]["publishNotReadyAddresses"]
    variants = []
    for job in jobs:
        spec = job["spec"]
        assert (spec["completionMode"], spec["completions"], spec["parallelism"]) == (
            "Indexed",
            2,
            2,
        )
        pod = spec["template"]["spec"]
        assert pod["subdomain"] == svc["metadata"]["name"]
        assert pod["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
        assert pod["tolerations"] == [
            {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
        ]
        assert pod["serviceAccountName"] == "bench"
        c = pod["containers"][0]
        assert c["image"] == IMAGE
        assert c["resources"]["limits"] == {"nvidia.com/gpu": "8"}
        script = c["command"][2]
        assert (
            "torchrun --nnodes=2 --nproc-per-node=8 --node-rank=$JOB_COMPLETION_INDEX "
            "--rdzv-backend=c10d --rdzv-endpoint=$KIT_RDZV_ENDPOINT" in script
        )
        env = {e["name"]: e["value"] for e in c["env"]}
        name = job["metadata"]["name"]
        assert env["KIT_RDZV_ENDPOINT"] == f"{name}-0.{svc['metadata']['name']}:29400"
        variants.append(env.get("NCCL_P2P_DISABLE"))
        assert job["metadata"]["namespace"] == "ml"
    assert variants == [None, "1"] * 3


def test_dry_run_jobset() -> None:
    proc = kit(
        *TWO_NODES_DRY,
        "--jobset",
        "--repeats",
        "1",
    )
    assert proc.returncode == 0, proc.stderr
    objs = docs(proc.stdout)
    jobsets = [o for o in objs if o["kind"] == "JobSet"]
    assert len(jobsets) == 2
    for js in jobsets:
        validate(js)
        name = js["metadata"]["name"]
        assert js["apiVersion"] == "jobset.x-k8s.io/v1alpha2"
        assert js["spec"]["network"]["subdomain"] == objs[0]["metadata"]["name"]
        env = js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
        env = {e["name"]: e["value"] for e in env["containers"][0]["env"]}
        assert env["KIT_RDZV_ENDPOINT"].startswith(f"{name}-node-0-0.")


def test_validate_names_a_mistyped_field() -> None:
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "x"},
        "spec": {
            "completionMode": "Indexed",
            "template": {"spec": {"containers": [{"name": "w", "image": "i", "resourcse": {}}]}},
        },
    }
    with pytest.raises(InputError, match="unknown or mistyped field"):
        validate(job)
    del job["spec"]["template"]["spec"]["containers"][0]["name"]
    with pytest.raises(InputError, match="not a valid V1Job"):
        validate(job)


@pytest.mark.parametrize(
    ("args", "words"),
    [
        ([], "name the image by digest"),
        (["--image", "registry.example/kit:latest"], "expected REPO@sha256"),
        (["--image", IMAGE, "--toleration", "a=b:Sometimes"], "effect 'Sometimes'"),
        (["--image", IMAGE, "--node-selector", "novalue"], "expected KEY=VALUE"),
        (["--image", IMAGE, "--namespace", "Bad_NS"], "not a DNS label"),
        (["--image", IMAGE, "--pending-timeout", "inf"], "--pending-timeout"),
    ],
)
def test_option_errors_are_one_line(args: list[str], words: str) -> None:
    proc = kit("k8s", "recipes/allreduce.yaml", "--dry-run", *args)
    assert proc.returncode == 2
    assert words in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_without_image_a_built_but_unpushed_image_is_named() -> None:
    """The recipe's image, tagged as `kit build` tags it in a real Docker daemon but never
    pushed (no RepoDigests): the one line names that tag and how to push it."""
    docker = pytest.importorskip("docker")
    from kit.recipe import load_recipe
    from kit.run.k8s.image import recipe_tag

    try:
        daemon = docker.from_env(timeout=60)
        daemon.ping()
    except Exception as e:
        pytest.skip(f"needs a Docker daemon ({type(e).__name__}): bash scripts/ci-docker.sh")
    tag = recipe_tag(load_recipe(ROOT / "recipes/allreduce.yaml"), "cuda")
    base = daemon.images.get(os.environ.get("KIT_TEST_BASE_IMAGE", "kit-test-base:bookworm"))
    made = not any(t == tag for t in base.tags) and base.tag(*tag.split(":"))
    try:
        proc = kit("k8s", "recipes/allreduce.yaml", "--dry-run")
    finally:
        if made:
            daemon.images.remove(tag, noprune=True)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert f"{tag} was not pushed" in proc.stderr and f"docker tag {tag} REPO:TAG" in proc.stderr


def test_without_image_the_pushed_digest_is_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    """A push records RepoDigests; no registry is reachable here, so the daemon's answer for
    the recipe's tag is the one stand-in: the manifests then pull that digest, and say so."""
    from types import SimpleNamespace

    from kit.recipe import load_recipe
    from kit.run.k8s import image as k8s_image
    from kit.run.k8s.manifests import K8sOptions
    from kit.run.k8s.runtime import K8sRuntime

    recipe = load_recipe(ROOT / "recipes/allreduce.yaml")
    asked: list[str] = []

    def get(tag: str) -> SimpleNamespace:
        asked.append(tag)
        return SimpleNamespace(attrs={"RepoDigests": [IMAGE]})

    fake = SimpleNamespace(images=SimpleNamespace(get=get))
    monkeypatch.setattr(k8s_image, "docker_client", lambda: fake)
    opts = K8sOptions(image=None, nodes=2, gpus_per_node=8, command="kit k8s")
    text = K8sRuntime(opts).submit(recipe, dry_run=True)
    assert asked and asked[0].startswith("kit-cuda13:")
    assert f"# image: the recipe's, as pushed: {IMAGE}" in text
    images = {c["image"] for d in docs(text) if d["kind"] == "Job"
              for c in d["spec"]["template"]["spec"]["containers"]}  # fmt: skip
    assert images == {IMAGE}


def test_split_log_takes_only_whole_files_after_the_marker() -> None:
    m = "@@kit-0123"
    good = "eyJhIjogMX0="  # {"a": 1}
    log = (
        f"out\n{m} file result\nnot after the exit line\n{m} end\nmore\n{m} exit 3\n"
        f"{m} file result\n{good}\n{m} end\n{m} file node\n!!!\n{m} end\n"
        f"{m} file other\n{good}\n{m} end\n{m} file node\n{good}\n"
    )  # cut short
    text, found, code = split_log(log.encode(), m)
    assert code == 3 and found == {"result": b'{"a": 1}'}  # garbled, unknown and cut: none
    assert text.endswith("more\n") and f"{m} exit" not in text
    assert split_log(b"no marker at all", m) == ("no marker at all", {}, None)


@pytest.fixture
def emu():
    e = Emulator()
    yield e
    e.close()


def _submit(emu: Emulator, tmp_path: Path, mode: str, *extra: str, wait: bool = True):
    controller = Controller(emu, mode, tmp_path / "pods", PY.parent)
    args = [
        "k8s",
        "recipes/allreduce.yaml",
        "--device",
        "cpu",
        "--nodes",
        "2",
        "--gpus-per-node",
        "1",
        "--repeats",
        "1",
        "--image",
        IMAGE,
        "--namespace",
        NS,
        "--kubeconfig",
        str(emu.kubeconfig(tmp_path / "kubeconfig")),
        "--out",
        str(tmp_path / "b"),
        *(extra or ("--pending-timeout", "60")),
    ]
    if wait:
        return kit(*args), controller
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [str(PY), "-m", "kit", *args],
        cwd=ROOT,
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=sigint_as_default,  # a background job's children inherit SIGINT ignored
    )
    return proc, controller


def _nothing_left(emu: Emulator) -> None:
    assert emu.names() == {"Service": [], "ConfigMap": [], "Job": [], "JobSet": []}


@pytest.mark.slow
def test_submit_wait_and_collect_a_bundle_that_verifies(emu: Emulator, tmp_path: Path) -> None:
    proc, controller = _submit(emu, tmp_path, "run")
    controller.close()
    assert proc.returncode == 0, proc.stderr + proc.stdout
    bundle = tmp_path / "b"
    assert proc.stdout.strip().splitlines()[-1] == str(bundle)
    # what the kit sent: one Indexed Job per run, P2P on and off
    assert [j["kind"] for j in controller.jobs] == ["Job", "Job"]
    _nothing_left(emu)
    results = json.loads((bundle / "results.json").read_text())
    assert results["status"] == "complete" and results["runtime"] == "k8s"
    assert results["k8s"]["pods"] == 2 and results["k8s"]["image"] == IMAGE
    assert results["k8s"]["server_version"] == "v1.26.4+emu"  # as the emulator's /version/ says
    for run in results["runs"]:
        assert run["status"] == "ok" and run["world_size"] == 2
        assert [n["host"] for n in run["nodes"]] == ["gpu-node-0", "gpu-node-1"]
        assert run["metrics"]  # measured by the worker the pods ran
    hardware = json.loads((bundle / "hardware.json").read_text())
    assert [n["node"] for n in hardware["nodes"]] == [0, 1]
    assert all("hostname" in n or "host" in n or "cpus" in n for n in hardware["nodes"])
    log = (bundle / "logs" / f"{results['runs'][0]['run_id']}.log").read_text()
    # each pod's own log, every line of it in the run's log under its node's prefix (the pod
    # that is not global rank 0 may print nothing: c10d ranks the pods as they arrive)
    run_id = results["runs"][0]["run_id"]
    for i in (0, 1):
        own = (bundle / "logs" / f"{run_id}.node{i}.log").read_text()
        assert all(f"[node{i}] {line}" in log for line in own.splitlines())
    assert "[kit.worker] all_reduce" in log and "@@kit-" not in log
    assert "Kubernetes, 2 pods" in (bundle / "report.html").read_text()
    check = kit("verify", str(bundle))
    assert check.returncode == 0, check.stderr


@pytest.mark.slow
@pytest.mark.parametrize(
    ("mode", "words"),
    [
        ("fail", "failed: OOMKilled (exit 137)"),
        ("evict", "evicted: Evicted; TerminationByKubelet; The node was low on resource: memory."),
    ],
)
def test_a_pod_failing_or_evicted_ends_the_run(
    emu: Emulator, tmp_path: Path, mode: str, words: str
) -> None:
    proc, controller = _submit(emu, tmp_path, mode)
    controller.close()
    assert proc.returncode == 1, proc.stderr
    _nothing_left(emu)
    results = json.loads((tmp_path / "b" / "results.json").read_text())
    assert results["status"] == "failed" and len(results["runs"]) == 2
    for run in results["runs"]:
        assert run["status"] == "failed"
        assert words in run["error"], run["error"]
        assert run["nodes"][1]["status"] == mode.replace("fail", "failed").replace(
            "evict", "evicted"
        )
        assert run["nodes"][0]["status"] == "stopped"  # the kit ended its job
    assert (
        "partial output of pod 1"
        in (tmp_path / "b" / "logs" / f"{results['runs'][0]['run_id']}.node1.log").read_text()
    )
    assert kit("verify", str(tmp_path / "b")).returncode == 0


@pytest.mark.slow
def test_pods_that_never_run_end_at_the_pending_timeout(emu: Emulator, tmp_path: Path) -> None:
    proc, controller = _submit(emu, tmp_path, "pending", "--pending-timeout", "1")
    controller.close()
    assert proc.returncode == 1, proc.stderr
    _nothing_left(emu)
    results = json.loads((tmp_path / "b" / "results.json").read_text())
    for run in results["runs"]:
        assert run["status"] == "timeout"
        assert "not every pod ran within 1 s" in run["error"]
        assert "ImagePullBackOff: Back-off pulling image" in run["error"]
    assert kit("verify", str(tmp_path / "b")).returncode == 0


@pytest.mark.slow
@pytest.mark.parametrize(
    ("jobset", "sig", "code"), [(False, signal.SIGINT, 130), (True, signal.SIGTERM, 143)]
)
def test_ctrl_c_deletes_what_was_created(
    emu: Emulator, tmp_path: Path, jobset: bool, sig: signal.Signals, code: int
) -> None:
    proc, controller = _submit(
        emu,
        tmp_path,
        "hang",
        "--pending-timeout",
        "60",
        *(["--jobset"] if jobset else []),
        wait=False,
    )
    assert controller.running.wait(60), "no pods ran"
    time.sleep(0.5)
    names = emu.names()
    assert names["Service"] and names["ConfigMap"] and names["JobSet" if jobset else "Job"]
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=300)  # the report is rendered after the deletion
    controller.close()
    assert proc.returncode == code, err
    assert "deleted what this command created" in err and out == ""
    _nothing_left(emu)
    results = json.loads((tmp_path / "b" / "results.json").read_text())
    assert results["status"] == "interrupted"
    assert results["runs"][0]["error"] == "interrupted before it finished"
    assert kit("verify", str(tmp_path / "b")).returncode == 0


@pytest.mark.slow
def test_reproduce_of_a_k8s_bundle_reruns_on_kubernetes(emu: Emulator, tmp_path: Path) -> None:
    first, controller = _submit(emu, tmp_path, "evict", "--pending-timeout", "60",
                                "--toleration", "gpu:NoSchedule")  # fmt: skip
    assert first.returncode == 1, first.stderr
    sent = len(controller.jobs)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "KUBECONFIG": str(tmp_path / "kubeconfig")}
    again = subprocess.run([str(PY), "-m", "kit", "reproduce", str(tmp_path / "b"), "--out",
                            str(tmp_path / "b2")], capture_output=True, text=True, cwd=ROOT,
                           env=env, timeout=600)  # fmt: skip
    controller.close()
    assert again.returncode == 1, again.stderr  # evicted again: the same placement
    assert "on Kubernetes" in again.stderr
    _nothing_left(emu)
    old = json.loads((tmp_path / "b" / "results.json").read_text())
    new = json.loads((tmp_path / "b2" / "results.json").read_text())
    assert new["k8s"] | {"service": None} == old["k8s"] | {"service": None}
    assert new["reproduces"]["bundle"] == str(tmp_path / "b")
    rerun_jobs = controller.jobs[sent:]
    assert len(rerun_jobs) == 2
    pod = rerun_jobs[0]["spec"]["template"]["spec"]
    assert pod["containers"][0]["image"] == IMAGE
    assert pod["tolerations"] == [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]
    assert kit("verify", str(tmp_path / "b2")).returncode == 0
