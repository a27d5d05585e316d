#!/bin/bash
# One `kit reproduce` of the CPU all-reduce smoke with SIGNAL sent inside the field NAME's
# __set_name__; prints NAME SIGNAL rc=CODE lines=N LAST-LINE. Run from the checkout:
#   HERE=reports/measurements/2026-11-29-test-durations/signal-in-set-name
#   SIG_LOG=/tmp/fields.txt PYTHONPATH=$HERE .venv/bin/python -m kit reproduce ...   # the points
#   (for s in 15 2; do sed "s/$/ $s/" names.txt; done) | xargs -P 2 -n 2 $HERE/sweep.sh
name=$1; sig=$2; here=$(cd "$(dirname "$0")" && pwd); root=$(cd "$here/../../../.." && pwd)
d=$(mktemp -d)
err=$(cd "$d" && SIG_AT=$name SIG_NUM=$sig KIT_PDF=0 TMPDIR=$d PYTHONPATH=$here:$root \
  timeout 300 "$root/.venv/bin/python" -m kit reproduce "$root/recipes/allreduce.yaml" \
  --device cpu --repeats 1 --smoke --runtime host --out "$d/out" 2>&1 >/dev/null)
rc=$?
echo "$name $sig rc=$rc lines=$(printf "%s" "$err" | grep -c .) $(printf "%s" "$err" | tail -1 | cut -c1-100)"
rm -rf "$d"
