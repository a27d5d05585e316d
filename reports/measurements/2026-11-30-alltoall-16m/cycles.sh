# Within one process: nccl-tests -N 5 (five timed cycles a start), 8 starts: is the state fixed per start?
set -uo pipefail
: "${OUT:=/tmp/out}"; W=/tmp/a2a16n; rm -rf $W; mkdir -p $W $OUT
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
b=/tmp/a2a16/multi/nccl-tests-build/alltoall_perf
nccl=$(python3 -c "import importlib.util as u; print(u.find_spec('nvidia.nccl').submodule_search_locations[0])")
export LD_LIBRARY_PATH="$nccl/lib:/usr/local/nvidia/lib64:${LD_LIBRARY_PATH:-}"
for i in $(seq 1 8); do
  timeout 60 mpirun --allow-run-as-root -np 2 -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH $b -g 1 -b 16M -e 16M -w 20 -n 100 -c 1 -N 5 > $W/n5-$i.txt 2>&1
  echo "start $i: $(awk '/^ +16777216/{printf "%s ", $8}' $W/n5-$i.txt) GB/s" | tee -a $W/summary.txt
  [ $SECONDS -gt 150 ] && break
done
cp $W/summary.txt $OUT/cycles-summary.txt; tar -czf $OUT/cycles.tar.gz -C /tmp a2a16n
