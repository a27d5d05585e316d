"""Print as one JSON line what this environment holds: Python, torch, CUDA, cuDNN, NCCL, driver.

Runs inside the image (`python -m kit.worker.probe`) so that the fingerprint in a bundle says
what the container really had, not what the lock meant it to have. Standard library and torch
only; pynvml when it is installed.
"""

from __future__ import annotations

import json
import platform
import signal
import sys
from importlib import metadata
from typing import Any

PACKAGES = (
    "torch",
    "torchvision",
    "transformers",
    "peft",
    "accelerate",
    "nvidia-ml-py",
    "nvidia-nccl-cu13",
    "nvidia-nccl-cu12",
    "nvidia-cudnn-cu13",
    "nvidia-cuda-runtime",
)


def driver_version() -> str | None:
    """The NVIDIA driver version if the container can see one (NVML, else /proc)."""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            v = pynvml.nvmlSystemGetDriverVersion()
            return v.decode() if isinstance(v, bytes) else str(v)
        finally:
            pynvml.nvmlShutdown()
    except Exception:
        pass
    try:
        with open("/proc/driver/nvidia/version") as f:
            first = f.readline()
        for tok in first.split():
            if tok[:1].isdigit() and "." in tok:
                return tok
    except OSError:
        pass
    return None


def collect() -> dict[str, Any]:
    info: dict[str, Any] = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "libc": "-".join(platform.libc_ver()) or None,
        "torch": None,
        "cuda": None,
        "cudnn": None,
        "nccl": None,
        "driver": driver_version(),
        "gpus": 0,
        "packages": {},
    }
    for name in PACKAGES:
        try:
            info["packages"][name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    # flat, under the same names kit.worker.common.versions() records in every run result
    for name in ("torchvision", "transformers", "peft", "accelerate"):
        info[name] = info["packages"].get(name)
    try:
        import torch
    except ImportError as e:
        info["error"] = f"torch not importable: {e}"
        return info
    info["torch"] = torch.__version__
    info["cuda"] = torch.version.cuda
    try:
        cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
        info["cudnn"] = str(cudnn) if cudnn is not None else None
    except Exception:
        info["cudnn"] = None
    try:
        if torch.cuda.is_available() or torch.version.cuda:
            v = torch.cuda.nccl.version()
            info["nccl"] = ".".join(str(x) for x in v) if isinstance(v, tuple) else str(v)
    except Exception:
        info["nccl"] = None
    try:
        info["gpus"] = torch.cuda.device_count()
    except Exception:
        info["gpus"] = 0
    info["distributed_backends"] = [
        b
        for b, ok in (
            ("gloo", torch.distributed.is_gloo_available()),
            ("nccl", torch.distributed.is_nccl_available()),
        )
        if ok
    ]
    return info


PROBE_LIMIT_S = 150
"""The probe ends itself after this long (SIGALRM, whose default action ends the process):
its container then stops even where the driver that waits for it was killed outright and
runs no handler (the driver gives up waiting at 120 s)."""


def main() -> int:
    signal.alarm(PROBE_LIMIT_S)
    sys.stdout.write(json.dumps(collect(), sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
