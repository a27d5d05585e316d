"""A recipe's `nodes:` section: several machines for one run (kit/run/multinode.py)."""

from __future__ import annotations

from pydantic import Field, ValidationInfo, field_validator, model_validator

from kit.recipe.base import Strict, TuningEnv
from kit.recipe.daemons import daemon_key, url_ok
from kit.shared.limits import MAX_GPUS, MAX_NODES


class Nodes(Strict):
    """Several machines for one run: one worker container per node, joined by torchrun's c10d
    rendezvous on the first node. `hosts` are Docker daemon URLs, one per node."""

    hosts: list[str] = Field(min_length=1, max_length=MAX_NODES)
    # default: the recipe's gpus
    gpus_per_node: int | None = Field(default=None, strict=True, ge=1, le=MAX_GPUS)
    rdzv_port: int = Field(default=29400, strict=True, ge=1, le=65535)
    # the address the other nodes reach the first one at (default: the first host's name)
    rdzv_host: str | None = Field(default=None, pattern=r"^[A-Za-z0-9][A-Za-z0-9.:_-]*$")
    network: str = Field(default="host", pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    nccl_socket_ifname: str | None = Field(default=None, pattern=r"^\^?=?[A-Za-z0-9_.,:-]+$")
    env: TuningEnv = Field(default={})  # pydantic copies a mutable default per model

    @field_validator("hosts")
    @classmethod
    def _urls(cls, hosts: list[str]) -> list[str]:
        for url in hosts:
            if not url_ok(url):
                raise ValueError(
                    f"{url!r} is not a Docker daemon URL; allowed: unix://PATH, ssh://[USER@]HOST,"
                    " tcp://HOST:PORT"
                )
        return hosts

    @field_validator("network")
    @classmethod
    def _network(cls, network: str, info: ValidationInfo) -> str:
        hosts = info.data.get("hosts") or []
        if network != "host" and len({daemon_key(h) for h in hosts}) > 1:
            raise ValueError(
                f"{network!r}: a bridge network joins the containers of one daemon only;"
                " nodes on several daemons need `network: host`"
            )
        return network

    @model_validator(mode="after")
    def _one_daemon_once(self) -> Nodes:
        """On the host network two nodes of one daemon would share its ports (the rendezvous):
        a daemon named twice is a slip, refused before anything runs."""
        keys = [daemon_key(h) for h in self.hosts]
        twice = next((h for i, h in enumerate(self.hosts) if keys[i] in keys[:i]), None)
        if twice is not None and self.network == "host":
            raise ValueError(
                f"{twice!r} is named twice; on the host network each node is another daemon "
                "(one daemon's containers share a bridge network: `network: NAME`)"
            )
        return self
