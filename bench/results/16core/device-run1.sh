#!/bin/bash
# Run 1: machine facts, mutex (16 CPUs and pinned to 2), pi-throughput, pi, ctxswitch.
B=$PWD/.dev/klock
R=/tmp/r1; mkdir -p $R
export KLOCK_JSON_NOTE="device"
{ echo "klock rev $(cat .dev/REV)"; nproc; lscpu; uname -a; ldd --version | head -1; head -3 /proc/meminfo; ls -la /sys/kernel/btf/vmlinux; cat /proc/sys/kernel/sched_rt_runtime_us; uptime; } > $R/machine.txt 2>&1
cat $R/machine.txt | head -30
t0=$(date +%s)
run() { local name=$1; shift; local lim=$1; shift; echo "== $name (limit $lim s) at $(( $(date +%s) - t0 )) s"; timeout $lim "$@" > $R/$name.txt 2>&1; echo "rc=$? at $(( $(date +%s) - t0 )) s"; tail -3 $R/$name.txt; }
run 16core-mutex 170 $B bench mutex --threads 1,2,4,8,16,32,64 --duration 500ms --runs 3 --json $R/16core-mutex.json
run 16core-pinned2-mutex 130 taskset -c 0,1 $B bench mutex --threads 1,2,4,8,16,32 --duration 500ms --runs 3 --json $R/16core-pinned2-mutex.json
run 16core-pi-throughput 80 $B bench pi-throughput --threads 1,2,4,8,16 --duration 500ms --runs 3 --json $R/16core-pi-throughput.json
run 16core-ctxswitch 40 $B bench ctxswitch --duration 1s --runs 5 --json $R/16core-ctxswitch.json
run 16core-pi 60 $B bench pi --json $R/16core-pi.json
uptime >> $R/machine.txt
tar czf $OUT/r1.tgz -C $R .
ls -la $OUT
