#!/bin/bash
# Run 9: rwsem (with its throughput test, each read unlock counting by one RMW beside the lock word) against rwsem-fixed,
# std and parking_lot in rwsem-rate, three runs a point, two alternating passes.
B=$PWD/.dev/klock
R=/tmp/r9; mkdir -p $R
{ echo "klock rev $(cat .dev/REV)"; nproc; uptime; } > $R/uptime.txt
for pass in 1 2; do
timeout 200 $B bench rwsem-rate --locks rwsem,rwsem-fixed,rwsem-nospin,std-rwlock,parking_lot-rwlock --threads 2,4,8,16,32 --duration 300ms --runs 3 \
  --json $R/16core-rwsem-test-p$pass.json --plot $R/16core-rwsem-test-p$pass.svg > $R/16core-rwsem-test-p$pass.txt 2>&1; echo rc=$?
awk '/^Locking rate, kop/{p=1} /^$/{p=0} p; /^Events of rwsem \(/{q=1} q&&/^$/{q=0} q' $R/16core-rwsem-test-p$pass.txt | cut -c1-60
done
uptime >> $R/uptime.txt
tar czf $OUT/r9.tgz -C $R .
