#!/usr/bin/env bash
# Make a Docker daemon available for the docker tests (idempotent): install Debian's docker.io
# and debootstrap when missing, start dockerd when nothing answers, wait for `docker info`, and
# build the local base image the tests use (no registry is reachable in CI).
# usage: scripts/ci-docker.sh            (as root; .ci/run calls it before pytest)
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"

need=()
command -v dockerd >/dev/null || need+=(docker.io)
command -v debootstrap >/dev/null || need+=(debootstrap)
if ((${#need[@]})); then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

if ! docker info >/dev/null 2>&1; then
    nohup dockerd >/tmp/dockerd.log 2>&1 &
    for _ in $(seq 1 60); do
        docker info >/dev/null 2>&1 && break
        sleep 1
    done
fi
if ! docker info >/dev/null 2>&1; then
    echo "dockerd did not come up; last lines of /tmp/dockerd.log:" >&2
    tail -20 /tmp/dockerd.log >&2 || true
    exit 1
fi
echo "docker: $(docker version --format '{{.Server.Version}}') answers"

"$here/tests/docker/make_base_image.sh" "${KIT_TEST_BASE_IMAGE:-kit-test-base:bookworm}"
