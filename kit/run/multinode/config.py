"""The multi-node settings of a run: the recipe's nodes: section with --nodes applied."""

from __future__ import annotations

import socket
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

from kit.io.errors import InputError
from kit.recipe import Nodes


@dataclass
class NodeConfig:
    """The recipe's `nodes:` section (kit.recipe.Nodes), after --nodes overrides."""

    hosts: list[str]
    gpus_per_node: int | None = None
    rdzv_port: int = 29400
    rdzv_host: str | None = None
    network: str = "host"
    nccl_socket_ifname: str | None = None
    env: dict[str, str] = field(default_factory=dict)


def node_config(recipe_nodes: Any, cli_hosts: tuple[str, ...] = ()) -> NodeConfig | None:
    """The multi-node settings of a run: the recipe's section, with --nodes replacing its hosts.

    None when neither asks for several nodes (the single-machine runtimes apply).
    """
    if recipe_nodes is None and not cli_hosts:
        return None
    data = recipe_nodes.model_dump() if recipe_nodes is not None else {}
    if cli_hosts:
        data["hosts"] = list(cli_hosts)
    try:
        nodes = Nodes.model_validate(data)
    except Exception as exc:  # pydantic's ValidationError: one line naming the field
        err = exc.errors()[0] if hasattr(exc, "errors") else {"loc": (), "msg": str(exc)}
        where = ".".join(str(p) for p in err["loc"]) or "nodes"
        msg = str(err["msg"]).removeprefix("Value error, ")
        raise InputError(f"--nodes: {where}: {msg}") from None
    return NodeConfig(**nodes.model_dump())


def host_of(url: str) -> str:
    """The machine a daemon URL names (the driver's own name for a local unix socket)."""
    parsed = urlparse(url)
    if parsed.scheme in ("unix", "npipe") or not parsed.hostname:
        return socket.gethostname()
    return parsed.hostname
