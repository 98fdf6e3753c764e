#!/bin/bash
# Run 8: the rwsem's spin/no-spin throughput test (rwsem) against the same lock without it
# (rwsem-fixed) and the peers, in rwsem-rate and rwsem-pagefault at 1-32 threads.
B=$PWD/.dev/klock
R=/tmp/r8; mkdir -p $R
{ echo "klock rev $(cat .dev/REV)"; nproc; uptime; } > $R/uptime.txt
timeout 400 $B bench rwsem-rate rwsem-pagefault --threads 1,2,4,8,16,32 --duration 300ms --runs 2 \
  --json $R/16core-rwsem-test.json --plot $R/16core-rwsem-test.svg > $R/16core-rwsem-test.txt 2>&1; echo rc=$?
uptime >> $R/uptime.txt
awk '/^== /{print} /^Locking rate, kop/{p=1} /^$/{p=0} p; /^klock vs best/{q=1} q; /geomean/{q=0}' $R/16core-rwsem-test.txt
tar czf $OUT/r8.tgz -C $R .
