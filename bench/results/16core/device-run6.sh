#!/bin/bash
# Run 6: does owner spinning win on 16 CPUs when the critical section is longer (2 us busy work, 2 us outside)?
B=$PWD/.dev/klock
R=/tmp/r6; mkdir -p $R
echo "klock rev $(cat .dev/REV)" > $R/uptime.txt; uptime >> $R/uptime.txt
timeout 80 $B bench mutex --cs-ns 2000 --outside-ns 2000 --threads 4,16,64 --locks mutex,mutex-nospin,parking_lot,std-mutex,pthread-adaptive --duration 500ms --runs 3 --json $R/16core-mutex-2us.json > $R/16core-mutex-2us.txt 2>&1; echo rc=$?
uptime >> $R/uptime.txt
tar czf $OUT/r6.tgz -C $R .
