"""A run's two files: the spec the driver writes (runs/<id>/spec.json) and the worker's result.

The same result, with the driver's additions (exit code, launch, NCCL transports, log tail),
is one entry of results.json's `runs`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from kit.model.base import Closed, Open

RunStatus = Literal["ok", "failed", "timeout", "skipped"]


class RunSpec(Closed):
    """runs/<id>/spec.json: what one launch runs (kit.plan.RunSpec.to_json)."""

    schema_: int = Field(alias="schema", ge=1)
    run_id: str
    benchmark: str
    kind: str
    variant: str
    repeat: int = Field(ge=0)
    device: str
    nproc: int = Field(ge=1)
    smoke: bool
    params: dict[str, Any]
    env: dict[str, str] = {}
    result_path: str = "result.json"


class Metric(Open):
    """One measured number with its unit and direction."""

    value: float
    unit: str
    higher_is_better: bool = True


class SizeRow(Open):
    """One message size of a collective sweep: times and bandwidths of every timed iteration."""

    bytes: int = Field(ge=0)
    count: int | None = None
    time_us: list[float] = []
    algbw_gbps: list[float] = []
    busbw_gbps: list[float] = []
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
    columns: list[str] = []
    gpus: list[dict[str, Any]] = []
    throttled: bool = False
    throttle_reasons_seen: list[str] = []


class NcclRecord(Open):
    """What NCCL_DEBUG=INFO said about the transports (kit.worker.nccl_log), and the verdict."""

    version: str | None = None
    transports: dict[str, int] = {}
    peers: dict[str, Any] = {}
    details: list[str] = []
    summary: str = ""
    rings_connected: bool | None = None
    env: dict[str, str] = {}
    verdict: str | None = None


class Launch(Open):
    """How the driver started the run."""

    command: list[str] = []
    wall_s: float | None = None


class RunResult(Closed):
    """runs/<id>/result.json as the worker writes it, or an entry of results.json `runs`."""

    schema_: int = Field(alias="schema", ge=1)
    run_id: str
    benchmark: str
    kind: str
    variant: str
    repeat: int = Field(ge=0)
    status: RunStatus
    error: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    world_size: int | None = Field(default=None, ge=1)
    device: str
    backend: str | None = None
    env: dict[str, str] = {}
    versions: dict[str, str | None] = {}
    metrics: dict[str, Metric] = {}
    data: RunData = RunData()
    notes: list[str] = []
    telemetry: Telemetry | None = None
    wall_s: float | None = None
    # added by the driver (kit.reproduce.result_of, multi-node, Slurm collect)
    nccl: NcclRecord | None = None
    exit_code: int | None = None
    launch: Launch | None = None
    log_tail: str | None = None
    nodes: list[dict[str, Any]] | None = None
    network: dict[str, Any] | None = None
