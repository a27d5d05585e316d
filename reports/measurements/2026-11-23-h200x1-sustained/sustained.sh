#!/usr/bin/env bash
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm,temperature.gpu --format=csv > $OUT/gpu.txt
timeout 540 python3 -m kit reproduce .stage/sustained1.yaml --device cuda --runtime host --out /tmp/b/sustained > $OUT/kit.log 2>&1; echo "kit rc=$?" >> $OUT/kit.log
tail -8 $OUT/kit.log
python3 - <<'PY' | tee $OUT/summary.txt
import json
r = json.load(open("/tmp/b/sustained/results.json"))
for run in r["runs"]:
    m = run.get("metrics") or {}; d = run.get("data") or {}
    print(run["run_id"], run["status"], {k: round(v["value"], 4) for k, v in m.items() if isinstance(v, dict)}, "window_s", round(d.get("window_s") or 0, 1), run.get("error"))
PY
tar -czf $OUT/bundle.tgz -C /tmp/b sustained
