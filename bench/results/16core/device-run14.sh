#!/bin/bash
# Run 14: the sleeping locks before and after their shared owner-spin loop and park path
# (old and new binary alternating twice), and the preload's compact mutex with owner
# spinning on and off (KLOCK_OWNER_SPIN=0) against glibc under an unmodified program.
mkdir -p /tmp/r14; cd .dev
{ echo "new $(cat REV), old $(cat REV-OLD)"; nproc; uptime; ldd --version | head -1; } | tee /tmp/r14/machine.txt
for pass in 1 2; do for b in old new; do
  B=./klock; [ $b = old ] && B=./klock-old
  for s in "mutex mutex,mutex-fixed,mutex-nospin,std-mutex,parking_lot,pthread-spin" "rwsem-rate rwsem,std-rwlock,parking_lot-rwlock,pthread-rwlock" "pi-throughput rtmutex,pthread-pi"; do
    set -- $s
    timeout 100 $B bench $1 --locks $2 --threads 2,4,8,16,32 --duration 300ms --runs 2 --json /tmp/r14/$b-p$pass-$1.json > /tmp/r14/$b-p$pass-$1.txt 2>&1
    echo "$b pass $pass $1 rc=$?"
    awk '/^klock vs best peer/{p=1} p{print} /geomean/{p=0}' /tmp/r14/$b-p$pass-$1.txt | grep -E "^ +[0-9]|geomean"
  done
done; done
echo "== preload: contend T 1 (ops/s), 3 rounds: glibc, klock, klock with KLOCK_OWNER_SPIN=0"
for t in 4 16 64; do for i in 1 2 3; do
  g=$(./contend $t 1); k=$(LD_PRELOAD=$PWD/libklock_preload.so ./contend $t 1); n=$(KLOCK_OWNER_SPIN=0 LD_PRELOAD=$PWD/libklock_preload.so ./contend $t 1)
  echo "threads $t round $i glibc $g klock $k klock-nospin $n"
done; done | tee /tmp/r14/preload-spin.txt
uptime | tee -a /tmp/r14/machine.txt
tar czf $OUT/r14.tgz -C /tmp/r14 .
