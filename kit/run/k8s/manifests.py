"""`kit k8s`: the objects a recipe becomes on a Kubernetes cluster, as plain manifests.

One headless Service for the whole command (the pods' DNS names: `<job>-<index>.<service>`,
published before they are ready so that the rendezvous resolves while pods start), and for each
planned run (benchmark x variant x repeat: P2P on and off are separate jobs) a ConfigMap holding
its spec.json and an Indexed Job (or, with --jobset, a JobSet of one replicated job) of N pods,
each requesting G GPUs (`nvidia.com/gpu`) and running

    torchrun --nnodes N --nproc-per-node G --node-rank $JOB_COMPLETION_INDEX --rdzv-backend c10d
             --rdzv-endpoint <job>-0.<service>:PORT ... -m kit.worker /kit/run/spec.json

in the kit's image, named by digest. After torchrun a pod prints its result file and its node's
inventory on stdout between markers (base64), so the driver gathers everything through the API's
pod logs, with no shared volume. Pure functions of the job: `--dry-run` prints them, the tests
read them, `validate` checks each against the kubernetes client's own models.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kit.bundle import default_bundle_dir
from kit.io.errors import InputError
from kit.recipe import Recipe
from kit.recipe import gpus as recipe_gpus
from kit.run.batch import BatchJob, check_batch_options
from kit.run.plan import plan
from kit.runtime.launch import MOUNT, Rendezvous, torchrun
from kit.runtime.launch import environment as launch_environment
from kit.shared.files import RESULT, SPEC

DIGEST = re.compile(r"^[a-z0-9][a-z0-9._/:-]*@sha256:[0-9a-f]{64}$")
DNS_LABEL = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
LABEL_KEY = re.compile(r"^([a-z0-9.-]{1,253}/)?[A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?$")
LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?)?$")
EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
INDEX_LABEL = "batch.kubernetes.io/job-completion-index"  # the Job controller sets it on pods
BUNDLE_LABEL = "kit.dev/bundle"  # every object of one `kit k8s`: the Service selects by it
JOB_LABEL = "kit.dev/job"  # one run's objects and pods
SPEC_DIR = "/kit/spec"  # the ConfigMap, read-only
OUT_DIR = "/kit/out"  # the node's inventory
JOBSET_API = ("jobset.x-k8s.io", "v1alpha2", "jobsets")
FILES = {"result": RESULT, "node": "node.json"}  # what a pod prints after torchrun, by its key


@dataclass
class K8sOptions:
    """`kit k8s`'s options (those `kit slurm` also has mean the same there)."""

    image: str | None = None  # REPO@sha256:DIGEST
    nodes: int | None = None  # pods; default: len(recipe nodes.hosts), else 1
    gpus_per_node: int | None = None  # default: recipe nodes.gpus_per_node, else recipe gpus
    namespace: str = "default"
    node_selector: list[str] = field(default_factory=list)  # KEY=VALUE
    tolerations: list[str] = field(default_factory=list)  # KEY[=VALUE][:EFFECT]
    service_account: str | None = None
    host_network: bool = False
    jobset: bool = False
    pending_timeout_s: float = 1800.0  # scheduling and image pull, before the run's own timeout
    device: str = "cuda"
    smoke: bool | None = None
    repeats: int | None = None
    out: Path | None = None
    command: str = "kit k8s"


def _pairs(items: list[str], what: str) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not LABEL_KEY.match(key) or not LABEL_VALUE.match(value):
            raise InputError(f"{what} {item!r}: expected KEY=VALUE (a Kubernetes label)")
        if out.get(key, value) != value:  # a node cannot carry both: one would be dropped
            raise InputError(
                f"{what} {key!r} given twice, as {out[key]!r} and {value!r}; a key takes one value"
            )
        out[key] = value
    return out


def toleration(text: str) -> dict[str, str]:
    """KEY[=VALUE][:EFFECT] as a toleration (no VALUE: operator Exists)."""
    rest, _, effect = text.rpartition(":") if ":" in text else (text, "", "")
    key, sep, value = rest.partition("=")
    if not LABEL_KEY.match(key) or (sep and not LABEL_VALUE.match(value)):
        raise InputError(f"--toleration {text!r}: expected KEY[=VALUE][:EFFECT]")
    if effect and effect not in EFFECTS:
        raise InputError(f"--toleration {text!r}: effect {effect!r}: allowed: {', '.join(EFFECTS)}")
    out = {"key": key, "operator": "Equal" if sep else "Exists"}
    if sep:
        out["value"] = value
    if effect:
        out["effect"] = effect
    return out


def check_options(o: K8sOptions) -> None:
    if not o.image:
        raise InputError(
            "kit k8s: name the image by digest: --image REPO@sha256:DIGEST (push the "
            "`kit build` image; `docker inspect --format '{{index .RepoDigests 0}}' TAG`)"
        )
    if not DIGEST.match(o.image):
        raise InputError(
            f"--image {o.image!r}: expected REPO@sha256:<64 hex digits> "
            "(a tag can change under the run; a digest cannot)"
        )
    if not DNS_LABEL.match(o.namespace):
        raise InputError(f"--namespace {o.namespace!r}: not a DNS label (a-z, 0-9, -)")
    if o.service_account is not None and not re.match(
        r"^[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?$", o.service_account
    ):
        raise InputError(f"--service-account {o.service_account!r}: not a Kubernetes name")
    if not 1 <= o.pending_timeout_s <= 7 * 86400:  # also NaN
        raise InputError(
            f"--pending-timeout {o.pending_timeout_s:g}: expected a number of "
            "seconds from 1 s to 7 days (604800)"
        )
    check_batch_options(o.device, o.nodes, o.gpus_per_node)
    _pairs(o.node_selector, "--node-selector")
    for t in o.tolerations:
        toleration(t)


@dataclass
class K8sJob(BatchJob):
    """What the manifests are made of: the batch job, and the names of its objects."""

    name: str  # the Service's, and the prefix of every object
    opts: K8sOptions

    def job_name(self, index: int) -> str:
        return f"{self.name}-{index}"


def _slug(text: str) -> str:
    return re.sub(r"-+", "-", re.sub(r"[^a-z0-9]", "-", text.lower())).strip("-")[:24] or "run"


def make_job(recipe: Recipe, opts: K8sOptions, token: str | None = None) -> K8sJob:
    check_options(opts)
    smoke = opts.smoke if opts.smoke is not None else opts.device == "cpu"
    repeats = opts.repeats or (min(recipe.repeats, 2) if smoke else None)
    section = recipe.nodes
    env = dict(section.env) if section else {}
    if section and section.nccl_socket_ifname:
        env.setdefault("NCCL_SOCKET_IFNAME", section.nccl_socket_ifname)
        env.setdefault("GLOO_SOCKET_IFNAME", section.nccl_socket_ifname)
    named = opts.gpus_per_node or (section.gpus_per_node if section else None)
    recipe = recipe_gpus.resolve(  # the driver cannot count the nodes' GPUs: the count is named
        recipe, named, "Kubernetes pods' GPUs are not counted from here; name --gpus-per-node"
    )
    per_node = named or recipe_gpus.counted(recipe)
    return K8sJob(
        recipe=recipe,
        runs=plan(recipe, opts.device, smoke, repeats, per_node),
        bundle=(opts.out or default_bundle_dir(Path("reports"), recipe.name)).resolve(),
        nodes=opts.nodes or (len(section.hosts) if section else 1),
        gpus_per_node=per_node,
        rdzv_port=section.rdzv_port if section else 29400,
        env=env,
        name=f"kit-{_slug(recipe.name)}-{token or secrets.token_hex(3)}",
        opts=opts,
    )


def pod_torchrun(job: K8sJob) -> list[str]:
    """The launch line of every pod (shell variables: the pod's index, the endpoint, the id)."""
    argv = torchrun(
        job.gpus_per_node,
        f"{MOUNT}/{SPEC}",
        None,
        Rendezvous(job.nodes, "$KIT_RDZV_ENDPOINT", "$KIT_RUN_ID"),
    )
    at = argv.index("--rdzv-backend=c10d")
    argv[at:at] = ["--node-rank=$JOB_COMPLETION_INDEX"]
    argv[argv.index("--max-restarts=0") : argv.index("--max-restarts=0")] = [
        "--rdzv-conf=is_host=$IS_HOST"  # pod 0 hosts the store, whatever its name resolves to
    ]
    return argv


def pod_script(job: K8sJob, marker: str) -> str:
    """What each pod runs: the spec into a writable run directory, the node's inventory,
    torchrun, then the result and the inventory on stdout between `marker` lines."""
    argv = pod_torchrun(job)
    emit = [
        f'emit {key} "{path}"'
        for key, path in (("result", f"{MOUNT}/{RESULT}"), ("node", f"{OUT_DIR}/node.json"))
    ]
    return "\n".join(
        [
            "set -u",
            f"mkdir -p {MOUNT} {OUT_DIR} && cp {SPEC_DIR}/{SPEC} {MOUNT}/{SPEC} || exit 3",
            f"python -m kit.worker.nodeinfo >{OUT_DIR}/node.json 2>{OUT_DIR}/node.err",
            'IS_HOST=0; [ "$JOB_COMPLETION_INDEX" = 0 ] && IS_HOST=1',
            " ".join(argv),
            "code=$?",
            f'emit() {{ [ -f "$2" ] || return 0; echo "{marker} file $1"; base64 "$2"; echo "{marker} end"; }}',
            f'echo "{marker} exit $code"',
            *emit,
            'exit "$code"',
        ]
    )


def labels(job: K8sJob, index: int | None = None) -> dict[str, str]:
    out = {BUNDLE_LABEL: job.name, "app.kubernetes.io/managed-by": "kit"}
    if index is not None:
        out[JOB_LABEL] = job.job_name(index)
    return out


def service(job: K8sJob) -> dict[str, Any]:
    """The headless Service whose records name every pod (`<job>-<i>.<service>`)."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": job.name, "namespace": job.opts.namespace, "labels": labels(job)},
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": {BUNDLE_LABEL: job.name},
            "ports": [{"name": "rdzv", "port": job.rdzv_port, "targetPort": job.rdzv_port}],
        },
    }


def config_map(job: K8sJob, index: int, spec_json: str) -> dict[str, Any]:
    """One run's spec.json, mounted read-only at SPEC_DIR."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": job.job_name(index),
            "namespace": job.opts.namespace,
            "labels": labels(job, index),
        },
        "data": {SPEC: spec_json},
    }


def pod_template(job: K8sJob, index: int, marker: str, endpoint_pod: str) -> dict[str, Any]:
    o = job.opts
    spec = job.runs[index]
    env = launch_environment(spec.env, o.device, container=True, extra=job.env)
    env.update(
        KIT_RUN_ID=f"{job.job_name(index)}",
        KIT_RDZV_ENDPOINT=f"{endpoint_pod}.{job.name}:{job.rdzv_port}",
    )
    container: dict[str, Any] = {
        "name": "worker",
        "image": o.image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["/bin/sh", "-c", pod_script(job, marker)],
        # the kubelet expands $(VAR) in values and reduces $$ to $: written as $$, a $ stays one
        "env": [{"name": k, "value": v.replace("$", "$$")} for k, v in env.items()],
        "ports": [{"containerPort": job.rdzv_port, "name": "rdzv"}],
        "volumeMounts": [
            {"name": "spec", "mountPath": SPEC_DIR, "readOnly": True},
            {"name": "run", "mountPath": MOUNT},
            {"name": "out", "mountPath": OUT_DIR},
            {"name": "dshm", "mountPath": "/dev/shm"},  # NCCL's shared memory transport
        ],
    }
    if o.device == "cuda":
        gpus = str(job.gpus_per_node)
        container["resources"] = {
            "limits": {"nvidia.com/gpu": gpus},
            "requests": {"nvidia.com/gpu": gpus},
        }
    pod: dict[str, Any] = {
        "subdomain": job.name,
        "restartPolicy": "Never",
        "containers": [container],
        "volumes": [
            {"name": "spec", "configMap": {"name": job.job_name(index)}},
            {"name": "run", "emptyDir": {}},
            {"name": "out", "emptyDir": {}},
            {"name": "dshm", "emptyDir": {"medium": "Memory"}},
        ],
    }
    if o.host_network:
        pod.update(hostNetwork=True, dnsPolicy="ClusterFirstWithHostNet")
    if o.node_selector:
        pod["nodeSelector"] = _pairs(o.node_selector, "--node-selector")
    if o.tolerations:
        pod["tolerations"] = [toleration(t) for t in o.tolerations]
    if o.service_account:
        pod["serviceAccountName"] = o.service_account
    return {
        "metadata": {"labels": labels(job, index), "annotations": {"kit.dev/run-id": spec.run_id}},
        "spec": pod,
    }


def _job_spec(job: K8sJob, index: int, template: dict[str, Any]) -> dict[str, Any]:
    return {
        "completionMode": "Indexed",
        "completions": job.nodes,
        "parallelism": job.nodes,
        "backoffLimit": 0,  # one failed pod fails the run: a rendezvous cannot take a new one
        "activeDeadlineSeconds": int(job.opts.pending_timeout_s + job.runs[index].timeout_s),
        "template": template,
    }


def run_objects(job: K8sJob, index: int, spec_json: str, marker: str) -> list[dict[str, Any]]:
    """The ConfigMap and the Job (or JobSet) of planned run `index`."""
    o, name = job.opts, job.job_name(index)
    meta = {
        "name": name,
        "namespace": o.namespace,
        "labels": labels(job, index),
        "annotations": {"kit.dev/run-id": job.runs[index].run_id},
    }
    if not o.jobset:
        template = pod_template(job, index, marker, f"{name}-0")
        work = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": meta,
            "spec": _job_spec(job, index, template),
        }
    else:  # JobSet names its pods <jobset>-<replicated job>-<job index>-<pod index>
        template = pod_template(job, index, marker, f"{name}-node-0-0")
        work = {
            "apiVersion": f"{JOBSET_API[0]}/{JOBSET_API[1]}",
            "kind": "JobSet",
            "metadata": meta,
            "spec": {
                "network": {
                    "enableDNSHostnames": True,
                    "subdomain": job.name,
                    "publishNotReadyAddresses": True,
                },
                "failurePolicy": {"maxRestarts": 0},
                "replicatedJobs": [
                    {
                        "name": "node",
                        "replicas": 1,
                        "template": {
                            "metadata": {"labels": labels(job, index)},
                            "spec": _job_spec(job, index, template),
                        },
                    }
                ],
            },
        }
    return [config_map(job, index, spec_json), work]


def validate(obj: dict[str, Any]) -> None:
    """Check a manifest against the kubernetes client's models: every field known and typed,
    every required one there (a JobSet: its job template, the CRD has no model there)."""
    from kubernetes import client  # late: a heavy import, only where manifests are made

    api = client.ApiClient()
    kind = obj.get("kind")
    checks: list[tuple[Any, str, str]] = []
    if kind == "JobSet":
        for i, rj in enumerate(obj["spec"]["replicatedJobs"]):
            checks.append((rj["template"], "V1JobTemplateSpec", f"replicatedJobs[{i}].template"))
        checks.append((obj["metadata"], "V1ObjectMeta", "metadata"))
    else:
        checks.append(
            (
                obj,
                {"Service": "V1Service", "ConfigMap": "V1ConfigMap", "Job": "V1Job"}[str(kind)],
                "",
            )
        )
    for data, model, where in checks:
        try:
            parsed = api._ApiClient__deserialize(data, model)  # type: ignore[attr-defined]
        except (ValueError, TypeError) as exc:  # pydantic's ValidationError is a ValueError
            raise InputError(f"{kind} {where}: not a valid {model}: {exc}") from exc
        back = api.sanitize_for_serialization(parsed)
        if back != data:
            raise InputError(
                f"{kind} {where}: the {model} model does not hold every field "
                "as written (an unknown or mistyped field)"
            )
