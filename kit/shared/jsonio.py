"""How every kit file's JSON is written and stamped, the same on both sides: strict JSON
(non-finite floats as null, which the driver's loader requires) and UTC timestamps."""

from __future__ import annotations

import json
import math
from datetime import datetime, timezone
from typing import Any


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def finite(data: Any) -> Any:
    """`data` with every NaN or infinity as None: JSON has no such number, and the driver's
    loader (kit.model) refuses them, so the kit writes them as null (a diverged loss, say)."""
    if isinstance(data, float) and not math.isfinite(data):
        return None
    if isinstance(data, dict):
        return {k: finite(v) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return [finite(v) for v in data]
    return data


def dumps(data: Any) -> str:
    """Strict JSON text as every kit file is written: non-finite floats as null (`finite`)."""
    return json.dumps(finite(data), indent=2, sort_keys=False, allow_nan=False) + "\n"
