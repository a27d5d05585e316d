set -uo pipefail
: "${OUT:=/tmp/out}"; W=/tmp/a2a16c; rm -rf $W; mkdir -p $W $OUT
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
if [ ! -x /tmp/a2a16/multi/nccl-tests-build/alltoall_perf ]; then
  WORK=/tmp/a2a16/multi PROGRAMS=alltoall NT_REPEATS=0 bash scripts/device/multi_gpu.sh refs >$W/build.log 2>&1; fi
b=/tmp/a2a16/multi/nccl-tests-build/alltoall_perf
nccl=$(python3 -c "import importlib.util as u; print(u.find_spec('nvidia.nccl').submodule_search_locations[0])")
export LD_LIBRARY_PATH="$nccl/lib:/usr/local/nvidia/lib64:${LD_LIBRARY_PATH:-}"
for i in $(seq 1 8); do for c in 0 1; do
  NCCL_CUMEM_ENABLE=$c NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT timeout 60 mpirun --allow-run-as-root -np 2 -x NCCL_CUMEM_ENABLE -x NCCL_DEBUG -x NCCL_DEBUG_SUBSYS -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH $b -g 1 -b 16M -e 16M -w 20 -n 100 -c 1 > $W/cumem$c-$i.txt 2>&1
  echo "start $i NCCL_CUMEM_ENABLE=$c: $(awk '/^ +16777216/{print $8}' $W/cumem$c-$i.txt | head -1) GB/s $(grep -m1 -o 'via P2P/[A-Z/]*' $W/cumem$c-$i.txt)" | tee -a $W/summary.txt
done; [ $SECONDS -gt 200 ] && break; done
cp $W/summary.txt $OUT/cumem-summary.txt; tar -czf $OUT/cumem.tar.gz -C /tmp a2a16c
