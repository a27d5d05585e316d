"""results.json: the bundle's header, every run's result, and what the driver decided on the way.

Written by kit.bundle (header), kit.run.engine (runs, adaptive repeats, status), kit.run.rerun
(`reproduces`, `environment_diff`), kit.run.slurm (`slurm`) and kit.run.k8s (`k8s`).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from kit.model.base import Closed, Open
from kit.model.run import RunResult
from kit.model.software import EnvironmentCheck

MAX_REPEATS = 100
"""The recipe's bound on repeats and max_repeats (kit.recipe.Recipe)."""

BundleStatus = Literal["running", "complete", "partial", "interrupted", "failed", "submitted"]


class PreflightFinding(Open):
    """A preflight check that did not pass (kit.run.preflight)."""

    level: Literal["error", "warn"]
    check: str
    message: str


class AdaptiveRecord(Closed):
    """Whether a benchmark needed more repeats, and why (kit.run.adaptive.adaptive_record)."""

    metric: str | None
    planned: int = Field(ge=1, le=MAX_REPEATS)
    max_repeats: int = Field(ge=1, le=MAX_REPEATS)
    cv_threshold: float = Field(gt=0)
    repeats: int = Field(ge=0, le=MAX_REPEATS)
    cv: dict[str, float | None] = Field(default_factory=dict)
    noisy: list[str] = Field(default_factory=list)
    more: bool = False
    cap_reached: bool = False
    reason: str = ""


class Reproduces(Open):
    """The bundle a rerun reproduces (kit.run.rerun.source_record)."""

    bundle: str
    recipe: str | None = None
    created_at: str | None = None
    manifest_sha256: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")
    # the manifest less its report lines (kit.bundle.content_sha256): `kit report` of the source
    # re-seals its report and changes manifest_sha256, never this; absent in older reruns
    content_sha256: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")
    # the source's signature did not verify and --read-broken-signature read it anyway: the
    # line every page made from this rerun carries ("" or absent: it verified or was unsigned)
    broken_signature: str = Field(default="", max_length=2000)


class EnvironmentDifference(Closed):
    """One field that differs between the reproduced bundle and the rerun (kit.env.diff)."""

    field: str
    old: str
    new: str


class SlurmInfo(Open):
    """How `kit slurm` submitted the job."""

    nodes: int = Field(ge=1)
    gpus_per_node: int = Field(ge=1)
    launcher: str
    image: str | None = None
    python: str | None = None
    partition: str | None = None
    time: str | None = None
    job_id: str | None = None


class K8sInfo(Open):
    """Where `kit k8s` ran the plan: pods (nodes) of one namespace, the image by digest."""

    pods: int = Field(ge=1)
    gpus_per_node: int = Field(ge=1)
    namespace: str
    image: str | None = None
    service: str | None = None  # the headless Service; each run's job is SERVICE-<index>
    jobset: bool = False
    node_selector: list[str] = Field(default_factory=list)
    tolerations: list[str] = Field(default_factory=list)
    service_account: str | None = None
    host_network: bool = False
    server_version: str | None = None  # the API server's gitVersion, as it answered


class SealedAfter(Open):
    """What `kit seal` did to a bundle whose seal was interrupted (kit.run.seal.recover)."""

    at: str
    by: str
    status_before: str | None = None
    removed_temporary_files: list[str] = Field(default_factory=list)
    recovered_runs: list[str] = Field(default_factory=list)
    # runs the killed driver had launched that wrote no result: recorded "did not run to the end"
    in_flight_runs: list[str] = Field(default_factory=list)
    # runs whose worker wrote a result after the driver was killed (a container or rank that
    # went on): recorded failed, "finished after its driver was killed", never a measured ok run
    after_driver_died: list[str] = Field(default_factory=list)
    reason: str = ""


class Results(Closed):
    """results.json."""

    schema_: int = Field(alias="schema", ge=1)
    kit_version: str
    kit_commit: str | None = None  # git commit of the kit ("-dirty": uncommitted changes)
    created_at: str
    finished_at: str | None = None
    status: BundleStatus
    # the fields in the order kit.bundle.Bundle.create has written them since the first bundles
    preflight: list[PreflightFinding] = Field(default_factory=list)
    reproduces: Reproduces | None = None
    recipe: str
    device: str
    runtime: str
    pinned: bool
    smoke: bool
    # the planned count (recipe or --repeats; a rerun plans as many: bounded), written as
    # "repeats"; what ran is in `runs` (adaptive repeats add whole ones, see `adaptive`)
    planned_repeats: int = Field(alias="repeats", ge=1, le=MAX_REPEATS)
    command: str = ""
    planned_runs: int = Field(default=0, ge=0)
    runs: list[RunResult] = Field(default_factory=list)
    adaptive: dict[str, AdaptiveRecord] = Field(default_factory=dict)  # per benchmark
    # differences that can change a number; environment_notes: those that cannot (image ids)
    environment_diff: list[EnvironmentDifference] | None = None
    environment_notes: list[EnvironmentDifference] | None = None
    # a rerun's verdict on what differs inside the environments, loaded by the runs or not
    environment_check: EnvironmentCheck | None = None
    error: str | None = None  # what stopped the engine itself, when something did
    slurm: SlurmInfo | None = None
    k8s: K8sInfo | None = None
    sealed_after: SealedAfter | None = None
