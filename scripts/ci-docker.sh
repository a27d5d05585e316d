#!/usr/bin/env bash
# Make a Docker daemon available for the docker tests (idempotent): Debian trixie's dockerd 26
# (CDI; bookworm's 20.10 predates it), taken out of its .deb files by scripts/docker-trixie.sh,
# started with CDI on and a CDI spec of a harmless test device kind, kit.test/gpu (devices 0, 1
# and all: each injects /dev/null as /dev/kit-test-gpuN and sets KIT_TEST_CDI_GPU), so that a
# CPU-only machine proves the kit asks a daemon for CDI devices the way a GPU server needs.
# Then builds the local base image the tests use (no registry is reachable in CI).
# usage: scripts/ci-docker.sh            (as root; .ci/run calls it before pytest)
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
bins="${KIT_DOCKER_BIN:-${KIT_CACHE:-$HOME/.cache/kit}/docker-trixie}"
conf=/etc/kit-ci
cdi=/etc/kit-test-cdi

need=()
command -v debootstrap >/dev/null || need+=(debootstrap)
command -v iptables >/dev/null || need+=(iptables)   # dockerd's bridge networks
command -v runc >/dev/null || need+=(runc)           # trixie's needs glibc 2.38
command -v dpkg-deb >/dev/null || need+=(dpkg)
if ((${#need[@]})); then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
bash "$here/scripts/docker-trixie.sh" "$bins" >/dev/null
export PATH="$bins/bin:$PATH"

mkdir -p "$conf" "$cdi"
cat >"$cdi/kit-test.yaml" <<'YAML'
# A harmless CDI device kind for the kit's tests: what nvidia-ctk writes for GPUs, with /dev/null
cdiVersion: 0.6.0
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
cat >"$conf/daemon.json" <<JSON
{"features": {"cdi": true}, "cdi-spec-dirs": ["/etc/cdi", "/var/run/cdi", "$cdi"]}
JSON

answers() { docker info >/dev/null 2>&1; }
has_cdi() { docker info --format '{{json .CDISpecDirs}}' 2>/dev/null | grep -q "$cdi"; }

start_dockerd() {
    # A dockerd that died (a session that ended, a killed CI run) leaves its pid files behind. If
    # the pid in /var/run/docker/containerd/containerd.pid now belongs to another live process,
    # dockerd takes it for its containerd, dials a socket nobody serves and gives up with "timeout
    # waiting for containerd to start". Nothing of docker runs yet here, so the files are stale.
    if ! pgrep -x dockerd >/dev/null && ! pgrep -f 'containerd --config /var/run/docker' >/dev/null; then
        rm -f /var/run/docker.pid /var/run/docker/containerd/containerd.pid \
            /var/run/docker/containerd/containerd.sock
    fi
    # from /: the daemon outlives this checkout, which may be removed under it
    (cd / && exec nohup "$bins/bin/dockerd" --config-file "$conf/daemon.json" >>/tmp/dockerd.log 2>&1) &
    started=$!  # the one daemon this script may stop: never another by name
    echo "$started" >/tmp/kit-ci-dockerd.pid
    for _ in $(seq 1 90); do
        answers && return 0
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
# a daemon this script started earlier without the test CDI kind (an older kit): start it anew
if answers && ! has_cdi && [[ -f /tmp/kit-ci-dockerd.pid ]]; then
    started=$(cat /tmp/kit-ci-dockerd.pid)
    stop_started
    started=""
fi
if ! answers; then
    # a second try after stopping what the first left, for a daemon slow to start on a busy machine
    start_dockerd || { stop_started; sleep 3; start_dockerd; } || true
fi
if ! answers; then
    echo "dockerd did not come up; last lines of /tmp/dockerd.log:" >&2
    tail -20 /tmp/dockerd.log >&2 || true
    exit 1
fi
echo "docker: $(docker version --format '{{.Server.Version}}') answers;" \
    "CDI test devices: $(has_cdi && echo "kit.test/gpu in $cdi" || echo "none (another daemon runs)")"

"$here/tests/docker/make_base_image.sh" "${KIT_TEST_BASE_IMAGE:-kit-test-base:bookworm}"
