#!/bin/bash
# Session 5 (issues 4 and 9): the 1/2/16-thread mutex comparison with the
# ceiling line, in the "far" placement of the 2-vCPU host (cache-line round
# trip > 250 ns; see 2core-session4-far.sh). Polls with a tiny bench run
# for at most 10 minutes. Run from the repository root, release build.
set -e
K=${K:-target/release/klock}
OUT=${OUT:-bench/results/2core-mutex-ceiling-far-v4}
for i in $(seq 300); do
  "$K" bench mutex --threads 1 --locks std-mutex --runs 1 --duration 50ms --warmup 10ms \
      --json /tmp/klock-probe.json >/dev/null 2>&1
  ns=$(python3 -c "import json; r=json.load(open('/tmp/klock-probe.json'))['results'][0]['xfer_ns_runs'][0]; print(int(min(r)))")
  if [ "$ns" -gt 250 ]; then
    echo "far placement: $ns ns round trip; running" >&2
    "$K" bench mutex --threads 1,2,16 \
        --locks mutex,mutex-fixed,mutex-nospin,std-mutex,parking_lot,pthread-adaptive \
        --runs 6 --duration 1s --json "$OUT.json" --plot "$OUT.svg" > "$OUT.txt"
    exit 0
  fi
  sleep 1
done
echo "the host stayed near for 10 minutes" >&2
exit 1
