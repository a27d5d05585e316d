#!/usr/bin/env bash
# A stop signal the moment a GPU container run's last run prints "ok" (issue 37, class 9): the
# bundle must still be sealed and verify, the command exit 128 + the signal, and no container of
# it remain. Run from the repository root on a lent GPU machine, carry [".whl", ".device"]:
#   bash reports/measurements/2026-11-27-h100x1-stop-at-seal/stop_at_seal.sh
# The all-reduce of recipes/single_gpu.yaml (one GPU, 2 repeats), in the pinned image built on the
# machine's own software (scripts/device/containers.sh daemon), once per signal.
set -uo pipefail
: "${OUT:=/tmp/out}"
mkdir -p "$OUT"
bash scripts/device/containers.sh daemon > "$OUT/daemon.log" 2>&1 || { tail "$OUT/daemon.log"; exit 1; }
export PYTHONPATH="/tmp/site:$PWD" PATH="/tmp/kit-device/bin:$PATH" PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
recipe=/tmp/allreduce-one-gpu.yaml
python3 - <<'PY'
import yaml
data = yaml.safe_load(open("recipes/single_gpu.yaml"))
data["benchmarks"] = [b for b in data["benchmarks"] if b["kind"] == "allreduce"]
yaml.safe_dump(data, open("/tmp/allreduce-one-gpu.yaml", "w"), sort_keys=False)
PY
echo "kit ${KIT_COMMIT:-$(git rev-parse HEAD 2>/dev/null)}" | tee "$OUT/summary.txt"
for sig in ${SIGS:-TERM INT HUP}; do
  name=seal-$sig-$(date +%H%M%S%N); out=/tmp/bundles/$name
  log=$OUT/run-$sig.log
  # a background job of a script starts with SIGINT ignored: the driver gets it back first
  setsid python3 -c 'import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execvp(sys.argv[1], sys.argv[1:])' \
      python3 -m kit reproduce "$recipe" --device cuda --runtime docker --env ngc-pytorch \
      --base-image kit-host-stack:local --out "$out" > "$log" 2>&1 &
  pid=$!
  t0=$(date +%s)
  until grep -q '^\[2/2\].* ok ' "$log" || ! kill -0 $pid 2>/dev/null; do sleep 0.05; done
  kill -$sig $pid 2>/dev/null
  wait $pid; code=$?
  sleep 3
  left=$(python3 -c "import docker; print(len(docker.from_env().containers.list(all=True, filters={'label': 'kit.owner'})))")
  status=$(python3 -c "import json; print(json.load(open('$out/results.json'))['status'])" 2>&1)
  python3 -m kit verify "$out" >> "$OUT/verify.log" 2>&1; verified=$?
  echo "SIG$sig exit=$code status=$status verify_exit=$verified containers_left=$left seconds=$(( $(date +%s) - t0 ))" | tee -a "$OUT/summary.txt"
  tar -czf "$OUT/$name.tar.gz" -C /tmp/bundles "$name"
done
