#!/bin/bash
cd /work/main
K=./target/release/klock
R=/tmp/fin
uptime > $R/uptime-start.txt
$K bench mutex --duration 1s --runs 3 --json $R/2core-oncpu-mutex.json > $R/2core-oncpu-mutex.txt 2>&1
$K bench ctxswitch --duration 1s --runs 10 --json $R/2core-ctxswitch.json > $R/2core-ctxswitch.txt 2>&1
$K bench mutex --cs-ns 2000 --outside-ns 2000 --threads 2,4,8,16,32 --locks mutex,mutex-bpf,mutex-nospin,std-mutex,parking_lot,pthread-adaptive --duration 1s --runs 3 --json $R/2core-oncpu-mutex-2us.json > $R/2core-oncpu-mutex-2us.txt 2>&1
$K bench rwsem --duration 1s --runs 3 --json $R/2core-rwsem-v2.json > $R/2core-rwsem-v2.txt 2>&1
for b in max 1000000 125000; do
  KLOCK_RWSEM_READER_WAIT_NS=$b $K bench rwsem-dedicated rwsem-rate --locks rwsem-nospin,rwsem,std-rwlock --threads 16 --duration 1s --runs 2 --json $R/bound-$b.json > $R/bound-$b.txt 2>&1
  KLOCK_RWSEM_READER_WAIT_NS=$b $K bench treelock --locks rwsem,std-rwlock --threads 2,16 --duration 500ms --runs 2 --json $R/bound-tree-$b.json > $R/bound-tree-$b.txt 2>&1
done
$K bench treelock --json $R/2core-treelock-v2.json > $R/2core-treelock-v2.txt 2>&1
uptime > $R/uptime-end.txt
echo done > $R/DONE
