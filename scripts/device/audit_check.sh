#!/usr/bin/env bash
# On ONE lent GPU (nvidia-h100-x1 or nvidia-h200): what issue 22 needs a GPU for.
#  1. NVML's total-energy counter, read by the worker at the timed window's edges, against
#     sampled power integrated over the same window: ResNet-50 (224 px, bf16, 256 images) with a
#     short window (30 steps, ~1.7 s: the window the committed bundles used) and a window of at
#     least 30 s (min_window_s), 3 repeats each, one variant.
#  2. The 30 s window rule: window length, steps run, the rule recorded in each result.
#  3. Whole-window against median-step throughput, and whether the GPU sat at its power cap
#     (then the report's headline is whole-window throughput).
# Runs the kit on the host runtime with the machine's own torch; the driver's missing wheels
# come in .whl (bash scripts/device/prepare.sh makes it). About 5 minutes on an H100.
# usage (device tool): carry [".whl"], command:
#   bash scripts/device/audit_check.sh
# on a machine without a GPU (checks the script, smoke scale, no counter):
#   AUDIT_DEVICE=cpu PYTHON=.venv/bin/python OUT=/tmp/audit bash scripts/device/audit_check.sh
# Back in $OUT: audit.log, audit_summary.json, bundles.tar.gz (render the report on the CPU
# machine: tar -xzf bundles.tar.gz; kit report bundles/audit-1gpu).
set -uo pipefail
: "${OUT:=/tmp/out}"
mkdir -p "$OUT"
if [ -d .whl ] && [ ! -d /tmp/site ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl
fi
export PYTHONPATH="/tmp/site:$PWD:${PYTHONPATH:-}"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
# AUDIT_DEVICE=cpu checks this script on a machine without a GPU (smoke scale, no counter)
device=${AUDIT_DEVICE:-cuda}
scale=--full
[ "$device" = cpu ] && scale=--smoke
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm,driver_version --format=csv 2>&1 | tee "$OUT/audit.log"
recipe=/tmp/audit.yaml
cat >"$recipe" <<'YAML'
kit: 1
name: audit-energy-window
description: >-
  ResNet-50 224 px bf16, 256 images per GPU, on one GPU: a 30-step window (~1.7 s) and a window
  of at least 30 s, to compare NVML's energy counter with sampled power and to time steady state.
gpus: 1
repeats: 3
timeout_s: 600
variants:
  - name: one-gpu
    description: "one GPU: no peer-to-peer traffic exists"
benchmarks:
  - kind: resnet_ddp
    name: resnet50-short
    params: {arch: resnet50, image_size: 224, batch_per_gpu: 256, precision: bf16,
             channels_last: true, warmup_steps: 5, steps: 30, min_window_s: 0}
    smoke: {image_size: 32, batch_per_gpu: 4, warmup_steps: 1, steps: 3}
  - kind: resnet_ddp
    name: resnet50-30s
    params: {arch: resnet50, image_size: 224, batch_per_gpu: 256, precision: bf16,
             channels_last: true, warmup_steps: 5, steps: 30, min_window_s: 30}
    smoke: {image_size: 32, batch_per_gpu: 4, warmup_steps: 1, steps: 3, min_window_s: 2}
YAML
rm -rf /tmp/bundles && mkdir -p /tmp/bundles
"${PYTHON:-python3}" -m kit reproduce "$recipe" --device "$device" "$scale" --runtime host \
  --out /tmp/bundles/audit-1gpu 2>&1 | tee -a "$OUT/audit.log"
"${PYTHON:-python3}" - <<'PY' 2>&1 | tee -a "$OUT/audit.log"
import json, os
from kit.report.facts.efficiency import energy_per_unit
from kit.report.facts.window import window_facts
b = "/tmp/bundles/audit-1gpu"
res = json.load(open(f"{b}/results.json"))
hw = json.load(open(f"{b}/hardware.json"))
rows = []
for r in res["runs"]:
    if r["status"] != "ok":
        rows.append({"benchmark": r["benchmark"], "status": r["status"], "error": r.get("error")})
        continue
    d, f = r["data"], window_facts(r, hw)
    c = d.get("energy_counter") or {}
    e = energy_per_unit(r, hw)
    row = {
        "benchmark": r["benchmark"], "repeat": r["repeat"],
        "window_s": round(d["window_s"], 2), "steps": d["steps"], "rule": d.get("window_rule"),
        "counter_j": c.get("energy_j"), "counter_complete": c.get("complete"),
        "counter_reasons": [g.get("reason") for g in c.get("gpus") or [] if g.get("reason")],
        "sampled_j": round(f.energy_j, 1) if f else None,
        "sampled_over_counter": round(f.energy_j / c["energy_j"], 3) if f and c.get("energy_j") else None,
        "energy_source": e.source if e else None, "j_per_image": e.j_per_unit if e else None,
        "throughput_median": round(d["throughput_median"], 1),
        "throughput_window": round(d["throughput_window"], 1),
        "window_over_median": round(d["throughput_window"] / d["throughput_median"], 4),
        "power_limited": f.power_limited if f else None,
        "swpowercap_share": (f.throttle_share or {}).get("SwPowerCap") if f else None,
    }
    rows.append(row)
    print(json.dumps(row))
json.dump(rows, open(os.path.join(os.environ.get("OUT", "/tmp/out"), "audit_summary.json"), "w"), indent=1)
ok = [x for x in rows if "counter_j" in x]
print("counter recorded in", sum(bool(x["counter_complete"]) for x in ok), "of", len(ok), "runs")
for name in ("resnet50-short", "resnet50-30s"):
    xs = [x["sampled_over_counter"] for x in ok if x["benchmark"] == name and x["sampled_over_counter"]]
    ws = [x["window_s"] for x in ok if x["benchmark"] == name]
    print(f"{name}: windows {ws} s, sampled/counter {xs}")
PY
tar -czf "$OUT/bundles.tar.gz" -C /tmp bundles
