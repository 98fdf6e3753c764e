#!/usr/bin/env bash
# sysbench's lock tests (an unmodified C program that calls
# pthread_mutex_* itself) on glibc's locks and on klock's (the preload),
# alternating, at each thread count.
#
#   threads: each event locks one of --thread-locks mutexes, calls
#            sched_yield() while holding it, and unlocks, 1,000 times;
#            the figure is events in the run (more is better).
#   mutex:   each thread locks a random one of --mutex-num mutexes,
#            increments a shared counter, unlocks, then does
#            --mutex-loops iterations of busy work, --mutex-locks times;
#            the figure is the run's total time (less is better).
#
# Usage: klock-preload/bench/sysbench.sh [ROUNDS] [THREADS...]
#        (defaults 3, and 2 4 16), from the repository root after
#        `cargo build --release`. Needs sysbench (Debian: apt-get install
#        sysbench).
# Prints every run, then per test and thread count the medians and
# klock's ratio to glibc's (above 1: klock did better).
set -euo pipefail

rounds=${1:-3}
shift || true
threads=${*:-2 4 16}
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
bench_setup sysbench.sh sysbench

# run TEST THREADS NAME ENV...: one sysbench run; records its figure.
run() {
    local test=$1 t=$2 name=$3 out figure
    shift 3
    case $test in
    threads)
        out=$(env "$@" sysbench threads --threads="$t" --thread-locks=4 --time=3 run)
        figure=$(echo "$out" | awk '/total number of events:/ { print $NF }')
        ;;
    mutex)
        out=$(env "$@" sysbench mutex --threads="$t" --mutex-num=4 \
            --mutex-locks=2000000 --mutex-loops=100 run)
        figure=$(echo "$out" | awk '/total time:/ { sub("s", "", $NF); print $NF }')
        ;;
    esac
    [ -n "$figure" ] || { echo "sysbench.sh: $test $name: no figure in:" >&2; echo "$out" >&2; exit 1; }
    echo "$test $t $name $figure" | tee -a "$tmp/results"
}

echo "$(sysbench --version), $(nproc) CPUs; $rounds rounds"
for test in threads mutex; do
    for t in $threads; do
        # glibc and klock first in turn (lib.sh's `rotation`).
        for r in $(seq 0 $((rounds - 1))); do
            for i in $(rotation "$r" 2); do
                case $i in
                0) run "$test" "$t" glibc X= ;;
                1) run "$test" "$t" klock LD_PRELOAD="$so" ;;
                esac
            done
        done
    done
done
echo
median_of() { # TEST THREADS NAME
    awk -v a="$1" -v b="$2" -v c="$3" '$1 == a && $2 == b && $3 == c { print $4 }' "$tmp/results" | median
}
for test in threads mutex; do
    for t in $threads; do
        g=$(median_of "$test" "$t" glibc)
        k=$(median_of "$test" "$t" klock)
        awk -v test="$test" -v t="$t" -v g="$g" -v k="$k" 'BEGIN {
            if (test == "threads")
                printf "median %-7s %2d threads: glibc %8.0f events, klock %8.0f events: %.2fx\n", test, t, g, k, k / g
            else
                printf "median %-7s %2d threads: glibc %8.4f s, klock %8.4f s: %.2fx\n", test, t, g, k, g / k
        }'
    done
done
