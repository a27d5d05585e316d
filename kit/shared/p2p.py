"""Whether a run had GPU peer-to-peer off: one answer that the driver, the preflight, the run's
NCCL check, the report and compare all ask, and the two built-in variants that set it.

The answer comes from what the run's environment held, read the way NCCL reads it (an integer,
C's strtoll with base 0: "1" and "0x1" turn P2P off; "0", "" and words such as "true" do not,
NCCL warns and keeps its default), and, where the run recorded NCCL's own log, from the value
NCCL says it took from the environment. Standard library only.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

VARIABLE = "NCCL_P2P_DISABLE"

VARIANTS: dict[str, tuple[dict[str, str], str]] = {
    "p2p": (
        {},
        "GPU peer-to-peer allowed: NCCL moves data GPU to GPU directly over NVLink "
        "(or PCIe peer-to-peer where there is no NVLink), its default.",
    ),
    "no-p2p": (
        {VARIABLE: "1"},
        "NCCL_P2P_DISABLE=1: GPU-to-GPU traffic is staged through host shared memory. "
        "A lower bound, not a prediction for a PCIe-only machine (which would still use PCIe "
        "peer-to-peer).",
    ),
}
"""The built-in variants a recipe names by word: their env and the sentence that defines them."""

_INTEGER = re.compile(r"\s*([-+]?)(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)")


def _nccl_int(value: Any) -> int:
    """The integer NCCL makes of an environment value (0, its default, where it makes none)."""
    m = _INTEGER.match(str(value))
    if not m:
        return 0
    sign, body = -1 if m.group(1) == "-" else 1, m.group(2)
    base = 16 if body[:2].lower() == "0x" else 8 if body.startswith("0") else 10
    return sign * int(body, base)


def p2p_off(env: Mapping[str, Any] | None, nccl: Mapping[str, Any] | None = None) -> bool:
    """True when the run had peer-to-peer off.

    env: the variables the run was launched with; nccl: the run's parsed NCCL log
    (kit.shared.nccl_log.parse_nccl_log), whose "env" holds what NCCL took from the environment
    and wins where present."""
    seen = (nccl or {}).get("env") if isinstance(nccl, Mapping) else None
    if isinstance(seen, Mapping) and VARIABLE in seen:
        return _nccl_int(seen[VARIABLE]) != 0
    return _nccl_int((env or {}).get(VARIABLE, "0")) != 0
