#!/usr/bin/env bash
# The all-to-all at 16 MiB with P2P (2x H200): nccl-tests and the kit both bimodal per process
# start (about 153 and 162-166 GB/s busbw, calls c33/c34). Does the state follow an NCCL choice
# (channels, algorithm, protocol) made at start-up? Ten process starts of each tool, alternated,
# NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,TUNING, one size (16 MiB), the recipe's counts (20
# warm-up, 100 timed). Run from the repository root on a 2-GPU machine, carry [".whl", ".nccl-tests"]:
#   bash reports/measurements/2026-11-30-alltoall-16m/run.sh
# Back in $OUT: alltoall16m.tar.gz (every output), summary.txt (busbw and NCCL's lines a start).
set -uo pipefail
: "${OUT:=/tmp/out}"
W=/tmp/a2a16 && rm -rf "$W" && mkdir -p "$W" "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
# build nccl-tests (no runs)
WORK=$W/multi PROGRAMS=alltoall NT_REPEATS=0 bash scripts/device/multi_gpu.sh refs >"$W/build.log" 2>&1
build=$W/multi/nccl-tests-build
nccl=$(python3 -c "import importlib.util as u; print(u.find_spec('nvidia.nccl').submodule_search_locations[0])")
export LD_LIBRARY_PATH="${nccl:+$nccl/lib:}/usr/local/nvidia/lib64:${LD_LIBRARY_PATH:-}"
export PYTHONPATH="/tmp/site:$PWD:${PYTHONPATH:-}"
[ -d .whl ] && [ ! -d /tmp/site ] && python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
python3 - "$W/spec.json" <<'PY'
import json, sys
json.dump({"schema": 1, "run_id": "alltoall.p2p.r0", "benchmark": "alltoall", "kind": "alltoall",
           "variant": "p2p", "repeat": 0, "device": "cuda", "nproc": 2, "smoke": False,
           "params": {"min_bytes": 16777216, "max_bytes": 16777216, "factor": 2, "iters": 100,
                      "warmup_iters": 20, "trials": 3, "log_nccl_choice": True},
           "env": {}, "result_path": "result.json"}, open(sys.argv[1], "w"))
PY
for i in $(seq 1 10); do
  if [ "$(cat "$W/multi/nccl-tests-mpi" 2>/dev/null)" = 1 ]; then
    NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,TUNING timeout 120 mpirun --allow-run-as-root -np 2 \
      -x NCCL_DEBUG -x NCCL_DEBUG_SUBSYS -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH \
      "$build/alltoall_perf" -g 1 -b 16M -e 16M -w 20 -n 100 -c 1 >"$W/nt-$i.txt" 2>&1
  else
    NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,TUNING timeout 120 "$build/alltoall_perf" -g 2 \
      -b 16M -e 16M -w 20 -n 100 -c 1 >"$W/nt-$i.txt" 2>&1
  fi
  mkdir -p "$W/kit-$i" && cp "$W/spec.json" "$W/kit-$i/"
  (cd "$W/kit-$i" && NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,TUNING timeout 120 python3 -m torch.distributed.run \
     --standalone --nproc-per-node=2 -m kit.worker spec.json >log.txt 2>&1)
  echo "start $i: nccl-tests $(awk '/^ +16777216/{print $8}' "$W/nt-$i.txt" | head -1) GB/s;" \
       "kit $(python3 -c "import json,statistics,sys; r=json.load(open(sys.argv[1])); print(round(statistics.median(r['data']['sizes'][0]['busbw_gbps']),1))" "$W/kit-$i/result.json" 2>&1 | tail -1) GB/s" | tee -a "$W/summary.txt"
done
for f in "$W"/nt-*.txt "$W"/kit-*/log.txt; do
  echo "== $f"; grep -E "Channel|nChannels|Algo|Proto|Ring|Tree|P2P|via|threadThresholds|Tuning|Using network" "$f" | sort | uniq -c | sort -rn | head -25
done >>"$W/summary.txt" 2>&1
cp "$W/summary.txt" "$OUT/"; tar -czf "$OUT/alltoall16m.tar.gz" --exclude=a2a16/multi/nccl-tests-build -C /tmp a2a16
cat "$W/summary.txt" | head -60
