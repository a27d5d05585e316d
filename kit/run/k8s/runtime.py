"""`kit k8s RECIPE`: the plan as Kubernetes jobs, one after the other, gathered into a bundle.

The driver stays while the cluster runs: for each planned run it creates the run's ConfigMap and
Job (kit.run.k8s.manifests), watches the pods (kit.run.k8s.cluster), reads each pod's
log through the API (the run's output, then its result and its node's inventory between the
run's markers), deletes the run's objects and turns what came back into a result through the
engine's own code (kit.run.results), as `kit slurm collect` does. A failed or evicted pod ends
its run's job at once, the reason recorded; Ctrl-C or SIGTERM deletes everything the command
created and seals what finished as interrupted. Planned repeats only.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import secrets
import signal
from pathlib import Path
from typing import Any

import yaml

from kit.bundle import Bundle
from kit.io import terminal
from kit.io.errors import InputError
from kit.io.outputs import check_bundle_dir
from kit.io.safe import write_text
from kit.model import NodeRecord, load_bundle
from kit.model.environment import axes_record
from kit.model.results import K8sInfo
from kit.recipe import Recipe, load_recipe
from kit.run.batch import gather_inventory, write_batch_bundle
from kit.run.k8s.cluster import Cluster, PodsEnd, exit_code, state
from kit.run.k8s.image import with_image
from kit.run.k8s.manifests import (
    FILES,
    K8sJob,
    K8sOptions,
    make_job,
    pod_torchrun,
    run_objects,
    service,
    validate,
)
from kit.run.results import close_bundle, record_container, result_of
from kit.runtime.base import RunOutcome, tail
from kit.shared import files
from kit.shared.engines import Engine

console = terminal.console(highlight=False)
MAX_FILE = 16 * 1024 * 1024  # a result or an inventory larger than this is not one
NODES_DIR = "k8s/nodes"  # each node's inventory, as its pod printed it


def manifests(job: K8sJob) -> list[dict[str, Any]]:
    """Every object the command creates, each checked against the client's models."""
    marker = _marker()
    objs = [service(job)]
    for i, spec in enumerate(job.runs):
        objs += run_objects(job, i, json.dumps(spec.to_json(), indent=1), marker)
    for obj in objs:
        validate(obj)
    return objs


def _marker() -> str:
    """The line prefix a pod's files follow: unknown to the run's output before it ends."""
    return f"@@kit-{secrets.token_hex(8)}"


class _Dumper(yaml.SafeDumper):
    """Multi-line strings (the pod's script, spec.json) as literal blocks an operator can read."""


_Dumper.add_representer(
    str,
    lambda d, s: d.represent_scalar("tag:yaml.org,2002:str", s, style="|" if "\n" in s else None),
)


def to_yaml(objs: list[dict[str, Any]]) -> str:
    return "".join("---\n" + yaml.dump(o, Dumper=_Dumper, sort_keys=False, width=100) for o in objs)


def split_log(data: bytes, marker: str) -> tuple[str, dict[str, bytes], int | None]:
    """A pod's log -> (the run's output, {file key: bytes}, the exit status it printed)."""
    text = data.decode("utf-8", errors="replace")
    head, sep, trailer = text.partition(f"\n{marker} exit ")
    if not sep:
        if text.startswith(f"{marker} exit "):
            head, trailer = "", text[len(marker) + 6 :]
        else:
            return text, {}, None
    lines = trailer.splitlines()
    code = int(lines[0]) if lines and lines[0].lstrip("-").isdigit() else None
    found: dict[str, bytes] = {}
    key, chunk = None, []
    for line in lines[1:]:
        if line.startswith(f"{marker} file "):
            key, chunk = line.split(" ", 2)[2], []
        elif line == f"{marker} end" and key in FILES:
            with contextlib.suppress(binascii.Error, ValueError):  # a cut or garbled file: none
                found[key] = base64.b64decode("".join(chunk), validate=True)[: MAX_FILE + 1]
            key = None
        elif key is not None:
            chunk.append(line)
    return head + ("\n" if head and not head.endswith("\n") else ""), found, code


def _placement(src: K8sOptions | K8sInfo) -> dict[str, Any]:
    """The placement both the options and results.json's k8s record carry: one list, so a rerun
    (options from the record) asks for what the first run recorded (record from the options)."""
    return {
        "namespace": src.namespace,
        "image": src.image,
        "jobset": src.jobset,
        "node_selector": list(src.node_selector),
        "tolerations": list(src.tolerations),
        "service_account": src.service_account,
        "host_network": src.host_network,
    }


def write_bundle(
    job: K8sJob, reproduces: dict[str, Any] | None = None, server: str | None = None
) -> Bundle:
    """The bundle before the first job: recipe, results.json header, run specs."""
    o = job.opts
    record = K8sInfo(
        pods=job.nodes,
        gpus_per_node=job.gpus_per_node,
        service=job.name,
        server_version=server,
        **_placement(o),
    )
    return write_batch_bundle(job, o.device, "k8s", True, o.command, reproduces, k8s=record)


def _gather(
    bundle: Bundle, job: K8sJob, index: int, cluster: Cluster, end: PodsEnd, marker: str
) -> RunOutcome:
    """Each pod's log and files into the bundle; the run's outcome with its nodes."""
    spec = job.runs[index]
    records, combined, codes = [], [], []
    for i in range(job.nodes):
        pod = end.pods.get(i)
        name = pod.metadata.name if pod is not None else None
        data, why = cluster.log(name) if name else (b"", f"no pod {i} was seen")
        text, found, printed = split_log(data, marker)
        if why:
            text += f"[kit] {why}\n"
            console.print(f"kit: {spec.run_id}: node {i}: {why}", markup=False)
        log = f"logs/{spec.run_id}.node{i}.log"
        write_text(bundle.path / log, text)
        combined += [f"[node{i}] {line}\n" for line in text.splitlines()]
        # global rank 0 writes it; c10d ranks the pods as they arrive, so it may be any pod's
        result_file = bundle.run_dir(spec.run_id) / files.RESULT
        if "result" in found and len(found["result"]) <= MAX_FILE and not result_file.exists():
            write_text(result_file, found["result"].decode("utf-8", errors="replace"))
        node_file = bundle.path / NODES_DIR / f"node{i}.json"
        if "node" in found and len(found["node"]) <= MAX_FILE and not node_file.exists():
            node_file.parent.mkdir(parents=True, exist_ok=True)  # none when no pod printed one
            write_text(node_file, found["node"].decode("utf-8", errors="replace"))
        code = exit_code(pod) if pod is not None else None
        code = code if code is not None else printed
        codes.append(code)
        seen = state(pod) if pod is not None else "vanished"
        status = "stopped" if seen in ("running", "pending") else seen  # the kit ended it
        records.append(
            NodeRecord(
                node=i,
                host=pod.spec.node_name if pod is not None else None,
                status=status,
                exit_code=code,
                nproc=job.gpus_per_node,
                log=log,
                found=bool(data),
                pod=name,
            )
        )
    write_text(bundle.log_path(spec.run_id), "".join(combined))
    failed = [c for c in codes if c not in (0, None)]
    code = failed[0] if failed else (0 if end.status == "ok" else None)
    kind = "jobset" if job.opts.jobset else "job"  # the launch: in each pod of that job
    command = [f"{kind}/{job.job_name(index)}", *pod_torchrun(job)]
    outcome = RunOutcome(
        code, end.status in ("timeout", "pending-timeout"), False, end.wall_s, command, end.error
    )
    outcome.nodes = records
    return outcome


def _one_run(bundle: Bundle, job: K8sJob, index: int, cluster: Cluster, marker: str) -> int:
    spec = job.runs[index]
    objs = run_objects(job, index, json.dumps(spec.to_json(), indent=1), marker)
    for obj in objs:
        validate(obj)
        cluster.create(obj)
    console.print(f"kit: {spec.run_id}: job {job.job_name(index)} submitted", markup=False)
    end = cluster.wait(job.job_name(index), job.nodes, job.opts.pending_timeout_s, spec.timeout_s)
    outcome = _gather(bundle, job, index, cluster, end, marker)
    for obj in reversed(objs):  # ends the job (its pods with it) whatever its state
        cluster.delete(obj["kind"], obj["metadata"]["name"])
    result = result_of(spec, bundle.run_dir(spec.run_id), outcome, bundle.log_path(spec.run_id))
    if result.status != "ok":
        for node in outcome.nodes or []:
            node.log_tail = tail(bundle.path / node.log) if node.log else None
    if result.launch is not None:
        result.launch.launcher = "jobset" if job.opts.jobset else "job"
    bundle.add_run(result)
    console.print(
        f"kit: {spec.run_id}: {result.status}" + (f" ({result.error})" if result.error else ""),
        markup=False,
    )
    return 0 if result.status == "ok" else 1


def _interrupted(bundle: Bundle, job: K8sJob, index: int, exc: BaseException) -> None:
    """The run that was going when the command stopped: interrupted, or what stopped it."""
    spec = job.runs[index]
    if isinstance(exc, Exception):
        outcome = RunOutcome(None, False, False, 0.0, [], f"kit k8s stopped: {exc}"[:300])
    else:
        outcome = RunOutcome(None, False, True, 0.0, [], "interrupted: the kit deleted its job")
    result = result_of(spec, bundle.run_dir(spec.run_id), outcome, bundle.log_path(spec.run_id))
    bundle.add_run(result)


def _hardware(bundle: Bundle) -> None:
    gather_inventory(bundle, bundle.path / NODES_DIR, "kit k8s: each pod's kit.worker.nodeinfo")


def run(
    job: K8sJob, cluster: Cluster, reproduces: dict[str, Any] | None = None
) -> tuple[Bundle, int]:
    """Every planned run on the cluster, then the bundle sealed; (bundle, exit code)."""
    bundle = write_bundle(job, reproduces, cluster.server_version or None)
    marker, code, index = _marker(), 0, 0
    stopped: BaseException | None = None
    try:
        svc = service(job)
        validate(svc)
        cluster.create(svc)
        for index in range(len(job.runs)):
            code |= _one_run(bundle, job, index, cluster, marker)
    except BaseException as exc:  # Ctrl-C, SIGTERM, an API error: nothing the kit made stays
        stopped = exc
        made = ", ".join(f"{kind} {name}" for kind, name in cluster.created)
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C: still deleted
        try:
            left = cluster.delete_all()
        finally:
            signal.signal(signal.SIGINT, previous)
        if left:
            console.print(f"kit: could not delete: {'; '.join(left)}", markup=False)
        elif made:
            console.print(f"kit: deleted what this command created ({made})", markup=False)
        if index < len(job.runs) and len(bundle.results.runs) <= index:
            _interrupted(bundle, job, index, exc)
        raise
    finally:
        cluster.delete_all()
        _hardware(bundle)
        record_container(
            bundle,
            {
                **axes_record("k8s", "kubernetes"),
                "name": job.recipe.environment,
                "pinned": True,
                "runtime": "k8s",
                "launcher": "kubernetes",
                "image": job.opts.image,
                "kit_version": bundle.results.kit_version,
                "container": None,
            },
        )
        by_signal = stopped is not None and not isinstance(stopped, Exception)
        fault = isinstance(stopped, Exception)  # the kit's own failure (the API refused, ...)
        close_bundle(bundle, len(job.runs), interrupted=by_signal, fault=fault, check=load_bundle)
    return bundle, code


def load(path: Path) -> Recipe:
    if path.is_dir():
        raise InputError(
            f"{path}: a bundle; `kit k8s` takes a recipe (rerun a k8s bundle's "
            "recipe.yaml with the options its results.json records)"
        )
    return load_recipe(path)


class K8sRuntime:
    """The batch runtime chosen from kit.run.registry for `kit k8s` (see the module doc)."""

    name = "k8s"
    placement, engine = "k8s", Engine.KUBERNETES
    pinned = True  # the image by digest

    def __init__(
        self, opts: K8sOptions, kubeconfig: Path | None = None, context: str | None = None
    ) -> None:
        self.opts, self.kubeconfig, self.context = opts, kubeconfig, context
        self.code = 0  # the last submission's: 1 when a run did not succeed

    def submit(
        self,
        recipe: Recipe,
        dry_run: bool = False,
        wait: bool = True,
        reproduces: dict[str, Any] | None = None,
    ) -> str:
        """The manifests (dry run), or the path of the sealed bundle; always waits."""
        named = self.opts.image
        self.opts = with_image(recipe, self.opts)
        job = make_job(recipe, self.opts)
        check_bundle_dir(job.bundle)  # a dry run shows what a real run would do: refuse it alike
        if dry_run:
            found = "" if named else f"# image: the recipe's, as pushed: {self.opts.image}\n"
            head = found + (
                f"# kit k8s: recipe {recipe.name}, {len(job.runs)} runs, each "
                f"{'a JobSet' if self.opts.jobset else 'an Indexed Job'} of {job.nodes} pod{'s' if job.nodes != 1 else ''} behind "
                f"Service {job.name}.\n"
                "# `kubectl apply -f` of this file starts every job at once; `kit k8s` runs "
                "them one after the other\n# and gathers their results into a bundle.\n"
            )
            return head + to_yaml(manifests(job))
        cluster = Cluster(self.opts.namespace, self.kubeconfig, self.context)
        bundle, self.code = run(job, cluster, reproduces)
        return str(bundle.path)

    @staticmethod
    def options_of(
        record: K8sInfo,
        device: str | None,
        smoke: bool | None,
        repeats: int | None,
        out: Path | None,
        command: str,
    ) -> K8sOptions:
        """A rerun's options: the placement results.json recorded (kit reproduce BUNDLE)."""
        return K8sOptions(
            nodes=record.pods,
            gpus_per_node=record.gpus_per_node,
            **_placement(record),
            device=device or "cuda",
            smoke=smoke,
            repeats=repeats,
            out=out,
            command=command,
        )

    @staticmethod
    def collect(bundle: Path) -> tuple[Bundle, int]:
        raise InputError(f"{bundle}: `kit k8s` waits for its runs and collects them itself")
