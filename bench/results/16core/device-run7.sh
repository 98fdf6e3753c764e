#!/bin/bash
# Run 7: the verdict sweep at 1-32 threads (each suite ends with its "klock vs best peer" table),
# then the uncontended cost. Part A: spinlock, mutex, uncontended. Part B: rwlock, treelock,
# rwsem-rate, rwsem-pagefault. Usage: device-run7.sh a|b
B=$PWD/.dev/klock
R=/tmp/r7; mkdir -p $R
P=${1:-a}
{ echo "klock rev $(cat .dev/REV) part $P"; uname -r; ldd --version | head -1; nproc; uptime; } > $R/uptime-$P.txt
lscpu > $R/lscpu.txt
if [ "$P" = a ]; then
  timeout 280 $B bench spinlock mutex --threads 1,2,4,8,16,32 --duration 300ms --runs 2 \
    --json $R/16core-verdict.json --plot $R/16core-verdict.svg > $R/16core-verdict-a.txt 2>&1; echo rc=$?
  timeout 120 $B bench uncontended --runs 3 --duration 300ms \
    --json $R/16core-verdict-uncontended.json --plot $R/16core-verdict-uncontended.svg > $R/16core-verdict-uncontended.txt 2>&1; echo rc=$?
else
  timeout 450 $B bench rwlock treelock rwsem-rate rwsem-pagefault --threads 1,2,4,8,16,32 --duration 300ms --runs 2 \
    --json $R/16core-verdict.json --plot $R/16core-verdict.svg > $R/16core-verdict-b.txt 2>&1; echo rc=$?
fi
uptime >> $R/uptime-$P.txt
tail -40 $R/16core-verdict-$P.txt
tar czf $OUT/r7$P.tgz -C $R .
