//! The suites: each is the shape of a kernel mailing-list experiment with default locks,
//! thread counts and workload.

use super::workload::CriticalSection;

#[derive(Debug)]
pub struct Suite {
    pub name: &'static str,
    /// What it reproduces (printed above its tables).
    pub title: &'static str,
    pub default_locks: &'static [&'static str],
    pub default_threads: &'static [usize],
    pub cs: CriticalSection,
    pub outside_ns: u64,
    /// Threads → (readers, writers).
    pub mix: fn(usize) -> (usize, usize),
    /// Print ns per operation at 1 thread rather than a rate table.
    pub cost_table: bool,
}

fn all_writers(n: usize) -> (usize, usize) {
    (0, n)
}

/// One writer per four threads (rounded up), the rest readers.
fn read_mostly(n: usize) -> (usize, usize) {
    let w = n.div_ceil(4);
    (n - w, w)
}

const RW_PEERS: &[&str] = &[
    "qrwlock",
    "std-rwlock",
    "parking_lot-rwlock",
    "pthread-rwlock",
];

/// Equal numbers of readers and writers (readers get the odd one).
fn half_readers(n: usize) -> (usize, usize) {
    (n - n / 2, n / 2)
}

/// Every thread is a reader that sometimes writes (the PageFault mix).
fn all_mixed(n: usize) -> (usize, usize) {
    (n, 0)
}

/// The 2019 rwsem mail's three columns, mainline's reader lock stealing, then
/// the peers.
const RWSEM_LOCKS: &[&str] = &[
    "rwsem-nospin",
    "rwsem-rspin",
    "rwsem",
    "rwsem-bpf",
    "rwsem-steal",
    "std-rwlock",
    "parking_lot-rwlock",
    "pthread-rwlock",
];

/// The rw-semaphore suite: `klock bench rwsem` runs these three.
pub const RWSEM_GROUP: &[&str] = &["rwsem-rate", "rwsem-dedicated", "rwsem-pagefault"];

pub const SUITES: &[Suite] = &[
    Suite {
        name: "mutex",
        title: "test-mutex \"V\" shape (2009 adaptive-spinning mail): short VFS-like critical \
                sections on shared state, all threads writers",
        default_locks: &[
            "mutex",
            "mutex-fixed",
            "mutex-bpf",
            "mutex-nospin",
            "mutex-qwait",
            "std-mutex",
            "parking_lot",
            "pthread",
            "pthread-adaptive",
            "pthread-spin",
            "ticket",
            "ttas",
        ],
        default_threads: &[1, 2, 4, 8, 16, 32],
        cs: CriticalSection::Map { lookups: 0 },
        outside_ns: 200,
        mix: all_writers,
        cost_table: false,
    },
    Suite {
        name: "rwlock",
        title: "read-mostly shared map: one writer per four threads, the rest readers",
        default_locks: RW_PEERS,
        default_threads: &[1, 2, 4, 8, 16],
        cs: CriticalSection::Map { lookups: 4 },
        outside_ns: 200,
        mix: read_mostly,
        cost_table: false,
    },
    Suite {
        name: "spinlock",
        title: "spinlock stress test (2018 qspinlock mail): locking rate, tiny critical section",
        default_locks: &[
            "qspinlock",
            "qspinlock-native",
            "qspinlock-pl0",
            "qspinlock-rmw",
            "mutex",
            "pthread-spin",
            "ticket",
            "ttas",
            "parking_lot",
            "std-mutex",
            "pthread",
            "pthread-adaptive",
        ],
        default_threads: &[1, 2, 3, 4, 8, 16],
        cs: CriticalSection::Counter,
        outside_ns: 0,
        mix: all_writers,
        cost_table: false,
    },
    Suite {
        name: "uncontended",
        title: "uncontended cost: one thread, lock + counter increment + unlock",
        default_locks: &[
            "qspinlock",
            "qspinlock-rmw",
            "mutex",
            "mutex-nospin",
            "qrwlock",
            "std-mutex",
            "parking_lot",
            "pthread",
            "pthread-adaptive",
            "pthread-spin",
            "ticket",
            "ttas",
            "std-rwlock",
            "parking_lot-rwlock",
            "pthread-rwlock",
        ],
        default_threads: &[1],
        cs: CriticalSection::Counter,
        outside_ns: 0,
        mix: all_writers,
        cost_table: true,
    },
    Suite {
        name: "treelock",
        title: "tree_lock (2004 spinlock -> rwlock mail): read-mostly radix-tree index, \
                single-thread ns/op, kop/s mean(stddev) by threads, lockmeter table",
        default_locks: &[
            "qspinlock",
            "qrwlock",
            "rwsem",
            "std-mutex",
            "parking_lot",
            "pthread",
            "pthread-adaptive",
            "pthread-spin",
            "ticket",
            "ttas",
            "std-rwlock",
            "parking_lot-rwlock",
            "pthread-rwlock",
        ],
        default_threads: &[1, 2, 4, 8, 16],
        // Unused: treelock's critical sections are the tree operations.
        cs: CriticalSection::Counter,
        outside_ns: 100,
        mix: all_writers,
        cost_table: false,
    },
    // --- rtmutex
    Suite {
        name: "pi",
        title: "pi_stress (2016 rtmutex top-waiter spinning mail): groups of low/medium/high \
                SCHED_FIFO threads on one CPU; --threads is the number of groups",
        default_locks: &[
            "rtmutex-nospin",
            "rtmutex",
            "pthread-pi",
            "pi-futex",
            "std-mutex",
        ],
        default_threads: &[1, 2, 4, 8],
        cs: CriticalSection::Counter,
        outside_ns: 0,
        mix: all_writers,
        cost_table: false,
    },
    Suite {
        name: "pi-throughput",
        title: "contended throughput of PI locks (no RT priorities): the test-mutex shape \
                (shared map insert+remove under the lock, 200 ns outside)",
        default_locks: &[
            "rtmutex",
            "rtmutex-kwait",
            "rtmutex-nospin",
            "pthread-pi",
            "pi-futex",
            "mutex",
        ],
        default_threads: &[1, 2, 4, 8],
        cs: CriticalSection::Map { lookups: 0 },
        outside_ns: 200,
        mix: all_writers,
        cost_table: false,
    },
    Suite {
        name: "rwsem-rate",
        title: "rwsem 1/3 (2019 adaptive-disabling mail): equal readers and writers, very short \
                critical section, locking rate. Columns: rwsem-nospin = reader spin off, \
                rwsem-rspin = reader spin on without adaptive disabling, rwsem = reader spin on \
                + adaptive disabling, rwsem-steal = no reader spin, readers steal a free lock \
                (mainline's later design)",
        default_locks: RWSEM_LOCKS,
        default_threads: &[2, 4, 8, 16, 32],
        cs: CriticalSection::Counter,
        outside_ns: 100,
        mix: half_readers,
        cost_table: false,
    },
    Suite {
        name: "rwsem-dedicated",
        title: "rwsem 2/3: N dedicated readers and N dedicated writers, ~1 us critical \
                sections; read the Fairness lines: N readers / N writers, Iterations \
                Min/Mean/Max (adaptive disabling trades reader iterations for writers')",
        default_locks: RWSEM_LOCKS,
        default_threads: &[4, 16],
        cs: CriticalSection::Work { ns: 1000 },
        outside_ns: 1000,
        mix: half_readers,
        cost_table: false,
    },
    Suite {
        name: "rwsem-pagefault",
        title: "rwsem 3/3: page_fault1-like: threads read-lock a shared map (4 lookups), \
                write-lock it 1 op in 16, and sleep 50 us in 1 read of 64 (long reader \
                sections: where reader spinning hurts)",
        default_locks: RWSEM_LOCKS,
        default_threads: &[2, 4, 8, 16],
        cs: CriticalSection::PageFault {
            lookups: 4,
            write_every: 16,
            sleep_every: 64,
            sleep_us: 50,
        },
        outside_ns: 500,
        mix: all_mixed,
        cost_table: false,
    },
    Suite {
        name: "ctxswitch",
        title: "cost of the bpf oracle's sched_switch hook: ns per context switch of a futex \
                ping-pong on one CPU, hook not loaded vs loaded (needs root and feature bpf)",
        default_locks: &[],
        default_threads: &[2],
        cs: CriticalSection::Counter,
        outside_ns: 0,
        mix: all_writers,
        cost_table: false,
    },
];

/// Suites run by a bare `klock bench`.
pub const HEADLINE: &[&str] = &["mutex", "rwlock"];

/// Suite groups: a name that runs several suites.
pub const GROUPS: &[(&str, &[&str])] = &[("rwsem", RWSEM_GROUP)];

/// Look up a suite; the error lists the valid names.
pub fn find(name: &str) -> Result<&'static Suite, String> {
    SUITES.iter().find(|s| s.name == name).ok_or_else(|| {
        format!(
            "unknown suite '{name}'. Valid suites: {} (see `klock bench --list`)",
            SUITES.iter().map(|s| s.name).collect::<Vec<_>>().join(", ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_default_lock_exists_and_mixes_add_up() {
        for s in SUITES {
            for l in s.default_locks {
                super::super::registry::find(l).unwrap();
            }
            for &t in s.default_threads {
                let (r, w) = (s.mix)(t);
                assert_eq!(r + w, t, "{}", s.name);
            }
        }
        assert_eq!(read_mostly(1), (0, 1));
        assert_eq!(read_mostly(8), (6, 2));
        assert!(find("nope").unwrap_err().contains("mutex"));
        for (_, members) in GROUPS {
            for m in *members {
                find(m).unwrap();
            }
        }
        assert_eq!(half_readers(5), (3, 2));
    }
}
