#!/bin/bash
# Run 3: rwsem-pagefault and treelock (cut short in run 2), pi from the root cgroup.
B=$PWD/.dev/klock
R=/tmp/r3; mkdir -p $R
uptime > $R/uptime.txt
t0=$(date +%s)
run() { local name=$1; shift; local lim=$1; shift; echo "== $name (limit $lim s) at $(( $(date +%s) - t0 )) s"; timeout $lim "$@" > $R/$name.txt 2>&1; echo "rc=$? at $(( $(date +%s) - t0 )) s"; tail -3 $R/$name.txt; }
{ cat /proc/self/cgroup; echo $$ > /sys/fs/cgroup/cgroup.procs; echo moved=$?; cat /proc/self/cgroup; chrt -f 10 true; echo chrt=$?; } > $R/rtdiag.txt 2>&1; cat $R/rtdiag.txt
run 16core-pi 70 $B bench pi --json $R/16core-pi.json
run 16core-rwsem-pagefault 150 $B bench rwsem-pagefault --threads 1,2,4,8,16,32 --duration 500ms --runs 3 --json $R/16core-rwsem-pagefault.json
run 16core-treelock 230 $B bench treelock --threads 1,2,4,8,16 --json $R/16core-treelock.json
uptime >> $R/uptime.txt
tar czf $OUT/r3.tgz -C $R .
