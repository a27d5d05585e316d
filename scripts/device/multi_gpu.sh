#!/usr/bin/env bash
# On a lent machine of several GPUs (nvidia-h200-x2, -x4): the kit's collectives against
# nccl-tests' *_perf programs built there, in one call, P2P on and off.
#
#   here, once:  bash scripts/device/prepare.sh            # .whl/ (and .device/ for containers)
#                NCCL_TESTS_GIT=DIR bash scripts/device/multi_gpu.sh prepare   # .nccl-tests/
#   device run, carry [".whl", ".nccl-tests"]:
#                bash scripts/device/multi_gpu.sh refs collectives pack
#
# Stages, in the order given:
#   prepare      (here) export nccl-tests' source from a clone or fetched snapshot into
#                .nccl-tests/ (ignored by git, never committed; COMMIT names the commit)
#   refs         build all_reduce_perf, all_gather_perf, reduce_scatter_perf, alltoall_perf
#                against the NCCL that torch loads (its wheel's headers and library), with MPI
#                when the machine has mpirun (one process per GPU, as the kit's torchrun), else
#                one process driving every GPU (-g N; the log says which); run each with
#                -b 8 -e 1G -f 2 -w 20 -n 100 -c 1 (the counts of recipes/collectives.yaml),
#                P2P on, then NCCL_P2P_DISABLE=1 (PROGRAMS="all_reduce ..." picks fewer), NT_REPEATS times (default 3) so that one noisy
#                run is not the reference: nccl-tests/<program>_perf-<variant>-r<k>.txt
#   collectives  kit reproduce recipes/collectives.yaml (or RECIPE) --runtime host (REPEATS, default 1;
#                RUNTIME=docker: in the kit's container, after `containers.sh daemon`; ONLY=a,b:
#                the recipe cut to those benchmarks, with PROGRAMS naming their nccl-tests),
#                `kit refs nccl-tests` takes every refs output into the bundle (the report's
#                per-size ratio column), then scripts/device/collectives_check.py reads it
#
# Time budget (device time of one call, from the per-size times nccl-tests recorded on 2x H200,
# reports/measurements/2026-11-21-h200x2: one all-reduce call at every size from 8 B to 1 GiB sums
# to 7 ms with P2P, 77 ms without; all-gather, reduce-scatter and all-to-all move half the bytes
# per busbw, so the four programs ~2.5x all-reduce; the start-ups are guesses):
#   build                      ~1-2 min (4 programs, sm_90 only)
#   nccl-tests, per repeat     ~50 s of collectives (20 + 2 x 101 calls a size) + ~3 s start-up
#                              x 8 = ~75 s; NT_REPEATS=3: ~4 min
#   kit, one repeat            ~70 s of collectives (326 calls a size: check, NCCL's choice,
#                              20 warm-up, 3 x 100 timed, 3 latency) + 8 launches x ~10-15 s
#                              + the report: ~3 min
# About 8-9 min: under the 10-minute limit of one call, with little room. Each stage and run
# logs its seconds; NT_REPEATS=2 saves ~75 s.
set -uo pipefail
: "${OUT:=/tmp/out}"
WORK=${WORK:-/tmp/kit-multi}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
mkdir -p "$OUT" "$WORK/nccl-tests" "$WORK/bundles"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
log() { echo "[$(date -u +%H:%M:%S)] $*" | tee -a "$WORK/multi_gpu.log"; }
wheels() {
  if [ -d .whl ] && [ ! -d /tmp/site ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl
  fi
  export PYTHONPATH="/tmp/site:$ROOT:${PYTHONPATH:-}"
}
gpus() { nvidia-smi -L 2>/dev/null | wc -l; }
# nccl-tests runs on the GPUs the kit's recipe runs on (its `gpus`, the first ones of the
# machine), never on more: `kit refs nccl-tests` refuses outputs of another GPU count
recipe_gpus() {
  python3 -c "import sys, yaml; print(yaml.safe_load(open(sys.argv[1])).get('gpus', 2))" \
      "${RECIPE:-recipes/collectives.yaml}"
}
PROGRAMS=${PROGRAMS:-"all_reduce all_gather reduce_scatter alltoall"}
# nccl-tests' counts: the same warm-up and iterations as recipes/collectives.yaml
NT_ARGS=${NT_ARGS:-"-b 8 -e 1G -f 2 -w 20 -n 100 -c 1"}
[ "${KIT_DEVICE:-cuda}" = cpu ] && NT_ARGS="-b 8 -e 64K -f 4 -w 2 -n 5 -c 1"

stage_prepare() {
  local git_dir=${NCCL_TESTS_GIT:?NCCL_TESTS_GIT=DIR: a clone or fetched snapshot of github.com/NVIDIA/nccl-tests}
  rm -rf .nccl-tests && mkdir -p .nccl-tests
  git --git-dir="$git_dir" archive HEAD | tar -x -C .nccl-tests --exclude=doc
  git --git-dir="$git_dir" rev-parse HEAD >.nccl-tests/COMMIT
  du -sh .nccl-tests
}

stage_refs() {
  local build=$WORK/nccl-tests-build n t0=$SECONDS
  n=$(recipe_gpus)
  [ "$n" -le "$(gpus)" ] || { log "the recipe asks for $n GPUs; this machine has $(gpus)"; return 1; }
  export CUDA_VISIBLE_DEVICES=$(seq -s, 0 $((n - 1)))
  # the NCCL torch loads: its wheel's headers and library (a libnccl.so link for the linker)
  local nccl
  nccl=$(python3 -c "import importlib.util as u; print(u.find_spec('nvidia.nccl').submodule_search_locations[0])")
  mkdir -p "$WORK/nccl/lib"
  ln -sf "$nccl"/lib/libnccl.so.2 "$WORK/nccl/lib/libnccl.so"
  ln -sfn "$nccl/include" "$WORK/nccl/include"
  local mpi=0 launch
  if command -v mpirun >/dev/null; then
    mpi=1
    local mpi_home
    mpi_home=$(dirname "$(dirname "$(command -v mpirun)")")
    # Debian-style layouts keep mpi.h under include/<arch>/<mpi>: ask the compiler wrapper
    command -v mpicc >/dev/null && export CPATH="$(mpicc --showme:incdirs 2>/dev/null | tr ' ' ':'):${CPATH:-}"
  fi
  log "nccl-tests $(cat .nccl-tests/COMMIT) against $nccl ($(python3 -c 'import torch; print(torch.cuda.nccl.version())')), mpirun: $(command -v mpirun || echo none), $n GPUs"
  build_tests() {  # MPI=0|1
    make -C .nccl-tests/src -j"$(nproc)" BUILDDIR="$build" CUDA_HOME=/usr/local/cuda \
        NCCL_HOME="$WORK/nccl" MPI="$1" ${mpi_home:+MPI_HOME=$mpi_home} \
        NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" \
        $(for p in $PROGRAMS; do echo "$build/${p}_perf"; done) >>"$WORK/nccl-tests-build.log" 2>&1
  }
  if [ ! -x "$build/alltoall_perf" ]; then
    if ! build_tests $mpi; then
      log "nccl-tests build with MPI=$mpi failed: tail of the log"
      tail -8 "$WORK/nccl-tests-build.log" | tee -a "$WORK/multi_gpu.log"
      [ $mpi = 1 ] || return 1
      mpi=0; rm -rf "$build"
      build_tests 0 || { log "nccl-tests build failed"; return 1; }
    fi
    log "nccl-tests built (MPI=$mpi) in $((SECONDS - t0)) s"
  fi
  echo $mpi >"$WORK/nccl-tests-mpi"
  export LD_LIBRARY_PATH="$nccl/lib:/usr/local/nvidia/lib64:${LD_LIBRARY_PATH:-}"
  local k
  for k in $(seq 1 "${NT_REPEATS:-3}"); do
    for p in $PROGRAMS; do
      for variant in p2p no-p2p; do
        local p2p=0 t1=$SECONDS
        [ "$variant" = no-p2p ] && p2p=1
        if [ "$(cat "$WORK/nccl-tests-mpi")" = 1 ]; then
          # one process per GPU, as the kit's torchrun; Open MPI passes only the variables named
          launch="mpirun --allow-run-as-root -np $n -x NCCL_P2P_DISABLE -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH -x CUDA_VISIBLE_DEVICES -x TORCH_SYMM_MEM_DISABLE_MULTICAST -x NVSHMEM_DISABLE_NVLS $build/${p}_perf -g 1"
          mpirun --version 2>&1 | grep -q "Open MPI" || launch="mpirun -np $n $build/${p}_perf -g 1"
        else
          launch="env NCCL_P2P_DISABLE=$p2p $build/${p}_perf -g $n"
        fi
        local out=$WORK/nccl-tests/${p}_perf-$variant-r$k.txt
        log "$launch $NT_ARGS (repeat $k)"
        NCCL_P2P_DISABLE=$p2p timeout 300 $launch $NT_ARGS >"$out" 2>&1
        log "  exit $?, $((SECONDS - t1)) s: $(grep -m1 'Avg bus bandwidth' "$out")"
      done
    done
  done
  unset CUDA_VISIBLE_DEVICES
  log "refs: $((SECONDS - t0)) s"
}

stage_collectives() {
  wheels
  local recipe=${RECIPE:-recipes/collectives.yaml} suffix=""
  if [ -n "${ONLY:-}" ]; then  # the recipe cut to the benchmarks named (allreduce,all_gather)
    suffix=-${ONLY//,/+}
    python3 scripts/device/cut_recipe.py "$recipe" "$ONLY" "$WORK/collectives$suffix.yaml" || return 1
    recipe=$WORK/collectives$suffix.yaml
  fi
  local bundle=$WORK/bundles/$(basename "${RECIPE:-recipes/collectives.yaml}" .yaml)-$(recipe_gpus)gpu$suffix-${RUNTIME:-host} t0=$SECONDS
  rm -rf "$bundle"
  # RUNTIME=docker: the kit's container (scripts/device/containers.sh daemon started dockerd and
  # imported the machine's stack as the base image), nccl-tests still on the host: the same NCCL
  local runtime=(--runtime "${RUNTIME:-host}")
  [ "${RUNTIME:-host}" = docker ] && runtime+=(--env ngc-pytorch --base-image "${BASE_IMAGE:-kit-host-stack:local}")
  log "kit reproduce $recipe ${runtime[*]} --repeats ${REPEATS:-1}"
  # KIT_DEVICE=cpu tries the stage on a machine without a GPU (smoke scale, gloo)
  local scale=--full
  [ "${KIT_DEVICE:-cuda}" = cpu ] && scale=--smoke
  # KIT_TIMEOUT_S=N: SIGTERM to the kit at N s, which seals what finished (0: no limit); a
  # `timeout` around this script would stop the script and leave the kit running
  timeout -s TERM "${KIT_TIMEOUT_S:-0}" \
    python3 -m kit reproduce "$recipe" --device "${KIT_DEVICE:-cuda}" $scale "${runtime[@]}" \
      --repeats "${REPEATS:-1}" --out "$bundle" >"$WORK/collectives$suffix.log" 2>&1
  log "  exit $?, $((SECONDS - t0)) s"
  tail -5 "$WORK/collectives$suffix.log" | tee -a "$WORK/multi_gpu.log"
  # nccl-tests' outputs of this call into the bundle, of the programs asked for (PROGRAMS): the
  # report's per-size ratio column
  local refs=() p
  for p in $PROGRAMS; do
    mapfile -t -O "${#refs[@]}" refs < <(ls "$WORK"/nccl-tests/"${p}"_perf-*-r*.txt 2>/dev/null)
  done
  if [ ${#refs[@]} -gt 0 ]; then
    python3 -m kit refs nccl-tests "$bundle" "${refs[@]}" >>"$WORK/collectives$suffix.log" 2>&1
    log "  kit refs nccl-tests (${#refs[@]} files) exit $?; kit verify: $(python3 -m kit verify "$bundle" 2>&1 | tail -1)"
  else
    log "  no nccl-tests output in $WORK/nccl-tests: run the refs stage first"
  fi
  python3 scripts/device/collectives_check.py "$bundle" \
      --out "$WORK/collectives_check$suffix.md" >/dev/null
  log "  collectives_check exit $?, $((SECONDS - t0)) s"
  grep -E '^(PASS|FAIL)' "$WORK/collectives_check$suffix.md" | tee -a "$WORK/multi_gpu.log"
}

stage_pack() {
  cp "$WORK"/collectives_check*.md "$OUT/" 2>/dev/null
  tar -czf "$OUT/multi_gpu.tar.gz" --exclude=nccl-tests-build --exclude=nccl \
      -C "$(dirname "$WORK")" "$(basename "$WORK")"
  ls -la "$OUT"
}

[ $# -gt 0 ] || { echo "usage: multi_gpu.sh prepare | refs collectives pack" >&2; exit 2; }
nvidia-smi --query-gpu=index,name,memory.total,driver_version,power.limit --format=csv \
    >>"$WORK/multi_gpu.log" 2>&1 || echo "no nvidia-smi here" >>"$WORK/multi_gpu.log"
while [ $# -gt 0 ]; do
  case $1 in
    prepare) stage_prepare ;;
    refs) stage_refs ;;
    collectives) stage_collectives ;;
    pack) stage_pack ;;
    *) echo "unknown stage $1" >&2; exit 2 ;;
  esac
  shift
done
