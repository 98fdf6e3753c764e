#!/bin/bash
# Run 17: the verdict sweep at 1-32 threads with today's locks (spinlock, mutex, uncontended,
# then rwlock, treelock, rwsem-rate, rwsem-pagefault), then memcached on glibc's locks, on
# klock's (the preload) and on klock's with the profile, alternating. Writes straight into
# $OUT so that a run cut short still returns what it finished.
# .dev holds the stripped klock and libklock_preload.so of the commit in .dev/REV, memcached
# 1.6.18 with the two libraries it needs that the machine may lack (a wrapper sets
# LD_LIBRARY_PATH), and memcached_load built from klock-preload/bench/memcached_load.c.
D=$PWD/.dev
B=$D/klock
{ echo "klock rev $(cat $D/REV)"; uname -r; ldd --version | head -1; nproc; uptime; } > $OUT/machine.txt
lscpu > $OUT/lscpu.txt
timeout 230 $B bench spinlock mutex --threads 1,2,4,8,16,32 --duration 300ms --runs 2 \
  --json $OUT/16core-v17.json --plot $OUT/16core-v17.svg > $OUT/16core-v17-a.txt 2>&1; echo "a rc=$?"
timeout 60 $B bench uncontended --runs 3 --duration 300ms \
  --json $OUT/16core-v17-uncontended.json --plot $OUT/16core-v17-uncontended.svg > $OUT/16core-v17-uncontended.txt 2>&1; echo "u rc=$?"
uptime >> $OUT/machine.txt
timeout 300 $B bench rwlock treelock rwsem-rate rwsem-pagefault --threads 1,2,4,8,16,32 --duration 300ms --runs 2 \
  --json $OUT/16core-v17.json --plot $OUT/16core-v17.svg > $OUT/16core-v17-b.txt 2>&1; echo "b rc=$?"
uptime >> $OUT/machine.txt
# memcached.sh as in the repository: it wants the library under target/release, memcached on
# PATH and cc for its load generator (a stand-in copies the prebuilt one where cc is missing).
mkdir -p target/release /tmp/bin
cp $D/libklock_preload.so target/release/
ln -sf $D/memcached /tmp/bin/memcached
if ! command -v cc >/dev/null; then
  printf '#!/bin/sh\nwhile [ "$1" != -o ]; do shift; done\ncp %s "$2"\n' "$D/memcached_load" > /tmp/bin/cc
  chmod +x /tmp/bin/cc
fi
PATH=/tmp/bin:$PATH timeout 120 bash klock-preload/bench/memcached.sh 6 16 3 8 > $OUT/16core-v17-memcached.txt 2>&1; echo "m rc=$?"
uptime >> $OUT/machine.txt
tail -5 $OUT/16core-v17-memcached.txt
grep -A9 "klock vs best peer" $OUT/16core-v17-a.txt $OUT/16core-v17-b.txt | cut -c1-150
