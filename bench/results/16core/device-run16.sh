#!/bin/bash
# Run 16: the preload reading the tid from glibc's thread descriptor (new) against the
# build of run 15 (old) and glibc: the uncontended pair, contend, gil.py; and the fork
# test under the new build, 10 times.
mkdir -p /tmp/r16; cd .dev
{ echo "new $(cat REV), old $(cat REV-OLD)"; nproc; uptime; ldd --version | head -1; } | tee /tmp/r16/machine.txt
N=$PWD/libklock_preload.so; O=$PWD/libklock_preload-old.so
echo "== uncontended pair (glibc, old, new), three times" | tee /tmp/r16/uncontended.txt
for i in 1 2 3; do ./uncontended; LD_PRELOAD=$O ./uncontended; LD_PRELOAD=$N ./uncontended; done 2>&1 | tee -a /tmp/r16/uncontended.txt
echo "== contend T 1 (ops/s), 3 rounds: glibc, old, new" | tee /tmp/r16/contend.txt
for t in 2 4 16 64; do for i in 1 2 3; do
  g=$(./contend $t 1); o=$(LD_PRELOAD=$O ./contend $t 1); n=$(LD_PRELOAD=$N ./contend $t 1)
  echo "threads $t round $i glibc ${g#* } old ${o#* } new ${n#* }"
done; done | tee -a /tmp/r16/contend.txt
echo "== python gil.py 300000 (s): glibc, old, new, 3 rounds" | tee /tmp/r16/python.txt
TIMEFORMAT=%R
for i in 1 2 3; do for p in "" $O $N; do
  t=$( { time LD_PRELOAD=$p python3 gil.py 300000 >/dev/null 2>&1; } 2>&1 )
  echo "round $i $(basename ${p:-glibc}) $t"; done; done | tee -a /tmp/r16/python.txt
echo "== fork_test under the new build, 10 runs (rc)" | tee /tmp/r16/fork.txt
for i in $(seq 1 10); do LD_PRELOAD=$N timeout 30 ./fork_test >/dev/null 2>&1; echo "run $i rc=$?"; done | tee -a /tmp/r16/fork.txt
uptime | tee -a /tmp/r16/machine.txt
tar czf $OUT/r16.tgz -C /tmp/r16 .
