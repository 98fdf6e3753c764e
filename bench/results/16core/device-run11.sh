#!/bin/bash
B=$PWD/.dev/klock
R=/tmp/r11; mkdir -p $R
{ echo "klock rev $(cat .dev/REV)"; nproc; uptime; } > $R/uptime.txt
for pass in 1 2; do for osq in 1 0; do
KLOCK_RWSEM_READER_OSQ=$osq timeout 100 $B bench rwsem-rate rwsem-pagefault --locks rwsem,rwsem-nospin,std-rwlock,parking_lot-rwlock --threads 2,4,8,16,32 --duration 300ms --runs 2 \
  --json $R/osq$osq-p$pass.json --plot $R/osq$osq-p$pass.svg > $R/osq$osq-p$pass.txt 2>&1; echo "== pass $pass reader_osq=$osq rc=$?"
awk '/^Locking rate, kop/{p=1} /^$/{p=0} p' $R/osq$osq-p$pass.txt
done; done
uptime >> $R/uptime.txt
tar czf $OUT/r11.tgz -C $R .
