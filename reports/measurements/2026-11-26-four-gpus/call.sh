#!/usr/bin/env bash
# The one device call of this study, on a lent 4-GPU machine, host runtime (the session had
# about 300 s of device time left: no room for the daemon and image import, 93 s on 2 GPUs).
# Carry [".whl", ".nccl-tests"]; run from the repository root:
#
#   KIT_COMMIT=<sha> bash reports/measurements/2026-11-26-four-gpus/call.sh [SECONDS]
#
# 1. the machine: nvidia-smi's GPUs and `nvidia-smi topo -m`, straight into $OUT
# 2. nccl-tests all_reduce_perf -b 8 -e 1G -f 2 -w 20 -n 100 -c 1, P2P on then off, once each
# 3. kit reproduce of this folder's allreduce_4gpu.yaml (same sizes and counts), host, 1 repeat,
#    then `kit refs nccl-tests` takes step 2's outputs in and collectives_check.py compares
# Steps 2-3 stop at SECONDS (default 230) so that the archive is always packed and returned.
set -uo pipefail
: "${OUT:=/tmp/out}"
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nvidia-smi --query-gpu=index,name,uuid,memory.total,driver_version,power.limit,pci.bus_id \
    --format=csv >"$OUT/machine.txt" 2>&1
nvidia-smi topo -m >>"$OUT/machine.txt" 2>&1
nvidia-smi nvlink -s >"$OUT/nvlink.txt" 2>&1
export WORK=/tmp/kit-multi
timeout --signal=TERM --kill-after=15 "${1:-230}" env PROGRAMS=all_reduce NT_REPEATS=1 \
    RECIPE="$HERE/allreduce_4gpu.yaml" bash scripts/device/multi_gpu.sh refs collectives
echo "steps exit $?" >>"$WORK/multi_gpu.log"
bash scripts/device/multi_gpu.sh pack
