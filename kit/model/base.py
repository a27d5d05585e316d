"""The two kinds of model every bundle file is built from, and the schema versions readers check.

`Closed` is for records the kit writes whole (a run spec, a run result's top level, results.json):
an unknown field there is an error. `Open` is for records whose detail comes from outside the
kit's control or from a workload plug-in (NVML inventory, telemetry, a workload's `data`): the
fields every reader relies on are typed, anything else is kept as it was written. Both are strict
about types (no "1" for 1, no true for 1) and refuse NaN and infinities.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from kit.shared import files
from kit.shared.files import RESULT_SCHEMA, SPEC_SCHEMA

BUNDLE_SCHEMA = 1
"""results.json `schema`: the newest this kit reads (kit.bundle writes the same number)."""
HARDWARE_SCHEMA = 1
"""hardware.json `schema` (kit.inventory.SCHEMA)."""
ENVIRONMENT_SCHEMA = 2
"""environment.json `schema`: 2 names `placement` and `engine` apart; a file without one (the
kit wrote none before) is read as 1 (kit.model.environment.Environment.axes); a file that
carries a newer one is from a kit this one cannot read."""

SOFTWARE_SCHEMA = 1
"""software.json `schema` (kit.runtime.images.software writes it)."""

SCHEMAS: dict[str, int] = {
    files.RESULTS: BUNDLE_SCHEMA,
    files.RESULT: RESULT_SCHEMA,
    files.SPEC: SPEC_SCHEMA,
    files.HARDWARE: HARDWARE_SCHEMA,
    files.ENVIRONMENT: ENVIRONMENT_SCHEMA,
    files.SOFTWARE: SOFTWARE_SCHEMA,
}
"""The newest `schema` number this kit reads, per file name; older numbers still load."""


class _Model(BaseModel):
    def dump(self, as_written: bool = False) -> dict[str, Any]:
        """JSON-able, with the file's own field names (`schema`, not `schema_`).

        `as_written`: only the fields the file held or the kit set (no defaults filled in): how
        a record the driver carries typed is written (kit.bundle.Bundle.save: a run's result as
        the worker wrote it plus the driver's fields).
        """
        return self.model_dump(mode="json", by_alias=True, exclude_unset=as_written)


class Closed(_Model):
    """A record the kit writes whole: unknown fields are errors."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


class Open(_Model):
    """A record with typed common fields; other fields are kept as written."""

    model_config = ConfigDict(extra="allow", strict=True, allow_inf_nan=False)

    def written(self) -> list[tuple[str, Any]]:
        """(name, value) of every field the record held, under the file's names: the typed
        fields in the model's order, then the others as written. For a page that lists a whole
        record (environment.json's fingerprint); a typed value is its attribute (a nested
        record stays a model)."""
        typed = [
            (field.alias or name, getattr(self, name))
            for name, field in type(self).model_fields.items()
            if name in self.model_fields_set
        ]
        return typed + list((self.model_extra or {}).items())

    def extra(self, name: str, default: Any = None) -> Any:
        """A field this model does not type (a workload's own, NVML's), as written, else
        `default`. The one way to read them: a typed field is read as its attribute."""
        if name in type(self).model_fields:
            raise AttributeError(f"{type(self).__name__}.{name} is typed: read the attribute")
        return (self.model_extra or {}).get(name, default)
