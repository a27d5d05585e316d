"""The open-files and process limits a Podman container is given: never above Podman's own.

A lent GPU machine's shell holds 2^30 open files; Podman lowers its own to 2^20 at start, and
the container's limit set to the driver's failed there ("error setting rlimit type 7"). The
limits below are the driver's real ones, lowered or raised in a child process.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys

from kit.runtime.containers.podman import PODMAN_LIMITS, engine_limits, libpod_spec

PROBE = """
import json, resource, sys
soft, hard = map(int, sys.argv[1:])
resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
from kit.runtime.containers.podman import engine_limits
print(json.dumps(engine_limits()["nofile"]))
"""


def limits_in_child(soft: int, hard: int) -> list[int]:
    out = subprocess.run([sys.executable, "-c", PROBE, str(soft), str(hard)],
                         capture_output=True, text=True, check=True).stdout  # fmt: skip
    return json.loads(out)


def test_the_drivers_limit_where_it_is_below_podmans():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    low = min(hard, 4096)
    assert limits_in_child(min(soft, low), low) == [low, low]


def test_never_above_podmans_own(monkeypatch):
    # raising a hard limit needs CAP_SYS_RESOURCE, which a test cannot count on: the value the
    # driver would read is given here
    for given in [(1 << 30, 1 << 30), (1024, resource.RLIM_INFINITY)]:
        monkeypatch.setattr(resource, "getrlimit", lambda which, g=given: g)
        for name, (soft, hard) in engine_limits().items():
            assert hard == PODMAN_LIMITS[name] and soft == hard


def test_the_spec_carries_them_with_memlock():
    opts = {"image": "x", "command": ["true"],
            "ulimits": [{"Name": "memlock", "Soft": -1, "Hard": -1}]}  # fmt: skip
    limits = {r["type"]: r for r in libpod_spec(opts)["r_limits"]}
    assert limits["memlock"]["hard"] == limits["memlock"]["soft"] == (1 << 64) - 1  # libpod: uint64
    assert limits["nofile"]["hard"] <= PODMAN_LIMITS["nofile"]
    assert limits["nproc"]["hard"] <= PODMAN_LIMITS["nproc"]
    # without memlock (the probe, CPU runs) open files and processes are set all the same
    plain = {r["type"] for r in libpod_spec({"image": "x", "command": ["true"]})["r_limits"]}
    assert plain == {"nofile", "nproc"}


def test_a_refused_limit_is_named_in_words():
    from kit.runtime.containers.docker import launch_error

    text = ("runc create failed: unable to start container process: error during container init: "
            "error setting rlimits for ready process: error setting rlimit type 7: operation not "
            "permitted: OCI permission")  # fmt: skip
    line = launch_error(RuntimeError(text))
    assert "open-files (nofile)" in line and "memlock" not in line and "\n" not in line
    assert "memlock" in launch_error(RuntimeError("error setting rlimit type 8: x"))
