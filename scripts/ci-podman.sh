#!/usr/bin/env bash
# Make a rootful Podman available for the Podman tests (idempotent): Debian's podman (4.3) and
# catatonit (its --init), its API service on /run/podman/podman.sock (`podman system service`,
# what the kit's Podman runtime talks to through the Docker SDK), and the CDI spec of the harmless
# test device kind kit.test/gpu (as scripts/ci-docker.sh writes for Docker) where Podman 4.3 reads
# CDI specs: /var/run/cdi, at cdiVersion 0.5.0 (its CDI library reads no newer). Then the base
# image the tests use, copied from Docker's daemon when it has it.
# Podman in a nested sandbox (no CAP_SYS_RESOURCE) cannot raise open files and processes to its
# defaults: containers.conf keeps them at this shell's limits.
# usage: scripts/ci-podman.sh            (as root; .ci/run calls it after ci-docker.sh)
set -euo pipefail
sock=/run/podman/podman.sock
need=()
command -v podman >/dev/null || need+=(podman)
[ -x /usr/libexec/podman/catatonit ] || need+=(catatonit)
if ((${#need[@]})); then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
mkdir -p /etc/containers /var/run/cdi /run/podman
if ! grep -q "kit-ci" /etc/containers/containers.conf 2>/dev/null; then
    cat >/etc/containers/containers.conf <<CONF
# kit-ci: a nested sandbox cannot raise these above its own limits
[containers]
default_ulimits = ["nofile=$(ulimit -Hn):$(ulimit -Hn)", "nproc=4096:4096"]
CONF
fi
cat >/var/run/cdi/kit-test.yaml <<'YAML'
# A harmless CDI device kind for the kit's Podman tests (scripts/ci-docker.sh has Docker's)
cdiVersion: 0.5.0
kind: kit.test/gpu
devices:
  - name: "0"
    containerEdits:
      deviceNodes: [{path: /dev/kit-test-gpu0, hostPath: /dev/null}]
      env: [KIT_TEST_CDI_GPU0=1]
  - name: "1"
    containerEdits:
      deviceNodes: [{path: /dev/kit-test-gpu1, hostPath: /dev/null}]
      env: [KIT_TEST_CDI_GPU1=1]
  - name: all
    containerEdits:
      deviceNodes: [{path: /dev/kit-test-gpu0, hostPath: /dev/null},
                    {path: /dev/kit-test-gpu1, hostPath: /dev/null}]
      env: [KIT_TEST_CDI_GPU0=1, KIT_TEST_CDI_GPU1=1]
YAML
answers() { curl -sf --unix-socket "$sock" http://d/_ping >/dev/null 2>&1; }
if ! answers; then
    # from /: the service and every conmon it starts keep its working directory, and a checkout
    # removed under it ("[conmon:e] Failed to get working directory") fails each later attach
    (cd / && exec nohup podman system service --time=0 "unix://$sock" >>/tmp/podman-service.log 2>&1) &
    echo $! >/tmp/kit-ci-podman.pid
    for _ in $(seq 1 30); do answers && break; sleep 1; done
fi
answers || { echo "ci-podman: Podman's API does not answer on $sock (see /tmp/podman-service.log)" >&2; exit 1; }
base=kit-test-base:bookworm
if ! podman image exists "$base" && docker image inspect "$base" >/dev/null 2>&1; then
    docker save "$base" | podman load >/dev/null
fi
echo "ci-podman: $(podman --version) on $sock; CDI test devices: kit.test/gpu in /var/run/cdi"
