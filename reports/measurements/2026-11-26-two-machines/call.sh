#!/usr/bin/env bash
# One device call of the two-machines study: the kit's pinned container path on a lent 2-GPU
# machine, its bundles and logs packed into ONE archive under $OUT (the device tool returns at
# most 8 files). Run from the repository root, carry [".whl", ".device", ".nccl-tests", ".xfer"]:
#
#   KIT_COMMIT=<sha> bash reports/measurements/2026-11-26-two-machines/call.sh NAME STEP...
#
# Steps, in the order given (scripts/device/containers.sh does the kit's part):
#   daemon              dockerd with CDI, the machine's stack imported as kit-host-stack:local
#   docker=RECIPE       kit reproduce RECIPE --runtime docker --env ngc-pytorch
#                       --base-image kit-host-stack:local (the recipe's own repeats)
#   rerun=ARCHIVE       kit reproduce BUNDLE of a bundle another machine made (a .tar.gz in .xfer/)
#   nccltests           all_reduce_perf -b 8 -e 8G -f 2 -w 5 -n 20 -c 1 (the recipe's sizes and
#                       counts), one process per GPU, P2P on then NCCL_P2P_DISABLE=1, 3 runs each;
#                       built there against torch's NCCL (with MPI where mpirun is Open MPI)
# The archive $OUT/NAME.tar.gz holds every bundle, every log and the nccl-tests outputs.
set -uo pipefail
name=$1; shift
: "${OUT:=/tmp/out}"
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=/tmp/two-machines/$name
mkdir -p "$WORK" "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
export KIT_COMMIT=${KIT_COMMIT:-}
log() { echo "[$(date -u +%H:%M:%S)] $*" | tee -a "$WORK/call.log"; }
containers() { OUT=$WORK bash scripts/device/containers.sh "$@"; }
log "call $name, kit commit ${KIT_COMMIT:-not stated}"
nvidia-smi --query-gpu=index,name,uuid,memory.total,driver_version,power.limit,pci.bus_id \
    --format=csv | tee -a "$WORK/call.log"
nvidia-smi topo -m >"$WORK/topo.txt" 2>&1

nccltests() {
  local nccl bin=/tmp/nccl-tests-build n mpi=0 mpi_home=""
  n=$(nvidia-smi -L | wc -l)
  nccl=$(python3 -c "import importlib.util as u; print(u.find_spec('nvidia.nccl').submodule_search_locations[0])")
  # one process per GPU where the machine has MPI, as the kit's torchrun; else one process, -g N
  if command -v mpirun >/dev/null && mpirun --version 2>&1 | grep -q "Open MPI"; then
    mpi=1; mpi_home=$(dirname "$(dirname "$(command -v mpirun)")")
    command -v mpicc >/dev/null && export CPATH="$(mpicc --showme:incdirs 2>/dev/null | tr ' ' ':'):${CPATH:-}"
  fi
  mkdir -p /tmp/nccl/lib && ln -sf "$nccl/lib/libnccl.so.2" /tmp/nccl/lib/libnccl.so
  ln -sfn "$nccl/include" /tmp/nccl/include
  local t0=$SECONDS
  build() {
    make -C .nccl-tests/src -j"$(nproc)" BUILDDIR=$bin CUDA_HOME=/usr/local/cuda NCCL_HOME=/tmp/nccl \
        MPI="$1" ${mpi_home:+MPI_HOME=$mpi_home} NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" \
        $bin/all_reduce_perf >>"$WORK/nccl-tests-build.log" 2>&1
  }
  if [ ! -x $bin/all_reduce_perf ]; then
    build $mpi || { rm -rf $bin; mpi=0; build 0; } || { log "nccl-tests build failed"; return 1; }
    log "nccl-tests $(cat .nccl-tests/COMMIT) built (MPI=$mpi) in $((SECONDS - t0)) s against $nccl"
  fi
  export LD_LIBRARY_PATH="$nccl/lib:/usr/local/nvidia/lib64:${LD_LIBRARY_PATH:-}"
  local launch="$bin/all_reduce_perf -g $n"
  [ $mpi = 1 ] && launch="mpirun --allow-run-as-root -np $n -x NCCL_P2P_DISABLE -x NCCL_NVLS_ENABLE \
-x LD_LIBRARY_PATH -x TORCH_SYMM_MEM_DISABLE_MULTICAST -x NVSHMEM_DISABLE_NVLS $bin/all_reduce_perf -g 1"
  mkdir -p "$WORK/nccl-tests"
  log "nccl-tests: $launch -b 8 -e 8G -f 2 -w 5 -n 20 -c 1"
  for rep in $(seq 1 "${NCCL_REPS:-3}"); do
    for p2p in 0 1; do
      local out="$WORK/nccl-tests/all_reduce_perf-p2p$([ $p2p = 1 ] && echo -off || echo -on)-$rep.txt"
      export NCCL_P2P_DISABLE=$p2p
      timeout 120 $launch -b 8 -e 8G -f 2 -w 5 -n 20 -c 1 >"$out" 2>&1
      log "all_reduce_perf P2P_DISABLE=$p2p run $rep: exit $?, $(grep -m1 'Avg bus bandwidth' "$out")"
    done
  done
  unset NCCL_P2P_DISABLE
}

for step in "$@"; do
  case $step in
    daemon) containers daemon ;;
    docker=*) PACK=0 containers recipe="${step#docker=}" docker ;;
    rerun=*) PACK=0 containers rerun "${step#rerun=}" ;;
    nccltests) nccltests ;;
    *) log "unknown step $step"; exit 2 ;;
  esac
done
# this call's bundles move into the archive (a warm machine's next call starts without them)
log "bundles: $(ls /tmp/bundles 2>/dev/null | tr '\n' ' ')"
mkdir -p "$WORK/bundles" && mv /tmp/bundles/* "$WORK/bundles/" 2>/dev/null
tar -czf "$OUT/$name.tar.gz" -C /tmp/two-machines "$name"
ls -la "$OUT"
log "done"
