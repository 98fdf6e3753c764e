#!/bin/bash
# Run 12: the preload on 16 CPUs: contended throughput against glibc (klock run --compare),
# the lock profile's cost (klock run with and without --stat, alternating), the uncontended pair,
# and an unmodified Python program.
# .dev holds: klock (stripped), libklock_preload.so, contend and uncontended
# (cc -O2 klock-preload/bench/{contend,uncontended}.c -lpthread), profile_test
# (cc -O1 -rdynamic klock-preload/tests/c/profile_test.c -lpthread), gil.py (this folder).
cd .dev
K="./klock run --preload $PWD/libklock_preload.so"
{ echo "klock rev $(cat REV)"; nproc; uptime; ldd --version | head -1; } 
for t in 4 16 64; do $K --compare 5 -- ./contend $t 1; done
echo "== profile cost: contend T 1, klock run without / with --stat, alternating, ops/s"
for t in 4 16; do for i in 1 2 3 4 5; do
  a=$($K -- ./contend $t 1); b=$($K --stat -- ./contend $t 1 2>/dev/null); echo "threads $t round $i plain $a stat $b"; done; done
echo "== uncontended pair, ns (glibc, klock, klock + KLOCK_STAT=1)"
./uncontended; LD_PRELOAD=$PWD/libklock_preload.so ./uncontended; KLOCK_STAT=1 LD_PRELOAD=$PWD/libklock_preload.so ./uncontended 2>/dev/null
echo "== profile of profile_test 200000"
$K --stat -- ./profile_test 200000
echo "== python"
PY=$(command -v python3); echo "$PY"; ldd "$(readlink -f $PY)" | head -3
$K --compare 3 -- python3 gil.py 300000
$K --stat -- python3 gil.py 300000
uptime
