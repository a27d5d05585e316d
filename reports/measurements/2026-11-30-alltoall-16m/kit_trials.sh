# The kit's worker within one process: all-to-all 16 MiB, 10 trials (each 100 timed calls), 3 starts
set -uo pipefail
: "${OUT:=/tmp/out}"; W=/tmp/a2a16k; rm -rf $W; mkdir -p $W $OUT
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONPATH="/tmp/site:$PWD"
for i in 1 2 3; do
  mkdir -p $W/k$i; python3 -c "import json; s=json.load(open('/tmp/a2a16/spec.json')); s['params']['trials']=10; s['params']['log_nccl_choice']=False; json.dump(s, open('$W/k$i/spec.json','w'))"
  (cd $W/k$i && timeout 60 python3 -m torch.distributed.run --standalone --nproc-per-node=2 -m kit.worker spec.json > log.txt 2>&1)
  echo "start $i: $(python3 -c "import json; r=json.load(open('$W/k$i/result.json')); print(' '.join(f'{x:.1f}' for x in r['data']['sizes'][0]['busbw_gbps']))" 2>&1 | tail -1) GB/s" | tee -a $W/summary.txt
done
cp $W/summary.txt $OUT/kit-trials-summary.txt; tar -czf $OUT/kit-trials.tar.gz -C /tmp a2a16k
