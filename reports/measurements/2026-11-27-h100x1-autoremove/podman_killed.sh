#!/usr/bin/env bash
# One device call: Podman 4.3 with the GPU by CDI (scripts/device/containers.sh podmand), the
# single_gpu recipe's all-reduce in a Podman container, then a driver killed with SIGKILL while
# its GPU container runs (the llama benchmark): no container of the kit may remain 40 s later.
# Carry [".whl", ".podman"]; logs to $OUT.
set -uo pipefail
: "${OUT:=/tmp/out}"
bash scripts/device/containers.sh podmand recipe=recipes/single_gpu.yaml only=allreduce podman
export PYTHONPATH="/tmp/site:$PWD" PATH="/tmp/kit-device/bin:$PATH"
log() { echo "[$(date -u +%H:%M:%S)] $*" | tee -a "$OUT/killed.log"; }
kept=$(podman ps -a --filter label=kit.owner --format '{{.ID}}' | wc -l)
log "kit containers before: $kept"
python3 -m kit reproduce recipes/single_gpu.yaml --device cuda --runtime podman --env ngc-pytorch \
    --base-image kit-host-stack:local --repeats 1 --out /tmp/bundles/podman-killed \
    >"$OUT/killed-driver.log" 2>&1 &
driver=$!
for _ in $(seq 1 600); do
  [ -n "$(podman ps --filter label=kit.run --format '{{.ID}}')" ] && break
  sleep 0.2
done
log "running: $(podman ps --filter label=kit.run --format '{{.Names}} {{.Labels}}' | head -1 | cut -c1-160)"
sleep 5
kill -9 "$driver"; wait "$driver" 2>/dev/null
log "driver killed (SIGKILL)"
t0=$SECONDS
while [ -n "$(podman ps -a --filter label=kit.owner --format '{{.ID}}')" ] && [ $((SECONDS - t0)) -lt 40 ]; do
  sleep 0.5
done
left=$(podman ps -a --filter label=kit.owner --format '{{.ID}} {{.Status}}')
log "after $((SECONDS - t0)) s: $( [ -z "$left" ] && echo 'no kit container left' || echo "left: $left")"
ps -eo pid,args | grep -E 'torchrun|kit.worker' | grep -v grep | tee -a "$OUT/killed.log" || true
