#!/usr/bin/env bash
# Call c22 (issue 47): why call c21's one-shot decode hit "an illegal memory access". From the
# repository root on a 2-GPU machine, carry [".whl", ".device"]:
#   KIT_COMMIT=<40 hex> bash reports/measurements/2026-11-30-symm-allreduce/debug.sh
# 1. the microbenchmark's one-shot on a dist.new_group group (the kit's kind of group; c21's
#    microbenchmark used the default group and passed);
# 2. the kit's two-layer one-shot decode with CUDA_LAUNCH_BLOCKING=1, then without.
set -uo pipefail
: "${OUT:=/tmp/out}"
here=$(dirname "$0")
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
GROUP=new timeout 120 python3 -m torch.distributed.run --standalone --nproc-per-node 2 \
  "$here/allreduce_small.py" "$OUT/p2p-new-group.json" >"$OUT/p2p-new-group.log" 2>&1
echo "new-group rc=$?"; grep -h '^{' "$OUT/p2p-new-group.log" | cut -c1-200
python3 -c "import torch, importlib.util as u; print(torch.__version__, 'nvshmem' if u.find_spec('nvidia.nvshmem') else 'no nvshmem')" 2>&1
for blocking in 1 0; do
  CUDA_LAUNCH_BLOCKING=$blocking TORCH_SHOW_CPP_STACKTRACES=1 KIT_COMMIT=${KIT_COMMIT:-} \
    BUDGET_S=400 HARD_S=250 OUT=$OUT/blocking$blocking \
    bash reports/measurements/2026-11-28-pinned-evidence/call.sh c22-blocking$blocking \
    host=$here/debug_one_shot.yaml >"$OUT/c22-blocking$blocking.log" 2>&1
  echo "blocking=$blocking rc=$?"; grep -E '^\[1/|FAILED' "$OUT/c22-blocking$blocking.log"
done
