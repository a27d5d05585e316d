"""The shape of a reference document as `kit refs add` stores it (kit.refs.store.reference_of).

A row of the user's database is read back through this model before anything uses it: a row
another program wrote or edited (a document without its label, a metric's values that are not
numbers) is one line naming the row, never a KeyError from a reader deep inside `refs list`,
`refs standing` or a report.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class _Doc(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)


class StoredMetric(_Doc):
    unit: str
    higher_is_better: bool
    values: list[float] = Field(min_length=1)


class StoredBenchmark(_Doc):
    benchmark: str
    variant: str
    kind: str
    signature: str
    world_size: int | None = None
    min_window_s: float | None = None
    params: dict[str, Any] | None = None  # absent in references stored before they kept them
    metrics: dict[str, StoredMetric]


class StoredHardware(_Doc):
    gpu: str | None = None
    gpus: int = Field(ge=0)
    label: str | None = None


class StoredReference(_Doc):
    schema_: int = Field(alias="schema")
    label: str = Field(min_length=1)
    source: str | None = None
    recipe: str | None = None
    created_at: str | None = None
    hardware: StoredHardware
    benchmarks: list[StoredBenchmark]
