"""A Kubernetes API on localhost for `kit k8s` tests: kmock's KubernetesEmulator (create, read,
list, watch, patch and delete of any resource, kept in memory) served over HTTP in a thread, and
a controller that plays the Job controller's and the kubelet's part through the same API.

The emulator is not a cluster: it schedules nothing, runs no container and filters no label
selector (the kit checks labels itself). The controller makes each Job's pods (name, index
label, hostname), moves them through their phases, and in `run` mode really runs each pod's
script on this machine (its /kit paths in a temporary folder, the rendezvous on 127.0.0.1), so the
results, logs and inventories the kit gathers come from the worker, not from the test.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import kmock
from kubernetes import client

NS = "bench"
INDEX = "batch.kubernetes.io/job-completion-index"
RESOURCES = (
    "v1/pods",
    "v1/services",
    "v1/configmaps",
    "batch/v1/jobs",
    "jobset.x-k8s.io/v1alpha2/jobsets",
)
LOG_PATH = re.compile(r"/api/v1/namespaces/[^/]+/pods/([^/]+)/log")


def _pod_status(phase: str, state: dict) -> dict:
    """A pod's status: its phase, and its one container "worker" in `state`."""
    worker = {"name": "worker", "ready": False, "restartCount": 0, "image": "i", "imageID": ""}
    return {"phase": phase, "containerStatuses": [{**worker, "state": state}]}


class Emulator:
    """kmock's emulator on 127.0.0.1:<free port>, in its own thread and event loop."""

    def __init__(self) -> None:
        self.logs: dict[str, bytes] = {}  # pod name -> what its log request answers
        self._ready = threading.Event()
        self._stop = False
        self.url = ""
        self._thread = threading.Thread(target=lambda: asyncio.run(self._serve()), daemon=True)
        self._thread.start()
        if not self._ready.wait(30):
            raise RuntimeError("kmock did not start")
        cfg = client.Configuration()
        cfg.host = self.url
        api = client.ApiClient(cfg)
        self.core, self.batch = client.CoreV1Api(api), client.BatchV1Api(api)
        self.custom = client.CustomObjectsApi(api)

    async def _serve(self) -> None:
        async with kmock.KubernetesEmulator() as em, kmock.Server(em) as server:
            for res in RESOURCES:
                em.resources[res] = {}
            # the client asks /version/ (a real API server answers both); kmock only /version
            em["get /version/"] << {"major": "1", "minor": "26", "gitVersion": "v1.26.4+emu"}
            em["get", LOG_PATH] << (lambda req: self.logs.get(LOG_PATH.match(req.url.path)[1], b""))
            self.url = str(server.url).rstrip("/")
            self._ready.set()
            while not self._stop:
                await asyncio.sleep(0.05)

    def kubeconfig(self, path: Path) -> Path:
        path.write_text(
            "apiVersion: v1\nkind: Config\ncurrent-context: emu\n"
            f"clusters: [{{name: emu, cluster: {{server: '{self.url}'}}}}]\n"
            "users: [{name: emu, user: {token: test}}]\n"
            f"contexts: [{{name: emu, context: {{cluster: emu, user: emu, namespace: {NS}}}}}]\n"
        )
        return path

    def names(self) -> dict[str, list[str]]:
        """What exists now, by kind (deleted objects are gone)."""
        jobsets = self.custom.list_namespaced_custom_object(
            "jobset.x-k8s.io", "v1alpha2", NS, "jobsets"
        )["items"]
        return {
            "Service": [s.metadata.name for s in self.core.list_namespaced_service(NS).items],
            "ConfigMap": [c.metadata.name for c in self.core.list_namespaced_config_map(NS).items],
            "Job": [j.metadata.name for j in self.batch.list_namespaced_job(NS).items],
            "JobSet": [j["metadata"]["name"] for j in jobsets],
        }

    def close(self) -> None:
        self._stop = True
        self._thread.join(10)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Controller:
    """The Job controller and kubelet, played in a thread: for every Job (or JobSet) created,
    its pods; then, by `mode`: run (execute each pod's script), fail (pod 1 OOMKilled), evict
    (pod 1 evicted), hang (pods run until deleted), pending (the image cannot be pulled)."""

    def __init__(self, emu: Emulator, mode: str, sandbox: Path, python_bin: Path) -> None:
        self.emu, self.mode, self.sandbox, self.bin = emu, mode, sandbox, python_bin
        self.seen: set[str] = set()
        self.jobs: list[dict[str, Any]] = []  # every Job or JobSet as the kit sent it
        self.running = threading.Event()  # some run's pods are all Running
        self._stop = False
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop:
            items = [
                self.emu.batch.api_client.sanitize_for_serialization(j)
                for j in self.emu.batch.list_namespaced_job(NS).items
            ]
            items += self.emu.custom.list_namespaced_custom_object(
                "jobset.x-k8s.io", "v1alpha2", NS, "jobsets"
            )["items"]
            for job in items:
                name = job["metadata"]["name"]
                if name not in self.seen:
                    self.seen.add(name)
                    self.jobs.append(job)
                    threading.Thread(target=self._run_job, args=(job,), daemon=True).start()
            time.sleep(0.1)

    def _pod_name(self, job: dict[str, Any], i: int) -> tuple[str, str]:
        name = job["metadata"]["name"]
        host = f"{name}-node-0-{i}" if job["kind"] == "JobSet" else f"{name}-{i}"
        return f"{host}-x{i}z", host

    def _run_job(self, job: dict[str, Any]) -> None:
        spec = job["spec"]
        if job["kind"] == "JobSet":
            spec = spec["replicatedJobs"][0]["template"]["spec"]
        n, template = spec["completions"], spec["template"]
        pods = []
        for i in range(n):
            name, host = self._pod_name(job, i)
            meta = {
                "name": name,
                "namespace": NS,
                "labels": {**template["metadata"]["labels"], INDEX: str(i)},
            }
            self.emu.core.create_namespaced_pod(
                NS,
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": meta,
                    "spec": {**template["spec"], "hostname": host, "nodeName": f"gpu-node-{i}"},
                    "status": {"phase": "Pending"},
                },
            )
            pods.append(name)
        if self.mode == "pending":  # the image cannot be pulled: the pods never run
            waiting = {"reason": "ImagePullBackOff", "message": "Back-off pulling image"}
            for name in pods:
                self._status(name, _pod_status("Pending", {"waiting": waiting}))
            return
        for name in pods:
            self._status(name, {"phase": "Running"})
        self.running.set()
        if self.mode == "run":
            self._execute(job, template, pods)
        elif self.mode in ("fail", "evict"):
            time.sleep(0.3)
            if self.mode == "fail":
                term = {"exitCode": 137, "reason": "OOMKilled"}
                status = _pod_status("Failed", {"terminated": term})
            else:
                status = {
                    "phase": "Failed",
                    "reason": "Evicted",
                    "message": "The node was low on resource: memory.",
                    "conditions": [
                        {
                            "type": "DisruptionTarget",
                            "status": "True",
                            "reason": "TerminationByKubelet",
                        }
                    ],
                }
            self.emu.logs[pods[1]] = b"partial output of pod 1\n"
            self._status(pods[1], status)

    def _status(self, pod: str, status: dict[str, Any]) -> None:
        with contextlib.suppress(client.ApiException):  # deleted meanwhile (the kit ended it)
            self.emu.core.patch_namespaced_pod_status(pod, NS, {"status": status})

    def _execute(self, job: dict[str, Any], template: dict[str, Any], pods: list[str]) -> None:
        """Each pod's script, for real: its /kit folders here, pod 0's rendezvous on localhost."""
        container = template["spec"]["containers"][0]
        script = container["command"][2]
        cm = template["spec"]["volumes"][0]["configMap"]["name"]
        spec_json = self.emu.core.read_namespaced_config_map(cm, NS).data["spec.json"]
        port = free_port()
        procs = []
        for i, pod in enumerate(pods):
            root = self.sandbox / pod
            (root / "spec").mkdir(parents=True)
            (root / "tmp").mkdir()  # a pod's own /tmp: torchrun's torchelastic_* folder there
            (root / "spec" / "spec.json").write_text(spec_json)
            env = {e["name"]: e["value"] for e in container["env"]}
            env.update(
                KIT_RDZV_ENDPOINT=f"127.0.0.1:{port}",
                JOB_COMPLETION_INDEX=str(i),
                PATH=f"{self.bin}:{os.environ['PATH']}",
                PYTHONPATH=os.environ.get("PYTHONPATH", ""),
                HOME=str(root),
                TMPDIR=str(root / "tmp"),
            )
            procs.append(
                subprocess.Popen(
                    ["/bin/sh", "-c", script.replace("/kit/", f"{root}/")],
                    env=env,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                )
            )
        for pod, proc in zip(pods, procs, strict=True):
            out, _ = proc.communicate(timeout=300)
            self.emu.logs[pod] = out
            term = {
                "exitCode": proc.returncode,
                "reason": "Completed" if proc.returncode == 0 else "Error",
            }
            phase = "Succeeded" if proc.returncode == 0 else "Failed"
            self._status(pod, _pod_status(phase, {"terminated": term}))

    def close(self) -> None:
        self._stop = True
        self._thread.join(10)
