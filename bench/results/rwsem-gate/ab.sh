#!/bin/bash
# rwsem readers woken one FUTEX_WAKE per grant (the lock's
# reader word) against one FUTEX_WAKE per reader (the commit before).
# Alternates the two binaries, one 1 s run per lock and thread count each
# time, and prints one line per binary and round: lock@threads=kop/s
# (smallest cache-line round trip of the run, ns; involuntary context
# switches). Runs with a round trip above 250 ns were in the far
# placement (see bench/results/README.md).
#   OLD=klock built at 6dd9da8, NEW=klock built at this commit.
set -e
OLD=${OLD:?path to the old klock} NEW=${NEW:?path to the new klock}
SUITE=${SUITE:-rwsem-pagefault} THREADS=${THREADS:-4,16,32} ROUNDS=${ROUNDS:-4}
for i in $(seq "$ROUNDS"); do
  for b in old new; do
    k=$OLD; [ $b = new ] && k=$NEW
    "$k" bench "$SUITE" --threads "$THREADS" --locks rwsem,rwsem-rspin,std-rwlock --runs 1 \
        --duration 1s --json /tmp/klock-ab.json --plot /tmp/klock-ab.svg >/dev/null 2>&1
    python3 -c "
import json; d = json.load(open('/tmp/klock-ab.json'))
print('$b', ' '.join('%s@%d=%d(%d ns, ic %d)' % (r['id'], r['threads'], int(r['kops_runs'][0]),
      int(min(r['xfer_ns_runs'][0])), r['ctx_involuntary']) for r in d['results']))"
  done
done
