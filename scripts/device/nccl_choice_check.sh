#!/usr/bin/env bash
# On 2 GPUs (nvidia-h200-x2): NCCL's per-size algorithm/protocol as the collective sweeps now
# record it (kit/worker/nccl_tuning.py), straight through torchrun and the worker, no driver.
#  1. all-reduce, all-gather, reduce-scatter, all-to-all, 8 B to 1 GiB, P2P on and
#     NCCL_P2P_DISABLE=1: every row's `nccl_calls` and the run's `nccl_choice` note.
#  2. all-reduce with the log on and off (log_nccl_choice false), alternated 3 times: the busbw
#     per size must not differ beyond run-to-run noise (the log is outside the timed window).
#  3. the transports NCCL logged on stdout are still there (the lines copied back).
#  4. all-gather and reduce-scatter: the in-place form timed after the out-of-place one
#     (#wrong 0 in both), all-reduce labelled in-place.
# Needs only torch (the machine's own); about 3 minutes on 2x H200.
# usage (device tool, kind nvidia-h200-x2): command: bash scripts/device/nccl_choice_check.sh
# on a machine without a GPU (checks the script; gloo: "not logged"):
#   CHOICE_DEVICE=cpu MAX_BYTES=65536 PYTHON=.venv/bin/python OUT=/tmp/choice bash scripts/device/nccl_choice_check.sh
# Back in $OUT: nccl_choice.log, nccl_choice_summary.json, runs.tar.gz (every result.json and log).
set -uo pipefail
: "${OUT:=/tmp/out}"
mkdir -p "$OUT"
PY=${PYTHON:-python3}
export PYTHONPATH="$PWD:${PYTHONPATH:-}" PYTHONUNBUFFERED=1 NCCL_DEBUG=INFO
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
NPROC=${NPROC:-2}
W=/tmp/nccl_choice && rm -rf "$W" && mkdir -p "$W"
nvidia-smi --query-gpu=name,driver_version --format=csv 2>&1 | tee "$OUT/nccl_choice.log"
"$PY" -c "import torch; print('torch', torch.__version__, 'nccl', torch.cuda.nccl.version())" \
  2>&1 | tee -a "$OUT/nccl_choice.log"

run() {  # run KIND VARIANT LOG(true|false) TAG
  local dir="$W/$4" p2p=""
  mkdir -p "$dir"
  [ "$2" = no-p2p ] && p2p="NCCL_P2P_DISABLE=1"
  "$PY" - "$dir/spec.json" "$1" "$2" "$3" "${CHOICE_DEVICE:-cuda}" "${MAX_BYTES:-1073741824}" <<'PY'
import json, sys
path, kind, variant, log, device, max_bytes = sys.argv[1:]
json.dump({"schema": 1, "run_id": f"{kind}.{variant}.r0", "benchmark": kind, "kind": kind,
           "variant": variant, "repeat": 0, "device": device, "nproc": 2, "smoke": False,
           "params": {"min_bytes": 8, "max_bytes": int(max_bytes), "factor": 4, "iters": 20,
                      "warmup_iters": 5, "trials": 3, "log_nccl_choice": log == "true"},
           "env": {}, "result_path": "result.json"}, open(path, "w"))
PY
  env $p2p timeout 300 "$PY" -m torch.distributed.run --standalone --nproc-per-node="$NPROC" \
    -m kit.worker "$dir/spec.json" >"$dir/log.txt" 2>&1
  echo "$4: exit $?" | tee -a "$OUT/nccl_choice.log"
}

for kind in allreduce all_gather reduce_scatter alltoall; do
  for v in p2p no-p2p; do run "$kind" "$v" true "$kind-$v"; done
done
for i in 1 2 3; do
  run allreduce p2p false "ab-off-$i"
  run allreduce p2p true "ab-on-$i"
done

"$PY" - "$W" <<'PY' 2>&1 | tee -a "$OUT/nccl_choice.log"
import json, statistics, sys
from pathlib import Path
from kit.shared.nccl_log import choice_words, parse_nccl_log
w = Path(sys.argv[1])
summary = {}
for d in sorted(w.iterdir()):
    res = d / "result.json"
    if not res.exists():
        print(f"{d.name}: no result.json; tail of log:")
        print("\n".join((d / "log.txt").read_text(errors="replace").splitlines()[-15:]))
        continue
    r = json.loads(res.read_text())
    data = r.get("data") or {}
    log = parse_nccl_log((d / "log.txt").read_text(errors="replace"))
    rows = data.get("sizes") or []
    summary[d.name] = {
        "status": r.get("status"), "nccl_choice": data.get("nccl_choice"),
        "transports": log["transports"], "version": log["version"],
        "sizes": {row["bytes"]: {"busbw": statistics.median(row["busbw_gbps"]),
                                 "timing": row.get("timing"),
                                 "nccl": [choice_words(c) for c in row.get("nccl_calls") or []],
                                 "raw": row.get("nccl_calls")} for row in rows},
    }
    if d.name.startswith("ab-"):
        continue
    print(f"\n== {d.name}: {r.get('status')}  NCCL {log['version']}  transports {log['transports']}")
    print(f"   nccl_choice: {data.get('nccl_choice')}")
    for row in rows:
        words = "; ".join(choice_words(c) for c in row.get("nccl_calls") or []) or "-"
        o = row.get("other")
        inplace = (f"  in-place {statistics.median(o['busbw_gbps']):8.2f} GB/s wrong {o['wrong']}"
                   if o else "")
        print(f"   {row['bytes']:>12} B  {row.get('placement', '?'):12s} "
              f"{statistics.median(row['busbw_gbps']):8.2f} GB/s  wrong {row['wrong']}  "
              f"{row.get('timing'):12s} {words}{inplace}")
print("\n== all-reduce busbw, log off against on (3 alternations each), median and range")
sizes = sorted({b for k, s in summary.items() if k.startswith("ab-") for b in s["sizes"]})
for b in sizes:
    off = [summary[f"ab-off-{i}"]["sizes"][b]["busbw"] for i in (1, 2, 3)
           if b in summary.get(f"ab-off-{i}", {}).get("sizes", {})]
    on = [summary[f"ab-on-{i}"]["sizes"][b]["busbw"] for i in (1, 2, 3)
          if b in summary.get(f"ab-on-{i}", {}).get("sizes", {})]
    if off and on:
        print(f"   {b:>12} B  off {statistics.median(off):8.2f} ({min(off):.2f}-{max(off):.2f})"
              f"  on {statistics.median(on):8.2f} ({min(on):.2f}-{max(on):.2f})"
              f"  on/off {statistics.median(on) / (statistics.median(off) or float('nan')):.3f}")
json.dump(summary, open(Path(sys.argv[1]) / "nccl_choice_summary.json", "w"), indent=1)
PY
cp "$W/nccl_choice_summary.json" "$OUT/" 2>/dev/null
tar -czf "$OUT/runs.tar.gz" -C /tmp nccl_choice 2>/dev/null
echo "done" | tee -a "$OUT/nccl_choice.log"
