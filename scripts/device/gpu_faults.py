"""The GPU path's faults, against the real daemon and GPU of a lent machine (containers.sh faults).

Each case must end as one line or a failed run with its reason, within its deadline, and leave
no container behind:
  1. a GPU the CDI spec does not declare (nvidia.com/gpu=7): refused before any container;
  2. the daemon loses the GPU (its CDI spec removed after the runtime was prepared): a failed run
     naming CDI;
  3. a container killed for memory (a 1 GiB limit, a rank that allocates 4 GiB): OOMKilled;
  4. a container with no usable GPU (no device handed to it): the worker's own one line;
  5. its driver killed outright (SIGKILL) while a GPU container runs: the container stops itself
     when the heartbeat stops, and the engine removes it: no container of that driver 40 s later.
Prints one line per case and exits 1 if any case did not behave.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import docker

from kit.run.results import worker_error
from kit.runtime.base import LaunchRequest
from kit.runtime.containers import gpus
from kit.runtime.containers.client import LABEL_OWNER
from kit.runtime.containers.docker import DockerContainer
from kit.runtime.local import LocalRuntime
from kit.runtime.pinned import DockerRuntime

SPEC = {"schema": 1, "benchmark": "allreduce", "kind": "allreduce", "variant": "one-gpu",
        "repeat": 0, "device": "cuda", "nproc": 1, "smoke": True,
        "params": {"min_bytes": 8, "max_bytes": 1024, "iters": 2, "warmup_iters": 1, "trials": 1},
        "env": {}, "result_path": "result.json"}  # fmt: skip


def image() -> str:
    tags = [t for i in docker.from_env().images.list() for t in i.tags if t.startswith("kit-ngc")]
    if not tags:
        sys.exit("no kit-ngc-pytorch image: run the docker stage first")
    return tags[0]


def run_dir(name: str) -> Path:
    d = Path(tempfile.mkdtemp(prefix=f"kit-fault-{name}-"))
    (d / "spec.json").write_text(json.dumps({**SPEC, "run_id": f"fault.{name}.r0"}))
    return d


def case(name: str, runtime: LocalRuntime, gpu_ids: list[int] | None, want: str) -> bool:
    d = run_dir(name)
    t0 = time.monotonic()
    out = runtime.run(
        LaunchRequest(d, 1, {}, d / "log", timeout_s=180, gpu_ids=gpu_ids, device="cuda")
    )
    took = time.monotonic() - t0
    # the reason as the run's result would give it: the launch's error, else the worker's own
    error = out.error or worker_error(d / "log") or "(no reason found in the log)"
    ok = out.exit_code != 0 and not out.timed_out and want in str(error)
    box = runtime.container  # the engine's container class, whichever runtime holds it
    left = box.client.containers.list(all=True, filters={"label": f"{LABEL_OWNER}={box.owner}"})
    ok = ok and not left
    print(f"{'OK ' if ok else 'BAD'} {name}: exit {out.exit_code} after {took:.1f} s: {error}"
          f"{'' if not left else f'; {len(left)} container(s) left'}")  # fmt: skip
    return ok


def main() -> int:
    client = docker.from_env()
    tag = image()
    style = gpus.require(client)
    print(f"image {tag}; GPUs through {style.name} {getattr(style, 'devices', '')}")
    results = [case("missing-gpu", DockerRuntime(tag, client=client, gpu_style=style), [7],
                    "no device nvidia.com/gpu=7")]  # fmt: skip
    spec_file = Path("/etc/cdi/nvidia.json")
    moved = spec_file.with_suffix(".away")
    shutil.move(spec_file, moved)
    try:
        results.append(case("daemon-lost-gpu", DockerRuntime(tag, client=client, gpu_style=style),
                            [0], "CDI"))  # fmt: skip
    finally:
        shutil.move(moved, spec_file)
    oom = LocalRuntime(DockerContainer(tag, client=client, gpu_style=style, memory="1g"))
    results.append(case("oom", oom, [0], "OOMKilled"))
    no_gpu = DockerRuntime(tag, client=client, gpu_style=NoGpus())
    results.append(case("no-gpu-in-container", no_gpu, [0], "torch sees no GPU"))
    results.append(killed_driver(client, tag))
    return 0 if all(results) else 1


DRIVER = """
import sys, docker
from pathlib import Path
from kit.runtime.base import LaunchRequest
from kit.runtime.pinned import DockerRuntime
d = Path(sys.argv[2])
DockerRuntime(sys.argv[1], client=docker.from_env()).run(
    LaunchRequest(d, 1, {}, d / "log", timeout_s=600, gpu_ids=[0], device="cuda"))
"""


def killed_driver(client: docker.DockerClient, tag: str) -> bool:
    """A driver in its own process, killed with SIGKILL 5 s after its container started."""
    d = run_dir("killed-driver")
    long = {**SPEC, "run_id": "fault.killed-driver.r0",
            "params": {**SPEC["params"], "iters": 10**6, "trials": 10**4}}  # fmt: skip
    (d / "spec.json").write_text(json.dumps(long))
    owner = f"kit-fault-killed-{os.getpid()}"
    mine = {"label": f"{LABEL_OWNER}={owner}"}
    driver = subprocess.Popen([sys.executable, "-c", DRIVER, tag, str(d)],
                              env={**os.environ, "KIT_OWNER": owner})  # fmt: skip
    deadline = time.monotonic() + 120
    while not client.containers.list(filters=mine) and time.monotonic() < deadline:
        time.sleep(0.2)
    started = bool(client.containers.list(filters=mine))
    time.sleep(5)
    driver.kill()
    driver.wait()
    t0 = time.monotonic()
    while client.containers.list(all=True, filters=mine) and time.monotonic() - t0 < 40:
        time.sleep(0.5)
    left = client.containers.list(all=True, filters=mine)
    took = time.monotonic() - t0
    for c in left:
        c.remove(force=True)
    ok = started and not left
    print(
        f"{'OK ' if ok else 'BAD'} killed-driver: container started {started}; "
        f"{len(left)} container(s) of the killed driver left after {took:.1f} s"
    )
    return ok


class NoGpus(gpus.NvidiaRuntime):
    """A request style that hands the container nothing: an image that cannot reach CUDA."""

    def requests(self, gpu_ids):  # type: ignore[no-untyped-def]
        return []


if __name__ == "__main__":
    sys.exit(main())
