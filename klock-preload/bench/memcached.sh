#!/usr/bin/env bash
# memcached on glibc's locks, on klock's (the preload) and on klock's with
# the lock profile (KLOCK_STAT=1), alternating, under the same load from
# memcached_load.c (which checks that no increment was lost).
#
# Usage: klock-preload/bench/memcached.sh [ROUNDS] [CLIENT_THREADS] [SECONDS] [SERVER_THREADS]
#        (defaults 5 8 3 4), from the repository root after
#        `cargo build --release`. Needs memcached and cc.
# Prints each run's requests per second, the server's CPU time per
# operation (all its threads) and the machine's idle share during the
# load; then for the first two the medians and their ratios to glibc's,
# then the paired ratios: each round's klock run against the
# glibc run of the same round (the host's slow drifts cancel within a
# round; each round starts one place further in the order, lib.sh), their
# median, geometric mean with its 95% interval, and how many rounds were
# at or above 1; for the idle share the means and the paired
# differences.
set -euo pipefail

rounds=${1:-5}
clients=${2:-8}
secs=${3:-3}
workers=${4:-4}
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
bench_setup memcached.sh memcached
cc -O2 -o "$tmp/load" "$root/klock-preload/bench/memcached_load.c" -lpthread

# run NAME ENV...: one server under the given environment, one load run.
run() {
    local name=$1
    shift
    port=$((port + 1))
    env "$@" memcached -u root -l 127.0.0.1 -p "$port" -t "$workers" -c 4096 \
        2>"$tmp/$name.err" &
    echo $! >"$tmp/pid"
    for _ in $(seq 50); do
        (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
        sleep 0.05
    done
    local out idle
    load_start
    if ! out=$("$tmp/load" "$port" "$clients" "$secs"); then
        echo "memcached.sh: $name: $out" >&2
        echo "memcached.sh: the server said:" >&2
        cat "$tmp/$name.err" >&2
        exit 1
    fi
    local cpu
    idle=$(machine_idle "$name")
    cpu=$(server_cpu "$name" "$(echo "$out" | awk '{ print $2 }')")
    stop_server
    echo "$out" | awk -v n="$name" '{print n, $4}' >>"$tmp/results"
    printf '%-12s %s  %s us of server CPU an op  %s%% idle\n' "$name" "$out" "$cpu" "$idle"
}

echo "memcached $(memcached -V | cut -d' ' -f2), $workers worker threads; $clients client connections, $secs s a run; $(nproc) CPUs"
alternate "$rounds"
echo
summary req/s glibc glibc klock klock+stat
echo
summary "us of server CPU an op" glibc:cpu glibc:cpu klock:cpu klock+stat:cpu
echo
summary_diff "% of the machine idle" glibc:idle glibc:idle klock:idle klock+stat:idle
