#!/usr/bin/env bash
# Why a training benchmark reads slower in the kit's GPU container than on the host runtime: the
# same kit run in places that differ in one thing each, interleaved in one device call.
#
#   device run, carry [".whl", ".device"]:
#     bash reports/measurements/2026-11-24-llama-container-variants/container_rounds.sh drop docker hostcg host hostcg docker host
#
# Places (each one `kit reproduce` of the recipe's BENCHMARK, one repeat, a bundle of its own):
#   docker  the kit's GPU container (scripts/device/containers.sh docker)
#   host    the host runtime (containers.sh host)
#   hostcg  the host runtime, the driver and its workers moved into a cgroup beside the
#           containers' (/sys/fs/cgroup/docker/kit-probe-host, the same controllers): the
#           container's cgroup without its namespaces, image or runtime
#   hostns  the host runtime in new mount, PID, IPC and UTS namespaces (unshare --fork)
#   dpoll   the container, the driver asking the daemon for its state every 10 s, not 0.5 s
#   dtorch  the container with the host's /opt/torch bind-mounted over the image's copy
#   dstack  the container without the kit's 64 MiB stack limit
#   dpriv   a privileged container (every capability, no seccomp filter)
#   dnet    the container in the host's network namespace, not `none`
#   dinit   the container without an init process (torchrun first)
#   dfs     the container running the host's files (/usr/lib, /usr/bin, /opt/torch bound read-only)
#   denv    the container with the driver's environment too (the host's locale and the rest)
#   dall    the container with every d* switch above at once but dpoll and dtorch (dfs covers
#           it): what is left differs from hostns only in the image's overlay root, the cgroup
#           namespace, runc's set-up, the CDI devices and the private tmpfs /tmp and /dev/shm
#   dsw     dall's software half: the host's files and environment (dfs and denv at once)
#   dsetup  dall's other half, the container's set-up: dstack, dpriv, dnet and dinit at once
#   dcgns   the container in the host's cgroup namespace
#   dtmp    the container without its private tmpfs /tmp
#   dmost   dall, in the host's cgroup namespace and without the tmpfs /tmp: what is left is the
#           image's overlay root, runc's set-up and the CDI devices
# Steps between places (no bundle):
#   drop      sync, then drop the machine's page cache (echo 3 > /proc/sys/vm/drop_caches). Put it
#             first: a fresh lent machine has the host's libraries cached on 2 MiB pages and the
#             image's not, and the host-bound Llama run read ~5% faster on the host runtime so
#             (reports/measurements/2026-11-24-llama-container-equal-pages)
#   readlibs  read every shared library of the image's layers and of the host's /opt/torch and
#             /usr/lib once, front to back (the page cache then holds them as a read left them)
# The d* places edit this call's copy of the kit (reports/measurements/2026-11-24-llama-container-variants/container_variants.py).
# STATS=1 adds what the host did in every timed step to each run's data
# (reports/measurements/2026-11-24-llama-container-variants/step_stats.py; reports/measurements/2026-11-24-llama-container-variants/step_stats_table.py reads it, into $OUT/steps.md);
# PROFILE=1 with it also traces steps 20-25 of every run with torch.profiler (slower runs).
# RECIPE (recipes/single_gpu.yaml) and BENCHMARK (llama-8b-lora) pick the run; BUDGET_S (490)
# starts no place after that many seconds. Bundles go to $OUT/bundles.tgz as NN-PLACE (the order
# run); `python3 reports/measurements/2026-11-24-llama-container-variants/place_table.py` reads them.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root: every path below is from there
: "${OUT:=/tmp/out}"
export RECIPE=${RECIPE:-recipes/single_gpu.yaml}
BENCHMARK=${BENCHMARK:-llama-8b-lora}
CG=/sys/fs/cgroup/docker/kit-probe-host
PLACES=/tmp/places
rm -rf "$PLACES"  # a machine still warm from the last call keeps its places: not this call's
mkdir -p "$OUT" "$PLACES"
log() { echo "[$(date -u +%H:%M:%S)] $*" | tee -a "$OUT/order.log"; }

bash scripts/device/containers.sh daemon >"$OUT/daemon.log" 2>&1 || { tail "$OUT/daemon.log"; exit 1; }
export PYTHONPATH="/tmp/site:$PWD"  # the carried wheels containers.sh installed (pydantic)
KIT_DEVICE_COPY=1 python3 reports/measurements/2026-11-24-llama-container-variants/container_variants.py | tee -a "$OUT/order.log"
[ "${STATS:-0}" = 1 ] && KIT_DEVICE_COPY=1 python3 reports/measurements/2026-11-24-llama-container-variants/step_stats.py | tee -a "$OUT/order.log"

one() {  # one PLACE STAGE [PREFIX...]: containers.sh STAGE for the benchmark, under PREFIX
  local place=$1 stage=$2 made
  shift 2
  "$@" env KIT_ARGS="--repeats 1" PACK=0 \
      bash scripts/device/containers.sh "only=$BENCHMARK" "$stage" >>"$OUT/rounds.log" 2>&1
  made=$(ls -dt /tmp/bundles/"$stage"-* 2>/dev/null | head -1)
  if [ -z "$made" ]; then log "$place: no bundle"; return; fi
  n=$((n + 1))
  mv "$made" "$PLACES/$(printf %02d "$n")-$place"
  log "$place: $(grep -h 'tokens/s\|images/s\|samples/s' "$OUT/rounds.log" | tail -1)"
}

into_cgroup() {  # the command given, run inside $CG (made with the containers' controllers)
  mkdir -p "$CG"
  for c in cpu memory pids io cpuset; do
    echo "+$c" >/sys/fs/cgroup/cgroup.subtree_control 2>/dev/null
    echo "+$c" >/sys/fs/cgroup/docker/cgroup.subtree_control 2>/dev/null
  done
  bash -c 'echo $$ > "$0/cgroup.procs" && exec "$@"' "$CG" "$@"
}

n=0
for place in "$@"; do
  if [ "$SECONDS" -gt "${BUDGET_S:-490}" ]; then log "stopping before $place: $SECONDS s"; break; fi
  log "$place"
  case $place in
    drop) sync; echo 3 >/proc/sys/vm/drop_caches; log "page cache dropped" ;;
    readlibs)
      find /tmp/docker-root/overlay2 /opt/torch /usr/lib -name '*.so*' -type f -size +1M \
          -exec cat {} + >/dev/null 2>&1
      log "read the shared libraries: $(grep -i '^Cached' /proc/meminfo)" ;;
    docker) one docker docker ;;
    host) one host host ;;
    hostcg) one hostcg host into_cgroup ;;
    hostns) one hostns host unshare --mount --pid --ipc --uts --fork --mount-proc ;;
    dpoll) one dpoll docker env KIT_EXP_POLL_S=10 ;;
    dtorch) one dtorch docker env KIT_EXP_TORCH=1 ;;
    dstack) one dstack docker env KIT_EXP_STACK=1 ;;
    dpriv) one dpriv docker env KIT_EXP_PRIV=1 ;;
    dnet) one dnet docker env KIT_EXP_NET=host ;;
    dinit) one dinit docker env KIT_EXP_INIT=0 ;;
    dfs) one dfs docker env KIT_EXP_HOSTFS=1 ;;
    denv) one denv docker env KIT_EXP_ENV=1 ;;
    dall) one dall docker env KIT_EXP_STACK=1 KIT_EXP_PRIV=1 KIT_EXP_NET=host KIT_EXP_INIT=0 \
        KIT_EXP_HOSTFS=1 KIT_EXP_ENV=1 ;;
    dsw) one dsw docker env KIT_EXP_HOSTFS=1 KIT_EXP_ENV=1 ;;
    dsetup) one dsetup docker env KIT_EXP_STACK=1 KIT_EXP_PRIV=1 KIT_EXP_NET=host KIT_EXP_INIT=0 ;;
    dcgns) one dcgns docker env KIT_EXP_CGNS=host ;;
    dtmp) one dtmp docker env KIT_EXP_TMPFS=0 ;;
    dmost) one dmost docker env KIT_EXP_STACK=1 KIT_EXP_PRIV=1 KIT_EXP_NET=host KIT_EXP_INIT=0 \
        KIT_EXP_HOSTFS=1 KIT_EXP_ENV=1 KIT_EXP_CGNS=host KIT_EXP_TMPFS=0 ;;
    *) echo "unknown place $place" >&2; exit 2 ;;
  esac
done
tar -czf "$OUT/bundles.tgz" -C "$PLACES" .
python3 reports/measurements/2026-11-24-llama-container-variants/place_table.py "$PLACES"/* | tee "$OUT/places.md"
[ "${STATS:-0}" = 1 ] && python3 reports/measurements/2026-11-24-llama-container-variants/step_stats_table.py "$PLACES"/* | tee "$OUT/steps.md"
