# Sourced by the bench scripts beside it: `bench_setup NAME COMMAND`
# sets `root` (the repository), `so` (the built preload library) and
# `tmp` (a directory removed at exit), after checking that COMMAND is
# installed and the library built; `median` prints the median of the
# numbers on its input, one per line.

bench_setup() {
    local name=$1 needs=$2
    root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
    so="$root/target/release/libklock_preload.so"
    command -v "$needs" >/dev/null || { echo "$name: $needs is not installed" >&2; exit 2; }
    [ -f "$so" ] || { echo "$name: $so missing: run cargo build --release" >&2; exit 2; }
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
}

median() {
    sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
