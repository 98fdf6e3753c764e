#!/usr/bin/env bash
# unbound, a multithreaded DNS resolver, on glibc's locks, on klock's (the
# preload) and on klock's with the lock profile (KLOCK_STAT=1),
# alternating, under the same load from dnsperf.
#
# The server answers from its caches: a zone of 1,000 A records is its
# upstream (an auth-zone for-upstream, so nothing leaves the machine), and
# after the first query of each name every answer is a cache hit. Each
# hit takes the message and rrset caches' pthread spinlocks (their hash
# tables) and pthread rwlocks (the entries), and the worker threads share
# those caches; mutexes guard the rest.
#
# Usage: klock-preload/bench/unbound.sh [ROUNDS] [SECONDS] [SERVER_THREADS] [CLIENTS]
#        (defaults 5 3 2 4), from the repository root after
#        `cargo build --release`. Needs unbound and dnsperf.
# Prints each run's queries per second, the server's CPU time per query
# (all its threads) and the machine's idle share during the load, then
# the medians of the first two and their ratios to glibc's and the
# paired ratios, and the idle shares' means and paired differences
# (lib.sh), then the head of the last
# profiled run's lock profile. A run fails the script if any answer was
# not NOERROR or a query went unanswered.
set -euo pipefail

rounds=${1:-5}
secs=${2:-3}
threads=${3:-2}
clients=${4:-4}
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
bench_setup unbound.sh unbound
command -v dnsperf >/dev/null || { echo "unbound.sh: dnsperf is not installed" >&2; exit 2; }

{
    printf '$ORIGIN bench.\n$TTL 86400\n'
    printf '@ IN SOA ns.bench. host.bench. 1 3600 600 86400 3600\n@ IN NS ns.bench.\nns IN A 127.0.0.1\n'
    for i in $(seq 0 999); do printf 'h%d IN A 10.%d.%d.1\n' "$i" $((i / 256)) $((i % 256)); done
} >"$tmp/bench.zone"
for i in $(seq 0 999); do printf 'h%d.bench A\n' "$i"; done >"$tmp/queries"

# run NAME ENV...: one server under the given environment, one load run.
run() {
    local name=$1
    shift
    port=$((port + 1))
    cat >"$tmp/unbound.conf" <<EOF
server:
    interface: 127.0.0.1@$port
    num-threads: $threads
    so-reuseport: yes
    do-daemonize: no
    chroot: ""
    username: ""
    directory: "$tmp"
    pidfile: ""
    use-syslog: no
    logfile: ""
    do-ip6: no
    module-config: "iterator"
auth-zone:
    name: "bench."
    zonefile: "$tmp/bench.zone"
    for-downstream: no
    for-upstream: yes
    fallback-enabled: no
remote-control:
    control-enable: no
EOF
    env "$@" unbound -d -c "$tmp/unbound.conf" 2>"$tmp/$name.err" &
    echo $! >"$tmp/pid"
    # Up when it answers: a few 0.2 s probes.
    for _ in $(seq 50); do
        dnsperf -s 127.0.0.1 -p "$port" -d "$tmp/queries" -n 1 -t 1 2>/dev/null \
            | grep -q 'Queries completed: *1000 ' && break
        sleep 0.1
    done
    load_start
    dnsperf -s 127.0.0.1 -p "$port" -d "$tmp/queries" -l "$secs" -c "$clients" \
        >"$tmp/$name.out" 2>&1 || true
    local qps sent done codes cpu idle
    idle=$(machine_idle "$name")
    qps=$(awk '/Queries per second:/ { print $4 }' "$tmp/$name.out")
    sent=$(awk '/Queries sent:/ { print $3 }' "$tmp/$name.out")
    done=$(awk '/Queries completed:/ { print $3 }' "$tmp/$name.out")
    codes=$(awk '/Response codes:/ { $1 = $2 = ""; print }' "$tmp/$name.out")
    cpu=$(server_cpu "$name" "$done")
    stop_server
    if [ -z "$qps" ] || [ "$sent" != "$done" ] || [ "$codes" != "  NOERROR $done (100.00%)" ]; then
        echo "unbound.sh: $name: sent ${sent:-?}, answered ${done:-?}, codes:${codes:-?}" >&2
        cat "$tmp/$name.out" "$tmp/$name.err" >&2
        exit 1
    fi
    echo "$name $qps" >>"$tmp/results"
    printf '%-12s %10.0f queries/s  %s sent, all answered NOERROR  %s us of server CPU a query  %s%% idle\n' "$name" "$qps" "$sent" "$cpu" "$idle"
}

echo "unbound $(unbound -V | awk 'NR == 1 { print $2 }'), $threads threads; dnsperf, $clients clients, $secs s a run; $(nproc) CPUs"
alternate "$rounds"
echo
summary queries/s glibc glibc klock klock+stat
echo
summary "us of server CPU a query" glibc:cpu glibc:cpu klock:cpu klock+stat:cpu
echo
summary_diff "% of the machine idle" glibc:idle glibc:idle klock:idle klock+stat:idle
echo
echo "The last profiled run's lock profile (its head):"
sed -n '/^klock: lock profile/,/^$/p' "$tmp/klock+stat.err" | head -n 8

