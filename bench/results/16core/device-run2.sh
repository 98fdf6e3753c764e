#!/bin/bash
# Run 2: rwsem group, rwlock, spinlock + uncontended, treelock (16 CPUs).
B=$PWD/.dev/klock
R=/tmp/r2; mkdir -p $R
uptime > $R/uptime.txt
t0=$(date +%s)
run() { local name=$1; shift; local lim=$1; shift; echo "== $name (limit $lim s) at $(( $(date +%s) - t0 )) s"; timeout $lim "$@" > $R/$name.txt 2>&1; echo "rc=$? at $(( $(date +%s) - t0 )) s"; tail -3 $R/$name.txt; }
run 16core-rwsem 200 $B bench rwsem --threads 1,2,4,8,16,32 --duration 500ms --runs 3 --json $R/16core-rwsem.json
run 16core-rwlock 60 $B bench rwlock --threads 1,2,4,8,16,32 --duration 500ms --runs 3 --json $R/16core-rwlock.json
run 16core-spinlock 110 $B bench spinlock --threads 1,2,4,8,16 --duration 500ms --runs 3 --json $R/16core-spinlock.json
run 16core-uncontended 40 $B bench uncontended --duration 500ms --runs 3 --json $R/16core-uncontended.json
run 16core-treelock 130 $B bench treelock --threads 1,2,4,8,16 --json $R/16core-treelock.json
uptime >> $R/uptime.txt
{ echo '-- rt diag'; cat /proc/self/cgroup; mount | grep cgroup; chrt -f 10 true; echo chrt=$?; ls /sys/fs/cgroup | head -40; cat /sys/fs/cgroup/cpu.rt_runtime_us 2>&1; grep -i rt_group /boot/config-$(uname -r) 2>&1; zcat /proc/config.gz 2>/dev/null | grep -i 'RT_GROUP\|SCHED_CLASS_EXT'; capsh --print 2>&1 | head -3; grep Cap /proc/self/status; ulimit -r; } > $R/rtdiag.txt 2>&1
cat $R/rtdiag.txt
ulimit -r unlimited 2>/dev/null; run 16core-pi 60 $B bench pi --json $R/16core-pi.json
tar czf $OUT/r2.tgz -C $R .
