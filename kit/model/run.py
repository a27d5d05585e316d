"""A run's two files: the spec the driver writes (runs/<id>/spec.json) and the worker's result.

The same result, with the driver's additions (exit code, launch, NCCL transports, log tail),
is one entry of results.json's `runs`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from kit.model.base import Closed, Open
from kit.model.software import Loaded
from kit.shared import files

RunStatus = Literal["ok", "failed", "timeout", "skipped"]


class RunIdentity(Closed):
    """What names one run, first in its spec and in its result: file schema, run id, and the
    benchmark, kind, variant and repeat it is one of."""

    schema_: int = Field(alias="schema", ge=1)
    run_id: str
    benchmark: str
    kind: str
    variant: str
    repeat: int = Field(ge=0)

    def identity(self) -> dict[str, Any]:
        """The naming fields but the file's schema: what a run's result copies from its spec."""
        return {name: getattr(self, name) for name in RunIdentity.model_fields if name != "schema_"}


class RunSpec(RunIdentity):
    """runs/<id>/spec.json: what one launch runs (kit.run.plan.RunSpec.to_json)."""

    device: str
    nproc: int = Field(ge=1)
    smoke: bool
    params: dict[str, Any]
    env: dict[str, str] = Field(default_factory=dict)
    result_path: str = files.RESULT


class Metric(Open):
    """One measured number with its unit and direction."""

    value: float
    unit: str
    higher_is_better: bool = True


class SizeRow(Open):
    """One message size of a collective sweep: times and bandwidths of every timed iteration."""

    bytes: int = Field(ge=0)
    count: int | None = None
    time_us: list[float] = Field(default_factory=list)
    algbw_gbps: list[float] = Field(default_factory=list)
    busbw_gbps: list[float] = Field(default_factory=list)
    wrong: int = 0
    timing: str | None = None


class RunData(Open):
    """A workload's payload. Typed where the kinds share a field; the rest is the workload's."""

    params: dict[str, Any] | None = None
    unit: str | None = None
    # training workloads
    step_times_s: list[float] | None = None
    warmup_steps: int | None = Field(default=None, ge=0)
    steps: int | None = Field(default=None, ge=0)
    # collective sweeps
    sizes: list[SizeRow] | None = None
    bus_factor: float | None = None
    op: str | None = None
    dtype: str | None = None


class Telemetry(Open):
    """GPU samples taken while the run ran (kit.worker.telemetry)."""

    available: bool
    reason: str | None = None
    started_at: str | None = None
    interval_s: float | None = None
    columns: list[str] = Field(default_factory=list)
    gpus: list[dict[str, Any]] = Field(default_factory=list)
    throttled: bool = False
    throttle_reasons_seen: list[str] = Field(default_factory=list)


class NcclRecord(Open):
    """What NCCL_DEBUG=INFO said about the transports (kit.shared.nccl_log), and the verdict."""

    version: str | None = None
    transports: dict[str, int] = Field(default_factory=dict)
    peers: dict[str, Any] = Field(default_factory=dict)
    details: list[str] = Field(default_factory=list)
    summary: str | None = None  # None: the log named no transport
    rings_connected: bool | None = None
    env: dict[str, str] = Field(default_factory=dict)
    verdict: str | None = None


class Launch(Open):
    """How the driver started the run."""

    command: list[str] = Field(default_factory=list)
    wall_s: float | None = None
    launcher: str | None = None  # a batch runtime's (kit slurm: host, pyxis, apptainer)


class NodeRecord(Open):
    """One node of a multi-node run as the driver saw it (kit.run.multinode, kit slurm
    collect): how it ended, its log, and what the driver set on it."""

    node: int = Field(ge=0)
    host: str | None = None  # its Docker daemon
    status: str | None = None  # ok, failed, vanished, stopped (by the driver), timeout
    exit_code: int | None = None
    nproc: int = Field(ge=1)
    log: str | None = None  # logs/<run>.node<i>.log
    found: bool | None = None  # kit slurm: whether the job left that log
    log_tail: str | None = None
    address: str | None = None  # its container's, on a bridge network
    env: dict[str, str] = Field(default_factory=dict)  # the NCCL variables it added


class Network(Closed):
    """How the nodes of a run talked (kit.run.results.network_transport)."""

    transport: list[str] = Field(default_factory=list)


class RunResult(RunIdentity):
    """runs/<id>/result.json as the worker writes it, or an entry of results.json `runs`."""

    status: RunStatus
    error: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    world_size: int | None = Field(default=None, ge=1)
    device: str
    backend: str | None = None
    env: dict[str, str] = Field(default_factory=dict)
    versions: dict[str, str | None] = Field(default_factory=dict)
    metrics: dict[str, Metric] = Field(default_factory=dict)
    data: RunData = Field(default_factory=RunData)
    notes: list[str] = Field(default_factory=list)
    telemetry: Telemetry | None = None
    wall_s: float | None = None
    # what rank 0 had loaded after its timed windows (kit.worker.loaded); kept in the run's own
    # result.json only: results.json leaves it out (kit.bundle.Bundle.save)
    loaded: Loaded | None = None
    # added by the driver (kit.run.results.result_of, multi-node, Slurm collect)
    nccl: NcclRecord | None = None
    exit_code: int | None = None
    launch: Launch | None = None
    log_tail: str | None = None
    nodes: list[NodeRecord] | None = None
    network: Network | None = None
    recovered: str | None = None  # added by `kit seal` to a result the driver never recorded


INTERRUPTED = "interrupted before it finished"
"""The error of a run a stop signal (or HARD_S) cut short: the report counts it apart from a
run that failed, since nothing in the run went wrong."""


def failed_result(spec: RunSpec, status: RunStatus, error: str, **driver: Any) -> RunResult:
    """The driver's record of a run whose worker left no valid result; `driver`: fields the
    one recording it adds (`kit seal`'s `recovered`), set only where given."""
    return RunResult(
        schema=files.RESULT_SCHEMA,
        **spec.identity(),
        status=status,
        error=error,
        world_size=spec.nproc,
        device=spec.device,
        env=spec.env,
        metrics={},
        data=RunData(),
        **driver,
    )
