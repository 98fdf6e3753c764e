//! The plain suites: the common workload (a shared map or counter under
//! the lock, busy work outside) with a reader/writer mix and a critical
//! section of their own, and the common tables. A new suite of this kind
//! is one more `Plain` here and its line in `suites::SUITES`.

use super::registry::LockEntry;
use super::report::ResultRow;
use super::suite::{all_writers, Ctx, Plan, Point, Spec, Suite};
use super::workload::{CriticalSection, RunOutcome};

/// A suite of the common workload, described by its [`Spec`] alone.
pub struct Plain(pub &'static Spec);

impl Plain {
    fn lock<'p>(plan: &'p Plan, p: &Point) -> &'p LockEntry {
        &plan.locks[p.item]
    }
}

impl Suite for Plain {
    type Outcome = RunOutcome;
    type State = ();

    fn spec(&self) -> &'static Spec {
        self.0
    }
    fn begin(&self, _: &Plan, _: &Ctx) -> Result<(), String> {
        Ok(())
    }
    fn run(&self, plan: &Plan, _: &mut (), p: &Point) -> Result<RunOutcome, String> {
        (Self::lock(plan, p).run)(&plan.workload(p.threads))
    }
    fn row(&self, plan: &Plan, p: &Point, runs: &[RunOutcome]) -> ResultRow {
        let l = Self::lock(plan, p);
        let (readers, writers) = (plan.spec.mix)(p.threads);
        ResultRow::aggregate(l.id, l.lock, l.variant, readers, writers, runs)
    }
    fn workload(&self, plan: &Plan, _: &()) -> String {
        format!(
            "critical section: {}; {} ns outside; {:?} × {} runs per point after {:?} warm-up",
            plan.cs.describe(),
            plan.outside_ns,
            plan.duration,
            plan.runs,
            plan.warmup
        )
    }
}

/// One writer per four threads (rounded up), the rest readers.
fn read_mostly(n: usize) -> (usize, usize) {
    let w = n.div_ceil(4);
    (n - w, w)
}

/// The `rwlock` suite's locks: klock's queued rwlock (the one its verdict
/// judges), klock's rw-semaphore beside it (the rwlock to use with more
/// threads than CPUs, so a reader sees both), and the peers.
const RW_PEERS: &[&str] = &[
    "qrwlock",
    "rwsem",
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
    "rwsem-pass",
    "std-rwlock",
    "parking_lot-rwlock",
    "pthread-rwlock",
];

/// The rw-semaphore suite: `klock bench rwsem` runs these three.
pub const RWSEM_GROUP: &[&str] = &["rwsem-rate", "rwsem-dedicated", "rwsem-pagefault"];

pub static MUTEX: Plain = Plain(&Spec {
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
    runs: None,
    quick_ends: false,
});

pub static RWLOCK: Plain = Plain(&Spec {
    name: "rwlock",
    title: "read-mostly shared map: one writer per four threads, the rest readers",
    default_locks: RW_PEERS,
    default_threads: &[1, 2, 4, 8, 16],
    cs: CriticalSection::Map { lookups: 4 },
    outside_ns: 200,
    mix: read_mostly,
    cost_table: false,
    runs: None,
    quick_ends: false,
});

pub static SPINLOCK: Plain = Plain(&Spec {
    name: "spinlock",
    title: "spinlock stress test (2018 qspinlock mail): locking rate, tiny critical section",
    default_locks: &[
        "qspinlock",
        "qspinlock-32",
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
    runs: None,
    quick_ends: false,
});

pub static UNCONTENDED: Plain = Plain(&Spec {
    name: "uncontended",
    title: "uncontended cost: one thread, lock + counter increment + unlock",
    default_locks: &[
        "qspinlock",
        "qspinlock-32",
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
    runs: None,
    quick_ends: false,
});

pub static PI_THROUGHPUT: Plain = Plain(&Spec {
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
    runs: None,
    quick_ends: false,
});

pub static RWSEM_RATE: Plain = Plain(&Spec {
    name: "rwsem-rate",
    title: "rwsem 1/3 (2019 adaptive-disabling mail): equal readers and writers, very short \
            critical section, locking rate. Columns: rwsem-nospin = reader spin off, \
            rwsem-rspin = reader spin on without adaptive disabling, rwsem = reader spin on \
            + adaptive disabling, rwsem-steal = no reader spin, readers steal a free lock \
            (mainline's later design), rwsem-pass = rwsem with reader passing (opt-in)",
    default_locks: RWSEM_LOCKS,
    default_threads: &[2, 4, 8, 16, 32],
    cs: CriticalSection::Counter,
    outside_ns: 100,
    mix: half_readers,
    cost_table: false,
    runs: None,
    quick_ends: true,
});

pub static RWSEM_DEDICATED: Plain = Plain(&Spec {
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
    runs: None,
    quick_ends: true,
});

pub static RWSEM_PAGEFAULT: Plain = Plain(&Spec {
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
    runs: None,
    quick_ends: true,
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mixes_add_up() {
        assert_eq!(read_mostly(1), (0, 1));
        assert_eq!(read_mostly(8), (6, 2));
        assert_eq!(half_readers(5), (3, 2));
        assert_eq!(all_mixed(3), (3, 0));
    }
}
