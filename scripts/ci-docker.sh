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

start_dockerd() {
    # A dockerd that died (a session that ended, a killed CI run) leaves its pid files behind. If
    # the pid in /var/run/docker/containerd/containerd.pid now belongs to another live process,
    # dockerd takes it for its containerd, dials a socket nobody serves and gives up with "timeout
    # waiting for containerd to start". Nothing of docker runs yet here, so the files are stale.
    if ! pgrep -x dockerd >/dev/null && ! pgrep -f 'containerd --config /var/run/docker' >/dev/null; then
        rm -f /var/run/docker.pid /var/run/docker/containerd/containerd.pid \
            /var/run/docker/containerd/containerd.sock
    fi
    nohup dockerd >>/tmp/dockerd.log 2>&1 &
    started=$!  # the one daemon this script may stop: never another by name
    echo "$started" >/tmp/kit-ci-dockerd.pid
    for _ in $(seq 1 90); do
        docker info >/dev/null 2>&1 && return 0
        sleep 1
    done
    return 1
}

stop_started() {
    # only the dockerd this script started (its pid), and only while it is still that dockerd
    if [[ -n "$started" ]] && [[ "$(cat "/proc/$started/comm" 2>/dev/null)" == dockerd ]]; then
        kill "$started" 2>/dev/null || true
        for _ in $(seq 1 15); do kill -0 "$started" 2>/dev/null || return 0; sleep 1; done
        kill -9 "$started" 2>/dev/null || true
    fi
}

started=""
if ! docker info >/dev/null 2>&1; then
    # a second try after stopping what the first left, for a daemon slow to start on a busy machine
    start_dockerd || { stop_started; sleep 3; start_dockerd; } || true
fi
if ! docker info >/dev/null 2>&1; then
    echo "dockerd did not come up; last lines of /tmp/dockerd.log:" >&2
    tail -20 /tmp/dockerd.log >&2 || true
    exit 1
fi
echo "docker: $(docker version --format '{{.Server.Version}}') answers"

"$here/tests/docker/make_base_image.sh" "${KIT_TEST_BASE_IMAGE:-kit-test-base:bookworm}"
