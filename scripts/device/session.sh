#!/usr/bin/env bash
# Run kit recipes on a lent GPU machine (no Docker, no package index there): the host runtime,
# the machine's own torch, and the driver's missing pure-Python wheels carried in .whl/.
# Usage: bash scripts/device/session.sh RECIPE [kit reproduce options...]
# Bundles are packed into $OUT/bundles.tar.gz (the device tool returns at most 2 folder levels).
set -uo pipefail
: "${OUT:=/tmp/out}"
mkdir -p "$OUT"
if [ -d .whl ] && [ ! -d /tmp/site ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
fi
export PYTHONPATH="/tmp/site:$PWD:${PYTHONPATH:-}"
# NVLink multicast stays off on shared hosts (and in the kit's own launches: kit.runtime.base.SAFE_ENV)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
recipe=$1; shift
name=$(basename "$recipe" .yaml)
mkdir -p /tmp/bundles
python3 -m kit reproduce "$recipe" --out "/tmp/bundles/$name-$(nvidia-smi -L | wc -l)gpu" "$@" 2>&1 | tee -a "$OUT/session.log"
tar -czf "$OUT/bundles.tar.gz" -C /tmp bundles
