#!/usr/bin/env bash
# The box-acceptance run on a lent multi-GPU machine (issue 48): recipes/acceptance.yaml in the
# kit's pinned container on every GPU (gpus: all), 3 repeats; then the same with a background load
# on GPU 1 (scripts/device/busy_gpu.py: matmuls and memory traffic beside the kit's, started here,
# stopped here by its pid; no clock, power limit or compute mode is ever changed), which page 1 must
# name as the outlier. Both bundles, their plain-text page-1 summaries (box_summary.py), every log,
# nvidia-smi's identity and topology go into one archive under $OUT. Run from the repository root,
# carry [".whl", ".device"] (scripts/device/prepare.sh makes them; a sparse checkout keeps the tree
# under the 64 MiB a call carries: reports/measurements/2026-11-28-pinned-evidence/README.md):
#
#   KIT_COMMIT=<40 hex> bash scripts/device/acceptance.sh            # the same command each call
#
# Stages, in order (default: daemon screen clean loaded): a stage done on this machine is skipped
# (the machine stays warm between calls), and one that would start after BUDGET_S seconds (default
# 240) waits for the next call, so the one command, given again, finishes the work. Estimated: on
# 8 GPUs three calls (daemon and screen with the image build; clean, ~4.5 min; loaded), on 2 GPUs
# two (daemon, screen and clean, ~3 min; loaded).
#   daemon   scripts/device/containers.sh daemon: dockerd with CDI, the machine's stack imported as
#            kit-host-stack:local (the pinned-evidence study's path)
#   screen   the screening form (--repeats 1), nothing else running: its time is the screening's
#            (the first kit reproduce also builds the environment image: that time is not it)
#   clean    kit reproduce recipes/acceptance.yaml --runtime docker --env ngc-pytorch: every GPU,
#            every pair, 3 repeats, nothing else running
#   loaded   the same with busy_gpu.py on GPU $LOAD_GPU (default 1) for the whole run
# At HARD_S seconds (default 570, inside a call's 600) the running `kit reproduce` gets SIGTERM by
# its pid: it seals what finished as an interrupted bundle, and the archive is still packed.
# REPEATS=N overrides the recipe's 3 (e.g. 1 for a first look).
set -uo pipefail
: "${OUT:=/tmp/out}"
WORK=/tmp/acceptance
STATE=$WORK/state
mkdir -p "$WORK/bundles" "$STATE" "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
export CUDA_DEVICE_ORDER=PCI_BUS_ID  # GPU numbers are NVML's, the kit's and busy_gpu.py's alike
export KIT_COMMIT=${KIT_COMMIT:-}
export PYTHONPATH="/tmp/site:$PWD:${PYTHONPATH:-}"
BUDGET_S=${BUDGET_S:-240}
HARD_S=${HARD_S:-570}
LOAD_GPU=${LOAD_GPU:-1}
RECIPE=recipes/acceptance.yaml
BASE=kit-host-stack:local
log() { echo "[$(date -u +%H:%M:%S) +${SECONDS}s] $*" | tee -a "$WORK/acceptance.log"; }
busy_pid=""
stop_busy() {
  if [ -n "$busy_pid" ] && kill -0 "$busy_pid" 2>/dev/null; then
    kill -TERM "$busy_pid"; wait "$busy_pid" 2>/dev/null; log "background load (pid $busy_pid) stopped"
  fi
  busy_pid=""
}
trap stop_busy EXIT

reproduce() {  # NAME [kit reproduce options]: the recipe in the pinned container, SIGTERM at HARD_S
  local name=$1; shift
  local out=$WORK/bundles/$name left=$((HARD_S - SECONDS)) t0=$SECONDS
  if [ "$left" -lt 60 ]; then log "$name: not started, $left s before HARD_S"; return 1; fi
  rm -rf "$out"
  log "$name: kit reproduce $RECIPE --runtime docker --env ngc-pytorch --base-image $BASE $*"
  python3 -m kit reproduce "$RECIPE" --device cuda --runtime docker --env ngc-pytorch \
      --base-image "$BASE" --out "$out" ${REPEATS:+--repeats "$REPEATS"} "$@" \
      >>"$WORK/$name.log" 2>&1 &
  local pid=$!
  ( sleep "$left"; kill -0 "$pid" 2>/dev/null && kill -TERM "$pid" \
      && echo "[+${HARD_S}s] HARD_S: SIGTERM to kit reproduce (pid $pid)" >>"$WORK/acceptance.log" ) &
  local watchdog=$!
  wait "$pid"; local code=$?
  kill "$watchdog" 2>/dev/null; wait "$watchdog" 2>/dev/null
  log "$name: exit $code, $((SECONDS - t0)) s from the command to the sealed bundle"
  tail -3 "$WORK/$name.log" | tee -a "$WORK/acceptance.log"
  return "$code"
}

summary() {  # NAME [--expect-named N]: page 1's per-GPU standing as text
  local name=$1; shift
  [ -d "$WORK/bundles/$name" ] || return 0
  python3 scripts/device/box_summary.py "$WORK/bundles/$name" "$@" 2>&1 | tee "$WORK/summary-$name.txt"
}

stage() {
  case $1 in
    daemon) OUT=$WORK bash scripts/device/containers.sh daemon ;;
    clean) reproduce clean; local code=$?; summary clean; return "$code" ;;
    screen) REPEATS=1 reproduce screen; local code=$?; summary screen; return "$code" ;;
    loaded)
      log "loaded: busy_gpu.py on GPU $LOAD_GPU, $(nvidia-smi -i "$LOAD_GPU" --query-gpu=uuid,pci.bus_id,compute_mode --format=csv,noheader)"
      python3 scripts/device/busy_gpu.py --gpu "$LOAD_GPU" --seconds "$HARD_S" >"$WORK/busy_gpu.log" 2>&1 &
      busy_pid=$!
      sleep 15  # the load has its memory and runs before the first measurement
      tail -2 "$WORK/busy_gpu.log" | tee -a "$WORK/acceptance.log"
      # the planted load is the point: preflight refuses a busy GPU unless told (2026-11-29 call 2)
      reproduce loaded --allow gpu-busy; local code=$?
      stop_busy
      tail -2 "$WORK/busy_gpu.log" | tee -a "$WORK/acceptance.log"
      summary loaded --expect-named "$LOAD_GPU"
      return "$code" ;;
    *) log "unknown stage $1"; return 2 ;;
  esac
}

log "acceptance call, kit commit ${KIT_COMMIT:-not stated}, budget ${BUDGET_S} s, hard stop ${HARD_S} s"
nvidia-smi --query-gpu=index,name,uuid,pci.bus_id,memory.total,driver_version,power.limit,clocks.max.sm,compute_mode \
    --format=csv | tee -a "$WORK/acceptance.log"
nvidia-smi topo -m >"$WORK/topo.txt" 2>&1
[ $# -gt 0 ] || set -- daemon screen clean loaded
for s in "$@"; do
  if [ -e "$STATE/$s.done" ]; then log "$s: done in an earlier call"; continue; fi
  if [ "$SECONDS" -gt "$BUDGET_S" ]; then log "$s: not started ($SECONDS s used, BUDGET_S=$BUDGET_S): the next call"; continue; fi
  t0=$SECONDS
  if stage "$s"; then touch "$STATE/$s.done"; fi
  log "$s: $((SECONDS - t0)) s"
done
stop_busy
for b in "$WORK"/bundles/*/; do
  [ -d "$b" ] && log "verify $(basename "$b"): $(python3 -m kit verify "$b" 2>&1 | tail -1)"
done
stamp=$(date -u +%Y%m%d-%H%M%S)
tar -czf "$OUT/acceptance-$stamp.tar.gz" --exclude=acceptance/state -C /tmp acceptance
ls -la "$OUT"
log "done: $(ls "$STATE" | tr '\n' ' ')"
