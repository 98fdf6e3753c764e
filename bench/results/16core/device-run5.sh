#!/bin/bash
# Run 5: the 2-core case, settled with 10 runs: mutex vs mutex-nospin vs parking_lot at 16 threads on 2 CPUs.
B=$PWD/.dev/klock
R=/tmp/r5; mkdir -p $R
echo "klock rev $(cat .dev/REV)" > $R/uptime.txt; uptime >> $R/uptime.txt
timeout 100 taskset -c 0,1 $B bench mutex --threads 16 --locks mutex,mutex-nospin,parking_lot,pthread-adaptive --duration 1s --runs 10 --json $R/16core-pinned2-mutex-16t.json > $R/16core-pinned2-mutex-16t.txt 2>&1; echo rc=$?
uptime >> $R/uptime.txt
tar czf $OUT/r5.tgz -C $R .
