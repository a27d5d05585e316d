"""Which transport did NCCL really use? Parsed from its NCCL_DEBUG=INFO output.

NCCL prints one line per connection it sets up, e.g.

    host:1234:1290 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read
    host:1234:1291 [1] NCCL INFO Channel 00 : 1[1] -> 0[0] via SHM/direct/direct
    host:1234:1292 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] [send] via NET/Socket/0
    (older NCCL: "Ring 00 : 0[18000] -> 1[3b000] via P2P/IPC")

so a run's log proves that "no-p2p" avoided P2P and "p2p" used it. Worker side: stdlib only.
"""

from __future__ import annotations

import re
from typing import Any

_CONNECTION = re.compile(
    r"NCCL INFO (?:Channel|Ring) (?P<channel>\d+)(?:/\d+)? : "
    r"(?P<src>\d+)(?:\[[0-9a-fA-Fx]+\])? -> (?P<dst>\d+)(?:\[[0-9a-fA-Fx]+\])?"
    r"(?: \[(?P<dir>send|receive)\])? via (?P<via>.+?)\s*$"
)
_VERSION = re.compile(r"NCCL INFO NCCL version (?P<version>\S+)")
_ENV = re.compile(
    r"NCCL INFO (?P<key>NCCL_[A-Z0-9_]+) set by environment to (?P<value>\S+?)\.?\s*$"
)

_CHANNELS = re.compile(
    r"NCCL INFO (?P<coll>\d+) coll channels, (?P<collnet>\d+) collnet channels, "
    r"(?P<nvls>\d+) nvls channels, (?P<p2p>\d+) p2p channels"
)

CATEGORIES = ("P2P", "SHM", "NET", "COLLNET", "NVLS")


def transport_key(via: str) -> tuple[str, list[str]]:
    """ "P2P/CUMEM/read" -> ("P2P/CUMEM", ["read"]); "SHM/direct/direct" -> ("SHM", [...]);
    "NET/IB/0/GDRDMA" -> ("NET/IB", ["0", "GDRDMA"])."""
    parts = via.split("/")
    kind = parts[0].upper()
    if kind == "SHM":
        return "SHM", parts[1:]
    if len(parts) > 1 and kind in ("P2P", "NET", "COLLNET"):
        return f"{kind}/{parts[1]}", parts[2:]
    return parts[0], parts[1:]


def parse_nccl_log(text: str) -> dict[str, Any]:
    """{"version", "transports": {key: connections}, "peers": {"0->1": {key: n}}, "summary",
    "rings_connected", "env", "channels"}. summary: "P2P" | "SHM" | "NET" | ... | "mixed" | None (no lines:
    NCCL_DEBUG was not INFO, or no NCCL communicator was made)."""
    version = None
    transports: dict[str, int] = {}
    peers: dict[str, dict[str, int]] = {}
    details: set[str] = set()
    env: dict[str, str] = {}
    rings = False
    channels: dict[str, int] | None = None
    for line in text.splitlines():
        if "NCCL INFO" not in line:
            continue
        m = _CHANNELS.search(line)
        if m and channels is None:
            channels = {k: int(v) for k, v in m.groupdict().items()}
            continue
        m = _CONNECTION.search(line)
        if m:
            key, extra = transport_key(m["via"])
            transports[key] = transports.get(key, 0) + 1
            pair = f"{m['src']}->{m['dst']}"
            peers.setdefault(pair, {})
            peers[pair][key] = peers[pair].get(key, 0) + 1
            details.update(x for x in extra if not x.isdigit())
            continue
        m = _VERSION.search(line)
        if m and version is None:
            version = m["version"]
            continue
        m = _ENV.search(line)
        if m:
            env[m["key"]] = m["value"]
            continue
        if "Connected all rings" in line:
            rings = True
    categories = {k.split("/")[0].upper() for k in transports}
    summary = None
    if len(categories) == 1:
        summary = categories.pop()
    elif categories:
        summary = "mixed"
    return {
        "version": version,
        "transports": dict(sorted(transports.items())),
        "peers": dict(sorted(peers.items())),
        "details": sorted(details),
        "summary": summary,
        "rings_connected": rings,
        "env": env,
        "channels": channels,  # {"coll", "collnet", "nvls", "p2p"}: NCCL's count, or None
    }


def contradiction(transports: dict[str, int], p2p_disabled: bool, single_node: bool) -> str | None:
    """One line when the transports NCCL used contradict the variant, else None.

    With NCCL_P2P_DISABLE=1 no P2P connection may appear. With P2P allowed, a single-node run
    that shows no P2P connection at all did not use NVLink/PCIe peer access; across nodes, NET
    alone is expected (P2P can only join GPUs of one node).
    """
    p2p = sum(n for k, n in transports.items() if k.startswith("P2P"))
    if p2p_disabled and p2p:
        return f"P2P was disabled but NCCL made {p2p} P2P connection(s)"
    if not p2p_disabled and not p2p:
        if not single_node and all(k.startswith("NET") for k in transports):
            return None
        return f"P2P was allowed but NCCL used only {', '.join(transports)}"
    return None


def verdict(parsed: dict[str, Any], p2p_disabled: bool, single_node: bool = True) -> str | None:
    """The run's transport verdict: no connection lines at all, or a contradiction, or None."""
    if parsed.get("summary") is None:
        return "NCCL printed no connection lines (was NCCL_DEBUG=INFO set?)"
    return contradiction(parsed["transports"], p2p_disabled, single_node)


# NCCL_DEBUG_SUBSYS=TUNING: the algorithm and protocol NCCL picked for one collective call, printed
# by rank 0 when it schedules the call (src/enqueue.cc, the same format string in NCCL 2.26-2.30):
#   "%s: %ld Bytes -> Algo %s proto %s channel{Lo..Hi}={%d..%d}"
# Symmetric-memory kernels (2.27+) and copy-engine collectives (2.29+) print instead
#   "%s [Symmetric]: %ld Bytes -> Kernel %s nchannels %d nthreads %d" (2.28+: " nWorks %d")
#   "%s [Copy Engine]: %ld Bytes -> cudaMemcpy%s"
# Bytes are NCCL's count x type size: the per-rank chunk for all-gather and reduce-scatter.
_TUNING = re.compile(
    r"NCCL INFO (?P<func>[A-Za-z]+): (?P<bytes>\d+) Bytes -> Algo (?P<algo>\S+) "
    r"proto (?P<proto>\S+) channel\{Lo\.\.Hi\}=\{(?P<lo>\d+)\.\.(?P<hi>\d+)\}"
)
_TUNING_SYMMETRIC = re.compile(
    r"NCCL INFO (?P<func>[A-Za-z]+) \[Symmetric\]: (?P<bytes>\d+) Bytes -> Kernel (?P<kernel>\S+) "
    r"nchannels (?P<nchannels>\d+)"
)
_TUNING_CE = re.compile(
    r"NCCL INFO (?P<func>[A-Za-z]+) \[Copy Engine\]: (?P<bytes>\d+) Bytes -> (?P<copy>cudaMemcpy\S*)"
)


def parse_tuning(text: str) -> list[dict[str, Any]]:
    """Every collective call NCCL's TUNING log names, in order: {"func", "bytes", "algo",
    "proto", "channels"} where channels = hi - lo + 1 (None when the line names none)."""
    calls: list[dict[str, Any]] = []
    for line in text.splitlines():
        if "NCCL INFO" not in line or "Bytes ->" not in line:
            continue
        if m := _TUNING.search(line):
            algo, proto, channels = m["algo"], m["proto"], int(m["hi"]) - int(m["lo"]) + 1
        elif m := _TUNING_SYMMETRIC.search(line):
            algo, proto, channels = f"symmetric kernel {m['kernel']}", "-", int(m["nchannels"])
        elif m := _TUNING_CE.search(line):
            algo, proto, channels = f"copy engine ({m['copy']})", "-", None
        else:
            continue
        calls.append(
            {
                "func": m["func"],
                "bytes": int(m["bytes"]),
                "algo": algo,
                "proto": proto,
                "channels": channels,
            }
        )
    return calls


def choice_words(call: dict[str, Any]) -> str:
    """One call's choice as the report prints it: "RING/LL, 16 ch"."""
    ch = f", {call['channels']} ch" if call.get("channels") else ""
    proto = call.get("proto")
    return f"{call['algo']}/{proto}{ch}" if proto and proto != "-" else f"{call['algo']}{ch}"
