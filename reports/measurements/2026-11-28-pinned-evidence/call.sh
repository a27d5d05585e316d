#!/usr/bin/env bash
# One device call of the pinned-evidence study (issue: what a buyer reads comes from the pinned
# path): recipes in the kit's Docker container on a lent 2-GPU machine, the host runtime of the
# same recipe beside it, everything packed into ONE archive under $OUT. Run from the repository
# root, carry [".whl", ".device"] (scripts/device/prepare.sh makes them; never committed):
#
#   KIT_COMMIT=<40 hex> BUDGET_S=510 bash reports/measurements/2026-11-28-pinned-evidence/call.sh NAME STEP...
#
# Steps, in the order given (scripts/device/containers.sh does the kit's part; each is idempotent
# on a machine still warm from the previous call, so the daemon and the image survive):
#   daemon           dockerd 26 with CDI, the machine's own stack imported as kit-host-stack:local
#   build=RECIPE     kit build RECIPE for the docker steps (the image alone, ~60 s; a warm
#                    machine's next call then starts its runs at once)
#   docker=RECIPE    kit reproduce RECIPE --runtime docker --env ngc-pytorch (the recipe's repeats)
#   host=RECIPE      kit reproduce RECIPE --runtime host --repeats 1 (the container/host ratio)
#   docker=RECIPE@NAME[,NAME], host=...   the same with the recipe cut to the benchmarks named
#                    (containers.sh only=NAME): one benchmark a call, as ResNet and decode need;
#                    VARIANTS=p2p in the environment keeps only those variants (cut_recipe.py):
#                    decode-dp and the copy move nothing between GPUs (call c38)
#   rerun=ARCHIVE    kit reproduce BUNDLE of a bundle another machine made (.tar.gz in .xfer/)
#   plain18          benchmarks/reference/plain_resnet_ddp.py, no kit: ResNet-18 at 32 px, 64 per
#                    GPU, 50 warm-up steps and PLAIN_STEPS timed (default 3000: about the 30 s
#                    window the kit times), its REFERENCE line appended to plain.log
# A step that would start after BUDGET_S seconds is skipped and logged as skipped. At HARD_S
# seconds (default 540, inside the device call's 600) the running `kit reproduce` gets SIGTERM:
# it seals what finished as an interrupted bundle, and the archive is still packed (on
# 2026-11-28 a ResNet call that ran past the call's limit came back with nothing).
# The archive $OUT/NAME.tar.gz holds every bundle, every log, nvidia-smi's identity and topology.
set -uo pipefail
name=$1; shift
: "${OUT:=/tmp/out}"
WORK=/tmp/pinned-evidence/$name
mkdir -p "$WORK" "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
export KIT_COMMIT=${KIT_COMMIT:-}
export PYTHONPATH="/tmp/site:$PWD:${PYTHONPATH:-}"
log() { echo "[$(date -u +%H:%M:%S) +${SECONDS}s] $*" | tee -a "$WORK/call.log"; }
containers() { OUT=$WORK bash scripts/device/containers.sh "$@"; }
HARD_S=${HARD_S:-540}
# the watchdog's sleep dies with it: on 2026-11-29 a sleep left behind held a finished call
# open until HARD_S (540 s of device time for 333 s of work)
( trap 'kill "$sleeper" 2>/dev/null; exit 0' TERM
  sleep "$HARD_S" & sleeper=$!; wait "$sleeper"
  pkill -TERM -f "kit reproduce" && echo "[+${HARD_S}s] HARD_S: SIGTERM to kit reproduce" >>"$WORK/call.log" ) &
watchdog=$!
log "call $name, kit commit ${KIT_COMMIT:-not stated}, budget ${BUDGET_S:-none}"
nvidia-smi --query-gpu=index,name,uuid,pci.bus_id,memory.total,driver_version,power.limit,clocks.max.sm \
    --format=csv | tee -a "$WORK/call.log"
nvidia-smi topo -m >"$WORK/topo.txt" 2>&1
for step in "$@"; do
  if [ -n "${BUDGET_S:-}" ] && [ "$SECONDS" -gt "$BUDGET_S" ]; then
    log "skipped $step: ${SECONDS} s used, BUDGET_S=$BUDGET_S"; continue
  fi
  t0=$SECONDS
  case $step in
    daemon) containers daemon ;;
    build=*) containers recipe="${step#build=}" build ;;
    docker=*@*) spec=${step#docker=}; PACK=0 containers recipe="${spec%@*}" only="${spec#*@}" docker ;;
    docker=*) PACK=0 containers recipe="${step#docker=}" docker ;;
    host=*@*) spec=${step#host=}
      PACK=0 KIT_ARGS="--repeats 1" containers recipe="${spec%@*}" only="${spec#*@}" host ;;
    host=*) PACK=0 KIT_ARGS="--repeats 1" containers recipe="${step#host=}" host ;;
    rerun=*) PACK=0 containers rerun "${step#rerun=}" ;;
    plain18) python3 -m torch.distributed.run --standalone --nproc-per-node=2 \
        benchmarks/reference/plain_resnet_ddp.py --arch resnet18 --image-size 32 --classes 10 \
        --batch 64 --warmup 50 --steps "${PLAIN_STEPS:-3000}" 2>&1 | tee -a "$WORK/plain-full.log" \
        | grep '^REFERENCE ' | tee -a "$WORK/plain.log" ;;
    *) log "unknown step $step"; exit 2 ;;
  esac
  log "$step: $((SECONDS - t0)) s"
done
kill "$watchdog" 2>/dev/null
log "bundles: $(ls /tmp/bundles 2>/dev/null | tr '\n' ' ')"
for b in /tmp/bundles/*/; do
  [ -d "$b" ] && log "verify $(basename "$b"): $(python3 -m kit verify "$b" 2>&1 | tail -1)"
done
# this call's bundles move into the archive (a warm machine's next call starts without them)
mkdir -p "$WORK/bundles" && mv /tmp/bundles/* "$WORK/bundles/" 2>/dev/null
tar -czf "$OUT/$name.tar.gz" -C /tmp/pinned-evidence "$name"
ls -la "$OUT"
log "done"
