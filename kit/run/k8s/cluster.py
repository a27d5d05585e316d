"""The Kubernetes API as `kit k8s` uses it, through the official `kubernetes` client: create
what a run needs, watch its pods to the end, read their logs, delete what was created.

Connection: --kubeconfig (or $KUBECONFIG, ~/.kube/config) with its current or named context; in
a pod with no kubeconfig, the in-cluster service account. Pods are matched by label (the server
filters; the kit checks the label again, since a watch is all it trusts).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kit.io.errors import InputError, KitError
from kit.run.k8s.manifests import INDEX_LABEL, JOB_LABEL, JOBSET_API

WATCH_S = 10  # one watch request's length; it is made again until the run ends
GRACE_S = 30  # a pod's termination grace when the kit ends a run


def _reason(pod: Any) -> str:
    """Why a pod is where it is, in one line (container state, condition, message)."""
    status = pod.status
    parts = [status.reason or ""]
    for cs in status.container_statuses or []:
        st = cs.state
        if st and st.terminated:
            t = st.terminated
            parts.append(
                f"{t.reason or 'terminated'} (exit {t.exit_code})"
                + (f": {t.message}" if t.message else "")
            )
        elif st and st.waiting and st.waiting.reason:
            w = st.waiting
            parts.append(w.reason + (f": {w.message}" if w.message else ""))
    for cond in status.conditions or []:
        if cond.status == "True" and cond.type == "DisruptionTarget":
            parts.append(f"{cond.reason}: {cond.message or ''}".strip(": "))
        if cond.type == "PodScheduled" and cond.status == "False":
            parts.append(f"unschedulable: {cond.message or cond.reason}")
    if status.message:
        parts.append(status.message)
    return "; ".join(dict.fromkeys(p for p in parts if p))[:400]


def _index(meta: Any) -> int:
    """A pod's completion index (the Job controller's label, else its annotation); -1: none."""
    text = (meta.labels or {}).get(INDEX_LABEL) or (meta.annotations or {}).get(INDEX_LABEL)
    return int(text) if isinstance(text, str) and text.isdigit() and len(text) < 6 else -1


def exit_code(pod: Any) -> int | None:
    for cs in pod.status.container_statuses or []:
        if cs.state and cs.state.terminated:
            return int(cs.state.terminated.exit_code)
    return None


def state(pod: Any) -> str:
    """ok | failed | evicted | running | pending, from the pod's phase and conditions."""
    status = pod.status
    phase = status.phase or "Pending"
    if phase == "Succeeded":
        return "ok"
    if phase == "Failed":
        disrupted = any(
            c.type == "DisruptionTarget" and c.status == "True" for c in status.conditions or []
        )
        return "evicted" if status.reason == "Evicted" or disrupted else "failed"
    return "running" if phase == "Running" else "pending"


@dataclass
class PodsEnd:
    """How a run's pods ended, as the watch saw it."""

    status: str  # ok | failed | evicted | vanished | timeout | pending-timeout
    error: str | None
    pods: dict[int, Any] = field(default_factory=dict)  # completion index -> last seen pod
    started: float | None = None  # when the last pod reached Running
    wall_s: float = 0.0


class Cluster:
    """One namespace of one cluster, and every object the kit made there (to delete them)."""

    def __init__(
        self, namespace: str, kubeconfig: Path | None = None, context: str | None = None
    ) -> None:
        from kubernetes import client, config  # late: heavy, and only for a real submission

        try:
            if (
                kubeconfig is None
                and context is None
                and os.environ.get("KUBERNETES_SERVICE_HOST")
                and not os.environ.get("KUBECONFIG")
                and not Path("~/.kube/config").expanduser().exists()
            ):
                config.load_incluster_config()
            else:
                config.load_kube_config(
                    config_file=str(kubeconfig) if kubeconfig else None, context=context
                )
        except (config.ConfigException, OSError, ValueError) as exc:
            raise InputError(f"kit k8s: no cluster to talk to: {exc}") from exc
        self.namespace = namespace
        self.core = client.CoreV1Api()
        self.batch = client.BatchV1Api()
        self.custom = client.CustomObjectsApi()
        self.created: list[tuple[str, str]] = []  # (kind, name), in creation order
        # reached before any bundle is written: an unreachable server is the user's to fix
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        self.server_version: str | None = None
        try:
            raw = client.VersionApi().get_code(_request_timeout=30, _preload_content=False).data
            with contextlib.suppress(ValueError, AttributeError):  # an answer without a version
                git = json.loads(raw).get("gitVersion")
                self.server_version = git[:100] if isinstance(git, str) else None
        except ApiException as exc:  # it answered; only refused credentials stop here
            if exc.status in (401, 403):
                raise InputError(
                    f"kit k8s: the API server refused the credentials: {exc.status} {exc.reason}"
                ) from exc
        except HTTPError as exc:
            host = client.Configuration.get_default_copy().host
            raise InputError(
                f"kit k8s: the API server at {host} does not answer: "
                f"{str(exc).splitlines()[0][:200]}"
            ) from exc

    def _call(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        try:
            return fn(*args, **kwargs)
        except ApiException as exc:
            raise KitError(f"kit k8s: {what}: API answered {exc.status} {exc.reason}") from exc
        except HTTPError as exc:
            raise KitError(f"kit k8s: {what}: {exc}") from exc

    def create(self, obj: dict[str, Any]) -> None:
        kind, name, ns = obj["kind"], obj["metadata"]["name"], self.namespace
        if kind == "Service":
            self._call(f"create Service {name}", self.core.create_namespaced_service, ns, obj)
        elif kind == "ConfigMap":
            self._call(f"create ConfigMap {name}", self.core.create_namespaced_config_map, ns, obj)
        elif kind == "Job":
            self._call(f"create Job {name}", self.batch.create_namespaced_job, ns, obj)
        else:
            group, version, plural = JOBSET_API
            self._call(
                f"create JobSet {name} (is the JobSet CRD installed?)",
                self.custom.create_namespaced_custom_object,
                group,
                version,
                ns,
                plural,
                obj,
            )
        self.created.append((kind, name))

    def delete(self, kind: str, name: str) -> str | None:
        """Delete one object (its pods with it); None, or why it could not be."""
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        ns, policy = self.namespace, "Background"
        try:
            if kind == "Service":
                self.core.delete_namespaced_service(name, ns)
            elif kind == "ConfigMap":
                self.core.delete_namespaced_config_map(name, ns)
            elif kind == "Job":
                self.batch.delete_namespaced_job(
                    name, ns, propagation_policy=policy, grace_period_seconds=GRACE_S
                )
            else:
                group, version, plural = JOBSET_API
                self.custom.delete_namespaced_custom_object(
                    group, version, ns, plural, name, propagation_policy=policy
                )
        except ApiException as exc:
            if exc.status != 404:  # already gone is what was asked
                return f"{kind} {name}: {exc.status} {exc.reason}"
        except HTTPError as exc:
            return f"{kind} {name}: {exc}"
        if (kind, name) in self.created:
            self.created.remove((kind, name))
        return None

    def delete_all(self) -> list[str]:
        """Delete everything this kit made, newest first; what could not be deleted."""
        return [e for kind, name in reversed(list(self.created)) if (e := self.delete(kind, name))]

    def log(self, pod: str, tries: int = 4) -> tuple[bytes, str | None]:
        """A pod's whole log as bytes, and why not when it could not be read (an evicted pod
        may have none; a dropped connection is tried again)."""
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        why = None
        for attempt in range(tries):
            try:
                resp = self.core.read_namespaced_pod_log(
                    pod,
                    self.namespace,
                    container="worker",
                    _preload_content=False,
                    _request_timeout=60,
                )
                return bytes(resp.data), None
            except ApiException as exc:
                why = f"log of pod {pod}: API answered {exc.status} {exc.reason}"
                if exc.status in (400, 403, 404):
                    break
            except HTTPError as exc:
                why = f"log of pod {pod}: {exc}"
            time.sleep(0.5 * (attempt + 1))
        return b"", why

    def wait(self, job: str, nodes: int, pending_s: float, run_s: float) -> PodsEnd:
        """Watch `job`'s pods until all N succeeded, one failed, was evicted or vanished, or
        a limit passed: `pending_s` until every pod runs, then `run_s`."""
        from kubernetes import watch
        from urllib3.exceptions import HTTPError

        start, pods = time.monotonic(), {}
        running_since: float | None = None
        selector = f"{JOB_LABEL}={job}"
        while True:
            w = watch.Watch()
            # a watch ends by WATCH_S or by the limit now running, whichever is first: a quiet
            # watch (pods pending, no events) must not hold the verdict past its limit
            left = self._left(start, running_since, pending_s, run_s)
            length = max(1, min(WATCH_S, math.ceil(left)))
            try:
                stream = w.stream(
                    self.core.list_namespaced_pod,
                    self.namespace,
                    label_selector=selector,
                    timeout_seconds=length,
                    _request_timeout=length + 5,
                )
                for event in stream:
                    pod = event["object"]
                    meta = pod.metadata
                    if (meta.labels or {}).get(JOB_LABEL) != job:
                        continue
                    index = _index(meta)
                    if not 0 <= index < nodes:
                        continue
                    pods[index] = pod
                    if event["type"] == "DELETED" or meta.deletion_timestamp:
                        return PodsEnd(
                            "vanished",
                            f"pod {meta.name} was deleted before it ended",
                            pods,
                            running_since,
                            time.monotonic() - start,
                        )
                    end = self._verdict(pods, nodes, start, running_since)
                    if end is not None:
                        w.stop()
                        return end
                    if (
                        running_since is None
                        and len(pods) == nodes
                        and all(state(p) in ("running", "ok") for p in pods.values())
                    ):
                        running_since = time.monotonic()
                    if self._late(start, running_since, pending_s, run_s):
                        break
            except HTTPError:  # the request's own timeout: ask again
                pass
            except ValueError as exc:  # a watch event the client could not read
                raise KitError(f"kit k8s: watching {job}'s pods: {exc}") from exc
            late = self._late(start, running_since, pending_s, run_s)
            if late:
                why = (
                    f"not every pod ran within {pending_s:g} s"
                    if running_since is None
                    else f"no end within the {run_s:g} s timeout"
                )
                waiting = "; ".join(
                    f"pod {i}: {_reason(p)}"
                    for i, p in sorted(pods.items())
                    if state(p) != "ok" and _reason(p)
                )
                return PodsEnd(
                    late,
                    why + (f" ({waiting})" if waiting else ""),
                    pods,
                    running_since,
                    time.monotonic() - start,
                )

    @staticmethod
    def _left(start: float, running: float | None, pending_s: float, run_s: float) -> float:
        """Seconds until the limit now running passes (pending_s, then run_s)."""
        now = time.monotonic()
        return pending_s - (now - start) if running is None else run_s - (now - running)

    @staticmethod
    def _late(start: float, running: float | None, pending_s: float, run_s: float) -> str:
        if Cluster._left(start, running, pending_s, run_s) >= 0:
            return ""
        return "pending-timeout" if running is None else "timeout"

    @staticmethod
    def _verdict(
        pods: dict[int, Any], nodes: int, start: float, running: float | None
    ) -> PodsEnd | None:
        wall = time.monotonic() - (running or start)
        for i, pod in sorted(pods.items()):
            s = state(pod)
            if s in ("failed", "evicted"):
                why = f"pod {pod.metadata.name} (node {i}) {s}: {_reason(pod) or 'no reason given'}"
                return PodsEnd(s, why, pods, running, wall)
        if len(pods) == nodes and all(state(p) == "ok" for p in pods.values()):
            return PodsEnd("ok", None, pods, running, wall)
        return None
