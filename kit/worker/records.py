"""The shapes of the run spec and run result files, for the worker (standard library only).

The driver reads the same files through pydantic models (kit.model.run.RunSpec, RunResult);
tests/unit/test_model_worker.py checks that these TypedDicts and those models name the same
fields, so neither side can add one alone.
"""

from __future__ import annotations

from typing import Any, Literal, TypedDict

from kit.shared.files import RESULT_SCHEMA, SPEC_SCHEMA

RunStatus = Literal["ok", "failed", "timeout", "skipped"]


class IdentityRecord(TypedDict):
    """What names one run, first in its spec and in its result (kit.model.run.RunIdentity)."""

    schema: int
    run_id: str
    benchmark: str
    kind: str
    variant: str
    repeat: int


class SpecRecord(IdentityRecord):
    """runs/<id>/spec.json, written by the driver (kit.run.plan.RunSpec.to_json)."""

    device: str
    nproc: int
    smoke: bool
    params: dict[str, Any]
    env: dict[str, str]
    result_path: str


class MetricRecord(TypedDict):
    """One measured number (kit.worker.common.metric)."""

    value: float
    unit: str
    higher_is_better: bool


class ResultRecord(IdentityRecord, total=False):
    """runs/<id>/result.json as rank 0 writes it (kit.worker.__main__); the identity fields are
    always there, the rest as far as the run got."""

    status: RunStatus
    error: str | None
    started_at: str
    finished_at: str
    world_size: int
    device: str
    backend: str
    env: dict[str, str]
    versions: dict[str, str | None]
    metrics: dict[str, MetricRecord]
    data: dict[str, Any]
    notes: list[str]
    telemetry: dict[str, Any] | None
    wall_s: float
    loaded: dict[str, Any] | None  # kit.worker.loaded: what rank 0 had loaded


__all__ = [
    "RESULT_SCHEMA",
    "SPEC_SCHEMA",
    "IdentityRecord",
    "MetricRecord",
    "ResultRecord",
    "SpecRecord",
]
