#!/bin/bash
# Run 13: the bench harness before and after its one-suite-interface rework (same lock code):
# the headline suites, old and new binaries alternating twice.
mkdir -p /tmp/r13; cd .dev
{ echo "new $(cat REV), old cb2e62b"; nproc; uptime; }
for pass in 1 2; do for b in old new; do
  B=./klock; [ $b = old ] && B=./klock-old
  timeout 140 $B bench mutex rwlock --threads 1,2,4,8,16 --duration 300ms --runs 2 --json /tmp/r13/$b-p$pass.json --plot /tmp/r13/$b-p$pass.svg > /tmp/r13/$b-p$pass.txt 2>&1; echo "$b pass $pass rc=$?"
  awk '/^== /{print} /^klock vs best peer/{p=1} p{print} /geomean/{p=0}' /tmp/r13/$b-p$pass.txt
done; done
uptime
tar czf $OUT/r13.tgz -C /tmp/r13 .
