#!/bin/bash
# Run 4: after the rtmutex userspace-wait change: pi-throughput (16 CPUs), pi (root cgroup),
# mutex pinned to 2 CPUs at 8/16/32 threads with more runs (the 2-CPU shape on a quiet machine).
B=$PWD/.dev/klock
R=/tmp/r4; mkdir -p $R
echo "klock rev $(cat .dev/REV)" > $R/uptime.txt; uptime >> $R/uptime.txt
echo $$ > /sys/fs/cgroup/cgroup.procs
t0=$(date +%s)
run() { local name=$1; shift; local lim=$1; shift; echo "== $name (limit $lim s) at $(( $(date +%s) - t0 )) s"; timeout $lim "$@" > $R/$name.txt 2>&1; echo "rc=$? at $(( $(date +%s) - t0 )) s"; }
run 16core-pi-throughput-v2 100 $B bench pi-throughput --threads 1,2,4,8,16 --duration 500ms --runs 3 --json $R/16core-pi-throughput-v2.json
run 16core-pinned2-pi-throughput-v2 60 taskset -c 0,1 $B bench pi-throughput --threads 2,8 --duration 500ms --runs 3 --json $R/16core-pinned2-pi-throughput-v2.json
run 16core-pi 70 $B bench pi --json $R/16core-pi.json
run 16core-pinned2-mutex-v2 150 taskset -c 0,1 $B bench mutex --threads 8,16,32 --locks mutex,mutex-bpf,mutex-nospin,std-mutex,parking_lot,pthread,pthread-adaptive --duration 1s --runs 5 --json $R/16core-pinned2-mutex-v2.json
uptime >> $R/uptime.txt
tar czf $OUT/r4.tgz -C $R .
