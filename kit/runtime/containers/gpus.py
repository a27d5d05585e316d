"""How a Docker daemon hands GPUs to a container: the NVIDIA runtime, or CDI.

Two request styles exist, and a daemon offers one, both or neither:

- **the NVIDIA runtime** (the NVIDIA Container Toolkit's hook, `"nvidia"` among the daemon's
  runtimes): `DeviceRequest(capabilities=[["gpu"]], device_ids=[...] | count=-1)`;
- **CDI** (Container Device Interface, Docker 25+ with the `cdi` feature, NVIDIA's current way
  for Docker, Podman and containerd): `DeviceRequest(driver="cdi",
  device_ids=["nvidia.com/gpu=0", ...])`, resolved from the spec files in the daemon's CDI
  directories (what `nvidia-ctk cdi generate` writes).

`style(client)` picks the one the daemon reports (the NVIDIA runtime when both, as existing
servers are set up; `KIT_GPU_REQUEST=cdi|nvidia` chooses), and the environment record says which
was used. A CDI spec that lacks a requested GPU is refused before the run with one line naming it.
`KIT_CDI_KIND` names another device kind than `nvidia.com/gpu` (the tests use a harmless one).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kit.io.errors import KitError

NVIDIA_KIND = "nvidia.com/gpu"
CDI_DIRS = ("/etc/cdi", "/var/run/cdi")  # the defaults when the daemon does not list its own
TOOLKIT_HINT = (
    "Docker on this host cannot give GPUs to containers: install the NVIDIA Container Toolkit "
    "(https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/install-guide.html),"
    " then either run `nvidia-ctk runtime configure --runtime=docker` or write a CDI spec with "
    "`nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml` (Docker 25+ with the cdi feature), "
    "restart dockerd; or use --runtime host"
)


def cdi_kind() -> str:
    return os.environ.get("KIT_CDI_KIND") or NVIDIA_KIND


@dataclass(frozen=True)
class NvidiaRuntime:
    """GPUs through the NVIDIA Container Toolkit's runtime hook (a capabilities request)."""

    name: str = "nvidia runtime"

    def requests(self, gpu_ids: list[int] | None) -> list[Any]:
        import docker

        if gpu_ids is None:
            return [docker.types.DeviceRequest(count=-1, capabilities=[["gpu"]])]
        ids = [str(i) for i in gpu_ids]
        return [docker.types.DeviceRequest(device_ids=ids, capabilities=[["gpu"]])]

    def check(self, gpu_ids: list[int] | None) -> None:
        """The runtime hook resolves GPU indices itself: nothing to check beforehand."""

    def record(self) -> dict[str, Any]:
        return {"gpu_request": self.name}


@dataclass(frozen=True)
class Cdi:
    """GPUs through CDI: one fully qualified device name per GPU, or KIND=all."""

    kind: str = NVIDIA_KIND
    # the device names local spec files declare for `kind`; None when they cannot be read here
    # (a remote daemon): the daemon then says what it cannot resolve
    devices: frozenset[str] | None = None
    spec_files: tuple[str, ...] = field(default_factory=tuple)
    name: str = "cdi"

    def ids(self, gpu_ids: list[int] | None) -> list[str]:
        if gpu_ids is None:
            return [f"{self.kind}=all"]
        return [f"{self.kind}={i}" for i in gpu_ids]

    def requests(self, gpu_ids: list[int] | None) -> list[Any]:
        import docker

        return [docker.types.DeviceRequest(driver="cdi", device_ids=self.ids(gpu_ids))]

    def check(self, gpu_ids: list[int] | None) -> None:
        """One line naming a requested GPU that the CDI specs here do not declare."""
        if self.devices is None:
            return
        wanted = ["all"] if gpu_ids is None else [str(i) for i in gpu_ids]
        missing = [w for w in wanted if w not in self.devices]
        if missing:
            where = ", ".join(self.spec_files) or "the daemon's CDI directories"
            have = ", ".join(sorted(self.devices)) or "none"
            raise KitError(
                f"CDI: no device {self.kind}={missing[0]} in {where} (it declares: {have}); "
                f"regenerate the spec (`nvidia-ctk cdi generate`) or ask for GPUs it names"
            )

    def record(self) -> dict[str, Any]:
        return {"gpu_request": self.name, "cdi_kind": self.kind}


GpuStyle = NvidiaRuntime | Cdi


def read_cdi_specs(dirs: list[str] | tuple[str, ...], kind: str) -> tuple[set[str], list[str]]:
    """The device names of `kind` that the CDI spec files in `dirs` declare, and those files.

    CDI specs are YAML or JSON with `kind` and `devices: [{name: ...}]`; an unreadable file is
    skipped (the daemon would skip it too).
    """
    names: set[str] = set()
    files: list[str] = []
    for d in dirs:
        folder = Path(d)
        if not folder.is_dir():
            continue
        for f in sorted(folder.iterdir()):
            if f.suffix not in (".yaml", ".yml", ".json") or not f.is_file():
                continue
            try:
                text = f.read_text()
                data = json.loads(text) if f.suffix == ".json" else yaml.safe_load(text)
            except (OSError, ValueError, yaml.YAMLError):
                continue
            if not isinstance(data, dict) or data.get("kind") != kind:
                continue
            found = {
                str(dev.get("name"))
                for dev in data.get("devices") or []
                if isinstance(dev, dict) and dev.get("name") is not None
            }
            if found:
                names |= found
                files.append(str(f))
    return names, files


def _local_daemon(client: Any) -> bool:
    """A daemon on this machine (its unix socket): its CDI spec files can be read here."""
    url = str(getattr(getattr(client, "api", None), "base_url", "") or "")
    return url == "" or url.startswith(("http+docker://localhost", "http+docker://localunixsocket"))


def style(client: Any) -> GpuStyle | None:
    """How this daemon gives GPUs to containers, or None when it cannot (TOOLKIT_HINT says why).

    The NVIDIA runtime when the daemon lists it; CDI when the daemon has CDI directories and,
    for a daemon on this machine, a spec there declares devices of the kind (a remote daemon's
    files cannot be read: its CDI directories are taken at their word).
    """
    try:
        info = client.info()
    except Exception:
        return None
    forced = os.environ.get("KIT_GPU_REQUEST", "").strip().lower()
    if forced not in ("", "cdi", "nvidia"):
        raise KitError(f"KIT_GPU_REQUEST={forced!r}: allowed: cdi, nvidia (or unset: the daemon's)")
    nvidia = "nvidia" in (info.get("Runtimes") or {})
    cdi_dirs = [str(d) for d in info.get("CDISpecDirs") or []]
    kind = cdi_kind()
    cdi: Cdi | None = None
    local = _local_daemon(client)
    names, files = read_cdi_specs(cdi_dirs or list(CDI_DIRS), kind) if local else (set(), [])
    if names:
        cdi = Cdi(kind=kind, devices=frozenset(names), spec_files=tuple(files))
    elif cdi_dirs and not local:
        cdi = Cdi(kind=kind)
    if forced == "cdi":
        return cdi
    if forced == "nvidia":
        return NvidiaRuntime() if nvidia else None
    if nvidia:
        return NvidiaRuntime()
    return cdi


def require(client: Any) -> GpuStyle:
    """The daemon's GPU request style, or the one-line hint that it has none."""
    found = style(client)
    if found is None:
        raise KitError(TOOLKIT_HINT)
    return found


def daemon_error(text: str) -> str | None:
    """The one line for a daemon's refusal to hand out GPUs, or None when it is another error."""
    if "could not select device driver" in text or "nvidia-container-cli" in text:
        return f"{TOOLKIT_HINT} (daemon said: {text})"
    if "unresolvable CDI devices" in text or "CDI device injection failed" in text:
        return f"CDI: the daemon cannot resolve the requested GPU ({text})"
    return None
