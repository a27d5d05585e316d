"""Podman as a second engine: the Docker SDK against Podman's API socket (`podman system service`).

Everything but the creation of a container goes through Podman's Docker-compatible API, as for
Docker (images built, loaded and saved, containers started, watched, logged and removed, owner
labels). A container is created through Podman's own API (libpod), from the same options: the
compatible API of Podman 4 drops a CDI device request without a word, and libpod's `devices`
take CDI names (`nvidia.com/gpu=0`), which is how Podman hands GPUs to containers (NVIDIA's
`nvidia-ctk cdi generate`). The socket: $KIT_PODMAN_HOST, else the rootful default
unix:///run/podman/podman.sock.
"""

from __future__ import annotations

import resource
from typing import Any

from kit.io.errors import KitError
from kit.runtime.containers import gpus
from kit.runtime.containers.client import podman_client
from kit.runtime.containers.docker import DockerContainer
from kit.shared.engines import Engine

LIBPOD = "/v4.0.0/libpod"  # Podman 4's own API (Debian 12's podman is 4.3)


def _bytes(size: str | int) -> int:
    """Docker's size words ("16g", "512m") in bytes."""
    text = str(size).strip().lower()
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)


PODMAN_LIMITS = {"nofile": 1 << 20, "nproc": 32768}
"""What Podman 4 sets its own open files and processes to at start (soft and hard; lower where
it cannot raise them: /proc/PID/limits of `podman system service`). The runc it starts can give
a container no more without CAP_SYS_RESOURCE."""


def engine_limits() -> dict[str, tuple[int, int]]:
    """Open files and processes for every container (the probe's too): the driver's hard
    limits, no higher than Podman's own.

    Left alone, Podman gives a container 2^20 open files, which a daemon without
    CAP_SYS_RESOURCE cannot (a nested sandbox; the lent GPU machines, whose root lacks it and
    holds 20,000 open files): runc fails with "error setting rlimit type 7". The driver's own
    limits can be above Podman's (processes: 96,365 against 32,768 here; open files 2^30 on some
    servers), where runc fails the same way (type 6, type 7).
    """

    def capped(limit: int, ceiling: int) -> int:
        return ceiling if limit == resource.RLIM_INFINITY else min(limit, ceiling)

    which = {"nofile": resource.RLIMIT_NOFILE, "nproc": resource.RLIMIT_NPROC}
    out = {}
    for name, ceiling in PODMAN_LIMITS.items():
        hard = capped(resource.getrlimit(which[name])[1], ceiling)
        out[name] = (hard, hard)
    return out


def _rlim(value: int) -> int:
    """Docker's "unlimited" (-1) as libpod's (an unsigned 64-bit integer: -1 is refused)."""
    return (1 << 64) - 1 if value < 0 else value


def libpod_spec(opts: dict[str, Any]) -> dict[str, Any]:
    """Podman's container spec (libpod's SpecGenerator) of DockerContainer.options' keywords."""
    spec: dict[str, Any] = {
        "image": opts["image"],
        "command": list(opts["command"]),
        "env": dict(opts.get("environment") or {}),
        "labels": dict(opts.get("labels") or {}),
    }
    if opts.get("name"):
        spec["name"] = opts["name"]
    if opts.get("working_dir"):
        spec["work_dir"] = opts["working_dir"]
    devices = []
    for request in opts.get("device_requests") or []:
        if request.get("Driver") != "cdi":
            raise KitError(
                "Podman hands GPUs to containers through CDI only: write a CDI spec "
                "(`nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml`)"
            )
        devices += [{"path": name} for name in request.get("DeviceIDs") or []]
    if devices:
        spec["devices"] = devices
    if opts.get("shm_size"):
        spec["shm_size"] = _bytes(opts["shm_size"])
    asked = {u["Name"]: u for u in opts.get("ulimits") or []}
    if "memlock" not in asked:
        asked = {}  # CPU runs, a nested daemon: the stack is then Podman's default
    spec["r_limits"] = [
        {"type": n, "soft": _rlim(u["Soft"]), "hard": _rlim(u["Hard"])} for n, u in asked.items()
    ] + [
        {"type": n, "soft": soft, "hard": hard}
        for n, (soft, hard) in engine_limits().items()
        if n not in asked
    ]
    mounts = [
        {"destination": dest, "type": "tmpfs", "source": "tmpfs", "options": how.split(",")}
        for dest, how in (opts.get("tmpfs") or {}).items()
    ]
    for source, bind in (opts.get("volumes") or {}).items():
        mounts.append(
            {
                "destination": bind["bind"],
                "type": "bind",
                "source": source,
                "options": ["rbind", bind.get("mode", "rw")],
            }
        )
    if mounts:
        spec["mounts"] = mounts
    if opts.get("init"):
        spec["init"] = True
    if opts.get("auto_remove"):
        spec["remove"] = True
    if opts.get("user"):
        spec["user"] = opts["user"]
    network = opts.get("network_mode")
    if network in ("none", "host"):
        spec["netns"] = {"nsmode": network}
    elif network:
        spec["netns"] = {"nsmode": "bridge"}
        spec["Networks"] = {network: {}}
    if opts.get("hostname"):
        spec["hostname"] = opts["hostname"]
    if opts.get("extra_hosts"):
        spec["hostadd"] = [f"{h}:{ip}" for h, ip in opts["extra_hosts"].items()]
    if opts.get("mem_limit"):
        spec["resource_limits"] = {"memory": {"limit": _bytes(opts["mem_limit"])}}
    return spec


class PodmanContainer(DockerContainer):
    """Runs each launch in a fresh container of `image` on Podman (rootful), GPUs by CDI."""

    name = "podman"
    engine = Engine.PODMAN
    label = "Podman"

    @classmethod
    def connect(cls) -> Any:
        return podman_client()

    @classmethod
    def gpu_request_style(cls, client: Any) -> gpus.GpuStyle:
        """CDI, always: the specs in Podman's CDI directories (/etc/cdi, /var/run/cdi) must
        declare the GPUs (Podman has no NVIDIA runtime hook to ask)."""
        names, found = gpus.read_cdi_specs(gpus.CDI_DIRS, gpus.cdi_kind())
        if not names:
            raise KitError(
                f"Podman cannot give GPUs to containers: no CDI spec of {gpus.cdi_kind()} in "
                f"{' or '.join(gpus.CDI_DIRS)} (write one: `nvidia-ctk cdi generate "
                "--output=/etc/cdi/nvidia.yaml`); or use --runtime host"
            )
        return gpus.Cdi(kind=gpus.cdi_kind(), devices=frozenset(names), spec_files=tuple(found))

    @classmethod
    def create(cls, client: Any, opts: dict[str, Any]) -> Any:
        """Created through libpod (CDI devices), then handled through the compatible API."""
        api = client.api
        response = api._post_json(
            f"{api.base_url}{LIBPOD}/containers/create", data=libpod_spec(opts)
        )
        made = api._result(response, json=True)
        return client.containers.get(made["Id"])
