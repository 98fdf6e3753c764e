#!/bin/bash
# Run 15: the preload's compact mutex with the WOKEN bit and its adaptive spin test (new)
# against the build before them (old), glibc, and the new build with the test off
# (KLOCK_SPIN_ADAPT=0: always spin) or spinning off (KLOCK_OWNER_SPIN=0), under an
# unmodified program; the uncontended pair; and the mutex suite with the compact mutex.
mkdir -p /tmp/r15; cd .dev
{ echo "new $(cat REV), old $(cat REV-OLD)"; nproc; uptime; ldd --version | head -1; } | tee /tmp/r15/machine.txt
N=$PWD/libklock_preload.so; O=$PWD/libklock_preload-old.so
echo "== contend T 1 (ops/s), 3 rounds each, alternating" | tee /tmp/r15/contend.txt
for t in 2 4 16 64; do for i in 1 2 3; do
  g=$(./contend $t 1); o=$(LD_PRELOAD=$O ./contend $t 1); n=$(LD_PRELOAD=$N ./contend $t 1)
  f=$(KLOCK_SPIN_ADAPT=0 LD_PRELOAD=$N ./contend $t 1); s=$(KLOCK_OWNER_SPIN=0 LD_PRELOAD=$N ./contend $t 1)
  echo "threads $t round $i glibc ${g#* } old ${o#* } new ${n#* } new-always-spin ${f#* } new-nospin ${s#* }"
done; done | tee -a /tmp/r15/contend.txt
echo "== uncontended pair (glibc, old, new), twice" | tee /tmp/r15/uncontended.txt
for i in 1 2; do ./uncontended; LD_PRELOAD=$O ./uncontended; LD_PRELOAD=$N ./uncontended; done 2>&1 | tee -a /tmp/r15/uncontended.txt
echo "== python gil.py 300000 (s): glibc, old, new, 3 rounds" | tee /tmp/r15/python.txt
TIMEFORMAT=%R
for i in 1 2 3; do for p in "" $O $N; do
  t=$( { time LD_PRELOAD=$p python3 gil.py 300000 >/dev/null 2>&1; } 2>&1 )
  echo "round $i ${p:-glibc} $t"; done; done | tee -a /tmp/r15/python.txt
timeout 120 ./klock bench mutex --locks mutex,mutex-compact,mutex-nospin,std-mutex,parking_lot,pthread,pthread-adaptive --threads 1,2,4,8,16,32 --duration 300ms --runs 2 --json /tmp/r15/mutex.json > /tmp/r15/mutex.txt 2>&1
awk '/^klock vs best peer/{p=1} p{print} /geomean/{p=0}' /tmp/r15/mutex.txt
sed -n 1,40p /tmp/r15/mutex.txt
uptime | tee -a /tmp/r15/machine.txt
tar czf $OUT/r15.tgz -C /tmp/r15 .
