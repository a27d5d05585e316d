#!/usr/bin/env bash
# One device call: plain torchvision DDP loops bracketing the kit's resnet recipe on 1 GPU.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $OUT/gpu.txt
plain() {
  for a in "--arch resnet50" "--arch resnet18 --image-size 32 --classes 10 --batch 64 --warmup 50 --steps 300"; do
    python3 -m torch.distributed.run --standalone --nproc-per-node 1 benchmarks/reference/plain_resnet_ddp.py $a 2>&1 | grep REFERENCE
  done
}
{ plain; plain; } >> $OUT/plain.txt
python3 -m kit reproduce .stage/resnet1.yaml --device cuda --runtime host --out /tmp/b/resnet1 > $OUT/kit.log 2>&1; echo "kit rc=$?" >> $OUT/kit.log
{ plain; } >> $OUT/plain.txt
cat $OUT/plain.txt | cut -c1-200
tail -5 $OUT/kit.log
python3 - <<'PY' | tee $OUT/summary.txt
import json
r = json.load(open("/tmp/b/resnet1/results.json"))
for run in r["runs"]:
    m = run.get("metrics") or {}
    print(run["run_id"], run["status"], {k: round(v["value"], 4) for k, v in m.items() if isinstance(v, dict)}, run.get("error"))
PY
tar -czf $OUT/bundle.tgz -C /tmp/b resnet1
