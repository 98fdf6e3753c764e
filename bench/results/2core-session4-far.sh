#!/bin/bash
# Session 4 (issue 4): catch the 2-vCPU host in its "far" placement (the
# cache-line round trip between the two vCPUs ~375 ns instead of ~80 ns; the
# host flips between them every few seconds) and run the 16-thread mutex
# comparison there. Polls with a tiny bench run (its JSON records the round
# trip), for at most 5 minutes. Run from the repository root, release build.
set -e
K=${K:-target/release/klock}
OUT=${OUT:-bench/results/2core-mutex16far-v3}
for i in $(seq 150); do
  "$K" bench mutex --threads 1 --locks std-mutex --runs 1 --duration 50ms --warmup 10ms \
      --json /tmp/klock-probe.json >/dev/null 2>&1
  ns=$(python3 -c "import json; r=json.load(open('/tmp/klock-probe.json'))['results'][0]['xfer_ns_runs'][0]; print(int(min(r)))")
  if [ "$ns" -gt 250 ]; then
    echo "far placement: $ns ns round trip; running" >&2
    "$K" bench mutex --threads 16 --locks mutex,mutex-fixed,mutex-nospin,std-mutex,parking_lot,pthread-adaptive \
        --runs 6 --duration 1s --json "$OUT.json" --plot "$OUT.svg" > "$OUT.txt"
    exit 0
  fi
  sleep 1
done
echo "the host stayed near for 5 minutes" >&2
exit 1
