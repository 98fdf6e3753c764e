# Sourced by the bench scripts beside it: `bench_setup NAME COMMAND`
# sets `root` (the repository), `so` (the built preload library), `tmp`
# (a directory removed at exit, where a server's pid goes in "$tmp/pid":
# killed at exit too) and `port` (a base for the servers' ports), after
# checking that COMMAND is installed and the library built;
# `stop_server` stops the server in "$tmp/pid" (SIGINT, its own way out,
# which prints the lock profile) and waits for it; `alternate ROUNDS`
# calls the script's `run NAME ENV...` on glibc's locks, klock's and
# klock's with the profile, ROUNDS times, each round starting one place
# further in that order (`rotation`; and marks each round in
# "$tmp/results"); `record NAME VALUE` adds a line `NAME VALUE` to
# "$tmp/results" and prints VALUE; `server_cpu NAME OPS`, called before
# `stop_server`, records the server's CPU time (user + system, all its
# threads, since it started) per operation of the run as `NAME:cpu`;
# `load_start` before a load run and `machine_idle NAME` after it record
# the share of the machine's CPU time that was idle meanwhile (idle and
# iowait, all CPUs, in per cent) as `NAME:idle`; `median` prints the
# median of the numbers on its input, one per line; `summary UNIT BASE
# NAME...` prints the medians of "$tmp/results" over BASE's and the
# paired ratios, round by round, and `summary_diff UNIT BASE NAME...`
# the means and the paired differences (for a share that can be zero).

bench_setup() {
    local name=$1 needs=$2
    root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
    so="$root/target/release/libklock_preload.so"
    command -v "$needs" >/dev/null || { echo "$name: $needs is not installed" >&2; exit 2; }
    [ -f "$so" ] || { echo "$name: $so missing: run cargo build --release" >&2; exit 2; }
    tmp=$(mktemp -d)
    trap 'kill $(cat "$tmp"/pid 2>/dev/null) 2>/dev/null || true; rm -rf "$tmp"' EXIT
    # Below the kernel's ephemeral range (32768 up), where a load's own
    # connections take their ports.
    port=$((12000 + $$ % 10000 * 2))
}

record() {
    echo "$1 $2" >>"$tmp/results"
    echo "$2"
}

server_cpu() {
    local name=$1 ops=$2 ticks
    # Fields 14 and 15 of /proc/PID/stat (utime, stime), counted after the
    # command name's closing bracket so that a name with spaces cannot
    # shift them.
    if ! [ "${ops:-0}" -gt 0 ] 2>/dev/null; then echo "?"; return; fi
    ticks=$(sed 's/.*) //' "/proc/$(cat "$tmp/pid")/stat" | awk '{ print $12 + $13 }')
    record "$name:cpu" "$(awk -v t="$ticks" -v hz="$(getconf CLK_TCK)" -v ops="$ops" \
        'BEGIN { printf "%.3f", t / hz * 1e6 / ops }')"
}

# The machine's idle and total CPU time (ticks, all CPUs) from /proc/stat.
cpu_counters() {
    awk '/^cpu / { print $5 + $6, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9 }' /proc/stat
}

load_start() {
    read -r idle0 total0 < <(cpu_counters)
}

machine_idle() {
    local idle1 total1
    read -r idle1 total1 < <(cpu_counters)
    record "$1:idle" "$(awk -v i="$((idle1 - idle0))" -v t="$((total1 - total0))" \
        'BEGIN { printf "%.1f", (t > 0 ? 100 * i / t : 0) }')"
}

stop_server() {
    kill -INT "$(cat "$tmp/pid")"
    wait "$(cat "$tmp/pid")" 2>/dev/null || true
    rm -f "$tmp/pid"
}

# rotation R N: the order of N contenders (0 .. N-1) in round R, starting
# R places further each round, so that each comes first, second, ...
# equally often and no place in the order can favour one of them (with
# glibc always first, a slower second or third run of a round would have
# counted against klock).
rotation() {
    local i
    for i in $(seq 0 $(($2 - 1))); do
        echo $((($1 + i) % $2))
    done
}

# Round r: glibc, klock, klock+stat from place r mod 3 on (then klock,
# klock+stat, glibc; ...).
alternate() {
    local r i
    for r in $(seq 0 $(($1 - 1))); do
        echo "round $r" >>"$tmp/results"
        for i in $(rotation "$r" 3); do
            case $i in
            0) run glibc ;;
            1) run klock LD_PRELOAD="$so" ;;
            2) run klock+stat LD_PRELOAD="$so" KLOCK_STAT=1 ;;
            esac
        done
    done
}

median() {
    sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# paired OP BASE NAME: for each round of "$tmp/results" in which both
# ran, NAME's value over BASE's (OP `/`) or minus it (OP `-`), one a line.
paired() {
    awk -v op="$1" -v b="$2" -v n="$3" '
        function pair() { if (g != "" && v != "") print (op == "/" ? v / g : v - g); g = v = "" }
        $1 == "round" { pair(); next }
        $1 == b { g = $2 }
        $1 == n { v = $2 }
        END { pair() }' "$tmp/results"
}

# Awk functions for the summaries: `mean_ci(x, n)` sets MEAN to the mean
# of x[1..n] and HALF to the half-width of its 95% interval (Student's
# t); `t975(df)` is the two-sided 95% quantile of Student's t with DF
# degrees of freedom (the table to 30, then 1.96 + 2.4 / DF, within 0.002
# of it from 30 to 120).
stats_awk='
    function t975(df,    T) {
        T = "12.7064.30263.18242.77642.57062.44692.36462.30602.26222.2281" \
            "2.20102.17882.16042.14482.13152.11992.10982.10092.09302.0860" \
            "2.07962.07392.06872.06392.05952.05552.05182.04842.04522.0423"
        if (df <= 30) return 0 + substr(T, (df - 1) * 6 + 1, 6)
        return 1.96 + 2.4 / df
    }
    function mean_ci(x, n,    i, s, v) {
        for (i = 1; i <= n; i++) s += x[i]
        MEAN = s / n
        for (i = 1; i <= n; i++) v += (x[i] - MEAN) ^ 2
        HALF = n > 1 ? t975(n - 1) * sqrt(v / (n - 1) / n) : 0
    }'

# summary UNIT BASE NAME...: for each NAME, the median of its values in
# "$tmp/results" and its ratio to BASE's median; then, for each NAME but
# BASE, the paired ratios: each round's run over the BASE run of the same
# round (the host's slow drifts cancel within a round), their median,
# their geometric mean with its 95% interval (Student's t over the
# ratios' logarithms) and how many rounds were at or above 1.
summary() {
    local unit=$1 base_name=$2 k m base
    shift 2
    median_of() { awk -v n="$1" '$1 == n { print $2 }' "$tmp/results" | median; }
    base=$(median_of "$base_name")
    for k in "$@"; do
        m=$(median_of "$k")
        awk -v k="$k" -v m="$m" -v b="$base" -v u="$unit" -v n="$base_name" \
            'BEGIN { printf "median %-14s %10s %s  %.3fx %s\n", k, sprintf(m >= 100 ? "%.0f" : "%.3f", m), u, m / b, n }'
    done
    echo
    for k in "$@"; do
        [ "$k" = "$base_name" ] && continue
        paired / "$base_name" "$k" >"$tmp/ratios"
        m=$(median <"$tmp/ratios")
        awk -v k="$k" -v m="$m" -v n="$base_name" "$stats_awk"'
            { up += ($1 >= 1); l[NR] = log($1) }
            END {
                if (NR == 0) exit
                mean_ci(l, NR)
                printf "paired %-14s median %.3fx %s; geometric mean %.3fx (%.3f-%.3f); %d of %d rounds at or above 1\n",
                    k, m, n, exp(MEAN), exp(MEAN - HALF), exp(MEAN + HALF), up, NR
            }' "$tmp/ratios"
    done
}

# summary_diff UNIT BASE NAME...: like `summary` for a quantity that can
# be zero (the idle share): the means, then each NAME's paired
# differences from BASE's run of the same round, their mean and 95%
# interval.
summary_diff() {
    local unit=$1 base_name=$2 k
    shift 2
    for k in "$@"; do
        awk -v n="$k" -v u="$unit" '$1 == n { s += $2; c++ } END { if (c) printf "mean   %-14s %10.1f %s\n", n, s / c, u }' "$tmp/results"
    done
    echo
    for k in "$@"; do
        [ "$k" = "$base_name" ] && continue
        paired - "$base_name" "$k" | awk -v k="$k" -v n="$base_name" -v u="$unit" "$stats_awk"'
            { d[NR] = $1 }
            END {
                if (NR == 0) exit
                mean_ci(d, NR)
                printf "paired %-16s minus %s: mean %+.1f %s (%+.1f to %+.1f) over %d rounds\n", k, n, MEAN, u, MEAN - HALF, MEAN + HALF, NR
            }'
    done
}
