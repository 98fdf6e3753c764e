#!/bin/bash
# Run 17b: on the same warm machine right after run 17, the suites whose JSON did not come back
# from run 17 (spinlock, treelock, rwsem-rate, uncontended), packed in one archive. treelock was
# cut off by its time limit and wrote nothing.
D=$PWD/.dev; B=$D/klock; R=/tmp/r17b; rm -rf $R; mkdir -p $R
{ echo "klock rev $(cat $D/REV)"; uname -r; ldd --version | head -1; nproc; uptime; } > $R/machine.txt; lscpu > $R/lscpu.txt
timeout 150 $B bench spinlock treelock --threads 1,2,4,8,16,32 --duration 300ms --runs 2 --json $R/16core-v17b.json --plot $R/16core-v17b.svg > $R/16core-v17b-a.txt 2>&1; echo a rc=$?
timeout 60 $B bench rwsem-rate --threads 1,2,4,8,16,32 --duration 300ms --runs 2 --json $R/16core-v17b-rwsem-rate.json --plot $R/16core-v17b-rwsem-rate.svg > $R/16core-v17b-b.txt 2>&1; echo b rc=$?
timeout 40 $B bench uncontended --runs 3 --duration 300ms --json $R/16core-v17b-uncontended.json --plot $R/16core-v17b-uncontended.svg > $R/16core-v17b-uncontended.txt 2>&1; echo u rc=$?
uptime >> $R/machine.txt; tar czf $OUT/r17b.tgz -C $R .
