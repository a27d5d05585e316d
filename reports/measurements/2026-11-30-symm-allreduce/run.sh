#!/usr/bin/env bash
# The device call of this study: the all-reduce microbenchmark with P2P, then NCCL alone without.
# From the repository root, no carry (the machine's own torch):
#   bash reports/measurements/2026-11-30-symm-allreduce/run.sh
set -uo pipefail
: "${OUT:=/tmp/out}"
here=$(dirname "$0")
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=index,name,uuid,driver_version --format=csv >"$OUT/gpus.csv" 2>&1
nvidia-smi topo -m >"$OUT/topo.txt" 2>&1
n=$(nvidia-smi -L | wc -l)
timeout 200 python3 -m torch.distributed.run --standalone --nproc-per-node "$n" \
  "$here/allreduce_small.py" "$OUT/p2p.json" >"$OUT/p2p.log" 2>&1
echo "p2p rc=$?"
NCCL_P2P_DISABLE=1 timeout 200 python3 -m torch.distributed.run --standalone --nproc-per-node "$n" \
  "$here/allreduce_small.py" "$OUT/no-p2p.json" >"$OUT/no-p2p.log" 2>&1
echo "no-p2p rc=$?"
grep -h '^{' "$OUT/p2p.log" "$OUT/no-p2p.log"
