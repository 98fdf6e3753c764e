#!/bin/bash
# Catch the 2-vCPU host in its "far" placement (the
# cache-line round trip between the two vCPUs ~375 ns instead of ~80 ns; the
# host flips between them every few seconds) and run the mutex comparison
# there. Polls with a tiny bench run (its JSON records the round trip), once
# a second, TRIES times at most. Run from the repository root, release build.
# The defaults produce 2core-mutex16far-v3;
# 2core-mutex-ceiling-far-v4 was
#   OUT=bench/results/2core-mutex-ceiling-far-v4 THREADS=1,2,16 TRIES=300 \
#     bash bench/results/2core-wait-far.sh
set -e
K=${K:-target/release/klock}
OUT=${OUT:-bench/results/2core-mutex16far-v3}
THREADS=${THREADS:-16}
RUNS=${RUNS:-6}
TRIES=${TRIES:-150}
for i in $(seq "$TRIES"); do
  "$K" bench mutex --threads 1 --locks std-mutex --runs 1 --duration 50ms --warmup 10ms \
      --json /tmp/klock-probe.json >/dev/null 2>&1
  ns=$(python3 -c "import json; r=json.load(open('/tmp/klock-probe.json'))['results'][0]['xfer_ns_runs'][0]; print(int(min(r)))")
  if [ "$ns" -gt 250 ]; then
    echo "far placement: $ns ns round trip; running" >&2
    "$K" bench mutex --threads "$THREADS" --locks mutex,mutex-fixed,mutex-nospin,std-mutex,parking_lot,pthread-adaptive \
        --runs "$RUNS" --duration 1s --json "$OUT.json" --plot "$OUT.svg" > "$OUT.txt"
    exit 0
  fi
  sleep 1
done
echo "the host stayed near for $TRIES tries" >&2
exit 1
