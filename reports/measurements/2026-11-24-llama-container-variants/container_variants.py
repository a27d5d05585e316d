#!/usr/bin/env python3
"""Switches for experiments on the kit's GPU container, written into a device call's copy of the tree.

    KIT_DEVICE_COPY=1 python3 reports/measurements/2026-11-24-llama-container-variants/container_variants.py

reports/measurements/2026-11-24-llama-container-variants/container_rounds.sh runs this on the lent machine, on the device tool's copy of
the working tree (thrown away after the call), never in a checkout: it edits
kit/runtime/containers/docker.py so that three environment variables of the driver change one
thing each about the container a run gets. They are experiments, not options of the kit:

  KIT_EXP_POLL_S=10  the driver asks the daemon for the container's state every 10 s, not 0.5 s
  KIT_EXP_TORCH=1    the host's /opt/torch bind-mounted read-only over the image's copy of it
                     (torch, cuBLAS, cuDNN and NCCL run from the host's files)
  KIT_EXP_STACK=1    no 64 MiB stack limit (the daemon's default, as on the host)
  KIT_EXP_PRIV=1     a privileged container (every capability, no seccomp filter, every device)
  KIT_EXP_NET=host   the host's network namespace instead of none (no host name of the kit's)
  KIT_EXP_INIT=0     no init process: torchrun is the container's first process
  KIT_EXP_HOSTFS=1   the host's /usr/lib, /usr/bin and /opt/torch bind-mounted read-only over the
                     image's (the container runs the host's files, in its own namespaces)
  KIT_EXP_ENV=1      the driver's own environment too (the host's locale and the rest; PATH,
                     PYTHONPATH, LD_LIBRARY_PATH, HOME and HOSTNAME stay the container's)
  KIT_EXP_CGNS=host  the host's cgroup namespace instead of a private one
  KIT_EXP_TMPFS=0    no private tmpfs at /tmp (the image's own /tmp, on its overlay)
"""

from __future__ import annotations

from pathlib import Path

from device_copy import edit_copy  # beside this script

FILE = Path(__file__).resolve().parents[3] / "kit/runtime/containers/docker.py"

EDITS = [
    (  # since 4b87f22 the driver waits on the engine's wait, checking it every 0.5 s
        "code = self.exit.code(min(0.5, max(0.0, deadline - time.monotonic())))",
        'code = self.exit.code(min(float(os.environ.get("KIT_EXP_POLL_S", "0.5")), '
        "max(0.0, deadline - time.monotonic())))",
    ),
    (
        '    out = [docker.types.Ulimit(name="stack", soft=STACK_BYTES, hard=STACK_BYTES)]\n',
        '    out = [] if os.environ.get("KIT_EXP_STACK") else '
        '[docker.types.Ulimit(name="stack", soft=STACK_BYTES, hard=STACK_BYTES)]\n',
    ),
    (
        '            opts["volumes"] = {str(run_dir.resolve()): {"bind": MOUNT, "mode": "rw"}}\n',
        '            opts["volumes"] = {str(run_dir.resolve()): {"bind": MOUNT, "mode": "rw"}}\n'
        '            if os.environ.get("KIT_EXP_TORCH"):\n'
        '                opts["volumes"]["/opt/torch"] = {"bind": "/opt/torch", "mode": "ro"}\n',
    ),
    (
        '            opts["extra_hosts"] = {HOSTNAME: "127.0.0.1"}\n',
        '            opts["extra_hosts"] = {HOSTNAME: "127.0.0.1"}\n'
        '            if os.environ.get("KIT_EXP_PRIV"):\n'
        '                opts["privileged"] = True\n'
        '            if os.environ.get("KIT_EXP_NET") == "host":\n'
        '                opts["network_mode"] = "host"\n'
        '                del opts["hostname"], opts["extra_hosts"]\n'
        '            if os.environ.get("KIT_EXP_INIT") == "0":\n'
        '                opts["init"] = False\n'
        '            if os.environ.get("KIT_EXP_HOSTFS"):\n'
        '                for d in ("/usr/lib", "/usr/bin", "/opt/torch"):\n'
        '                    opts["volumes"][d] = {"bind": d, "mode": "ro"}\n'
        '            if os.environ.get("KIT_EXP_ENV"):\n'
        '                keep = ("PATH", "PYTHONPATH", "LD_LIBRARY_PATH", "HOME", "HOSTNAME")\n'
        "                host = {k: v for k, v in os.environ.items() if k not in keep}\n"
        '                opts["environment"] = {**host, **opts["environment"]}\n'
        '            if os.environ.get("KIT_EXP_CGNS") == "host":\n'
        '                opts["cgroupns"] = "host"\n'
        '            if os.environ.get("KIT_EXP_TMPFS") == "0":\n'
        '                del opts["tmpfs"]\n',
    ),
]


def main() -> int:
    return edit_copy("container_variants.py", FILE, EDITS, "KIT_EXP_", "KIT_EXP_* switches")


if __name__ == "__main__":
    raise SystemExit(main())
