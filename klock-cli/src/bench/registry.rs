//! Every lock `klock bench` and `klock torture` know, by name: one line of
//! `locks!` each.
//!
//! A line is `(Type, "id", bench, torture)`: the type that implements
//! [`BenchLock`] and [`TryBench`], the CLI name, its place in `klock bench`
//! (`bench("lock", "variant", "about")`: the JSON `lock` and `variant`
//! fields and the `--list` line; or `NO_BENCH`), and its place in `klock
//! torture` (`klock("about")`, `peer(…)`, `broken(…)`, `hidden(…)`, or
//! `NO_TORTURE`). Everything else — shared side, try, timed, downgrade,
//! sleeping waiters, priority inheritance, the oracle — the registry reads
//! from the type's trait constants, so a capability is stated once, where
//! the lock is implemented.
//!
//! Suites with a workload of their own run a lock through [`per_lock`]:
//! they name a generic function once (a [`PerLock`] impl) and the registry
//! instantiates it for the lock type behind an id. The registry names no
//! suite, so suites may name the registry without a circle.

use super::busted::{LockBusted, LockDeadlock, LockLostWake, RwBusted};
use super::klocks::*;
use super::peers::*;
use super::pi_peers::{PiFutexLock, PthreadPi};
use super::tracked::Stat;
use super::workload::{run, RunOutcome, Workload};

/// The lock table: calls `$then!` with every line.
macro_rules! locks {
    ($then:ident) => {
        $then! {
            (QSpinDefault, "qspinlock",
                bench("klock-qspinlock", "paravirt,pending-loops=512",
                    "klock::SpinLock: queued spinlock, pending bit; paravirt slow path: waiters spin while it pays, then sleep; steals while the queue head sleeps (x86-64: 8-byte word, locked part alone in 4)"),
                klock("klock::SpinLock: queued spinlock (pending wait 512), paravirt slow path (spin, then sleep)")),
            (QSpin<{ klock::qspinlock::DEFAULT_PENDING_LOOPS }>, "qspinlock-32",
                bench("klock-qspinlock", "paravirt,pending-loops=512,word=32",
                    "klock::SpinLock's lock in the kernel's 4-byte word (RawQSpinLock32: the preload's pthread_spinlock_t); on x86-64 a byte CAS and a byte-store unlock"),
                klock("klock queued spinlock, paravirt, in the kernel's 4-byte word (RawQSpinLock32)")),
            (QSpin<{ klock::qspinlock::DEFAULT_PENDING_LOOPS }, false>, "qspinlock-native",
                bench("klock-qspinlock", "native,pending-loops=512",
                    "klock qspinlock with the kernel's native slow path: pure spinning, strict FIFO (the 2018 mail's 'before' column)"),
                klock("klock queued spinlock, the kernel's native slow path (pure spinning)")),
            (QSpin<0, false>, "qspinlock-pl0",
                bench("klock-qspinlock", "native,pending-loops=0",
                    "klock native qspinlock without the pending->locked wait (the 2018 mail's 'patched' column)"),
                klock("klock native queued spinlock without the pending->locked wait")),
            (QSpinRmw, "qspinlock-rmw",
                bench("klock-qspinlock", "paravirt,pending-loops=512,unlock=rmw",
                    "klock::SpinLock through its raw calls, always unlocking with an RMW of its word (qspinlock takes and releases the locked part at one width on x86-64: 4-byte CAS, 4-byte store)"),
                NO_TORTURE),
            (KMutex<{ klock::mutex::OWNER_SPIN }>, "mutex",
                bench("klock-mutex", "owner-spin",
                    "klock::Mutex: spins while the owner runs (OSQ-gated), else sleeps on a futex; hand-off; spinning turned off while the lock's adaptive test finds sleeping faster"),
                klock("klock::Mutex: spins on a running owner (kernel OWNER_SPIN) unless its adaptive test finds sleeping faster")),
            (KMutex<{ klock::mutex::OWNER_SPIN_FIXED }>, "mutex-fixed",
                bench("klock-mutex", "owner-spin,adapt=off",
                    "klock::Mutex without the adaptive test: always spins on a running owner (the kernel's OWNER_SPIN exactly)"),
                klock("klock mutex, always spins on a running owner (no adaptive test)")),
            (OnBpf<KMutex<{ klock::mutex::OWNER_SPIN }>>, "mutex-bpf",
                bench("klock-mutex", "owner-spin,oncpu=bpf",
                    "klock::Mutex under the exact eBPF owner-running oracle (feature bpf, root)"),
                NO_TORTURE),
            (KMutex<{ klock::mutex::NO_OWNER_SPIN }>, "mutex-nospin",
                bench("klock-mutex", "no-owner-spin",
                    "klock::Mutex with owner spinning off (kernel NO_OWNER_SPIN): contended lockers sleep"),
                klock("klock mutex, never spins (sleeps at once)")),
            (KMutex<{ klock::mutex::OWNER_SPIN }, klock::RawQSpinLock>, "mutex-qwait",
                bench("klock-mutex", "owner-spin,wait_lock=qspinlock",
                    "klock::Mutex with its wait list under a qspinlock (the kernel's choice) instead of the yielding lock"),
                NO_TORTURE),
            (KMutexCompact, "mutex-compact",
                bench("klock-mutex", "compact",
                    "klock::mutex::RawMutexCompact: the mutex in 40 bytes (klock-preload's pthread_mutex_t): the WOKEN bit, the adaptive spin test with its state beside the lock, one OSQ spinner"),
                klock("klock compact mutex (40 bytes, klock-preload's pthread_mutex_t): owner spinning with its adaptive test, FIFO sleepers, WOKEN, hand-off")),
            (QRw, "qrwlock",
                bench("klock-qrwlock", "default",
                    "klock::RwLock: queued rwlock, FIFO wait queue on a qspinlock, waiting writer blocks new readers"),
                klock("klock::RwLock: queued rwlock (fair: a waiting writer blocks new readers)")),
            (RwSem<{ klock::rwsem::OFF }, { klock::rwsem::OFF }>, "rwsem-nospin",
                bench("klock-rwsem", "reader-spin-off",
                    "klock::RwSem, reader optimistic spinning off (the 2019 mail's 'before rspin')"),
                klock("klock rw-semaphore without reader optimistic spinning")),
            (RwSem<{ klock::rwsem::ON }, { klock::rwsem::OFF }>, "rwsem-rspin",
                bench("klock-rwsem", "reader-spin-no-adaptive",
                    "klock::RwSem, reader spinning on, no adaptive disabling (the 2019 mail's 'before patch')"),
                klock("klock rw-semaphore, reader spinning without adaptive disabling")),
            (RwSem<{ klock::rwsem::ON }, { klock::rwsem::ON }>, "rwsem",
                bench("klock-rwsem", "reader-spin-adaptive",
                    "klock::RwSem, reader spinning + adaptive disabling (the 2019 mail's 'after patch')"),
                klock("klock::RwSem: rw-semaphore, reader optimistic spinning, adaptive disabling")),
            (RwSem<{ klock::rwsem::STEAL }, { klock::rwsem::OFF }>, "rwsem-steal",
                bench("klock-rwsem", "reader-steal",
                    "klock::RwSem, readers steal a free lock instead of spinning (mainline's later design)"),
                klock("klock rw-semaphore, readers steal a free lock instead of spinning (mainline's design)")),
            (RwSem<{ klock::rwsem::PASS }, { klock::rwsem::ON }>, "rwsem-pass",
                bench("klock-rwsem", "reader-spin-adaptive,reader-pass",
                    "klock::RwSem (as rwsem) with reader passing: readers take a lock no writer holds past queued waiters (opt-in)"),
                klock("klock rw-semaphore with reader passing (readers pass queued waiters; writers bounded by the hand-off)")),
            (OnBpf<RwSem<{ klock::rwsem::ON }, { klock::rwsem::ON }>>, "rwsem-bpf",
                bench("klock-rwsem", "reader-spin-adaptive,oncpu=bpf",
                    "klock::RwSem (as rwsem) under the exact eBPF owner-running oracle (feature bpf, root)"),
                NO_TORTURE),
            (StdMutex, "std-mutex",
                bench("std-mutex", "default",
                    "std::sync::Mutex (futex, spin 100 then park)"),
                peer("std::sync::Mutex")),
            (ParkingLotMutex, "parking_lot",
                bench("parking_lot-mutex", "default",
                    "parking_lot::Mutex (spin with backoff, then park)"),
                peer("parking_lot::Mutex")),
            (PthreadNormal, "pthread",
                bench("pthread-mutex", "normal",
                    "glibc pthread_mutex_t, PTHREAD_MUTEX_NORMAL"),
                peer("glibc pthread_mutex_t, NORMAL")),
            (PthreadAdaptive, "pthread-adaptive",
                bench("pthread-mutex", "adaptive",
                    "glibc pthread_mutex_t, PTHREAD_MUTEX_ADAPTIVE_NP"),
                peer("glibc pthread_mutex_t, ADAPTIVE_NP")),
            (PthreadSpin, "pthread-spin",
                bench("pthread-spinlock", "default",
                    "glibc pthread_spinlock_t (never sleeps)"),
                peer("glibc pthread_spinlock_t")),
            (TicketLock, "ticket",
                bench("ticket", "default",
                    "baseline ticket spinlock (FIFO, never sleeps)"),
                peer("baseline ticket spinlock")),
            (TtasLock, "ttas",
                bench("ttas", "default",
                    "baseline test-and-test-and-set spinlock"),
                peer("baseline test-and-test-and-set spinlock")),
            (StdRwLock, "std-rwlock",
                bench("std-rwlock", "default",
                    "std::sync::RwLock"),
                peer("std::sync::RwLock")),
            (ParkingLotRwLock, "parking_lot-rwlock",
                bench("parking_lot-rwlock", "default",
                    "parking_lot::RwLock"),
                peer("parking_lot::RwLock")),
            (PthreadRwLock, "pthread-rwlock",
                bench("pthread-rwlock", "default",
                    "glibc pthread_rwlock_t (reader-preferring default)"),
                peer("glibc pthread_rwlock_t")),
            // --- rtmutex
            (RtSpin, "rtmutex",
                bench("klock-rtmutex", "top-waiter-spin",
                    "klock::RtMutex: PI futex (LOCK_PI2/UNLOCK_PI), userspace top-waiter spinning, non-RT waiters wait in userspace"),
                klock("klock::RtMutex: priority-inheritance futex mutex, top-waiter spinning, non-RT waiters wait in userspace")),
            (RtKwait, "rtmutex-kwait",
                bench("klock-rtmutex", "top-waiter-spin-kernel-wait",
                    "klock::RtMutex, top-waiter spinning but every other waiter queued in the kernel (as docs/design.md describes the kernel's)"),
                klock("klock rt-mutex, top-waiter spinning, every other waiter in the kernel")),
            (RtNoSpin, "rtmutex-nospin",
                bench("klock-rtmutex", "no-spin",
                    "klock::RtMutex with userspace spinning off (fast paths + kernel PI only)"),
                klock("klock rt-mutex, no userspace spinning (straight to FUTEX_LOCK_PI2)")),
            (PthreadPi, "pthread-pi",
                bench("pthread-mutex", "prio-inherit",
                    "glibc pthread_mutex_t with PTHREAD_PRIO_INHERIT"),
                NO_TORTURE),
            (PiFutexLock, "pi-futex",
                bench("pi-futex", "raw",
                    "raw PI futex: CAS fast paths, FUTEX_LOCK_PI2/UNLOCK_PI, no userspace spinning"),
                NO_TORTURE),
            // --- deliberately broken: torture only
            (LockBusted, "lock_busted", NO_BENCH,
                broken("BROKEN on purpose: takes nothing (must end in FAILURE)")),
            (RwBusted, "rwlock_busted", NO_BENCH,
                broken("BROKEN on purpose: readers ignore writers (must end in FAILURE)")),
            (LockDeadlock, "lock_deadlock", NO_BENCH,
                hidden("BROKEN on purpose: loses an unlock, deadlocks (watchdog test)")),
            (LockLostWake, "lock_lostwake", NO_BENCH,
                hidden("BROKEN on purpose: one waiter is never woken (watchdog test)")),
        }
    };
}

/// One run of the common workload.
pub type RunFn = fn(&Workload) -> Result<RunOutcome, String>;

/// A lock's place in `klock bench`.
pub struct BenchSide {
    lock: &'static str,
    variant: &'static str,
    about: &'static str,
}

/// In `klock bench`: JSON `lock` and `variant`, and the `--list` line.
const fn bench(
    lock: &'static str,
    variant: &'static str,
    about: &'static str,
) -> Option<BenchSide> {
    Some(BenchSide {
        lock,
        variant,
        about,
    })
}

/// Not in `klock bench` (the deliberately broken locks).
const NO_BENCH: Option<BenchSide> = None;

/// Which `klock torture` list a lock is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum TortureKind {
    /// One of klock's own locks: must SUCCEED; CI tortures every one.
    Klock,
    /// A peer: must SUCCEED.
    Peer,
    /// Deliberately broken: must FAIL.
    Broken,
    /// Deliberately broken and not listed (the watchdog's tests).
    Hidden,
}

/// A lock's place in `klock torture`: its list and its `--list` line.
#[derive(Debug, Clone, Copy)]
pub struct TortureSide {
    pub kind: TortureKind,
    pub about: &'static str,
}

const fn klock(about: &'static str) -> Option<TortureSide> {
    Some(TortureSide {
        kind: TortureKind::Klock,
        about,
    })
}
const fn peer(about: &'static str) -> Option<TortureSide> {
    Some(TortureSide {
        kind: TortureKind::Peer,
        about,
    })
}
const fn broken(about: &'static str) -> Option<TortureSide> {
    Some(TortureSide {
        kind: TortureKind::Broken,
        about,
    })
}
const fn hidden(about: &'static str) -> Option<TortureSide> {
    Some(TortureSide {
        kind: TortureKind::Hidden,
        about,
    })
}

/// Not in `klock torture`.
const NO_TORTURE: Option<TortureSide> = None;

/// A lock as the CLI names it.
#[derive(Clone, Copy)]
pub struct LockEntry {
    /// CLI and table name (unique).
    pub id: &'static str,
    /// Listed by `klock bench` (else torture-only).
    pub in_bench: bool,
    /// JSON `lock` field (empty when not in bench).
    pub lock: &'static str,
    /// JSON `variant` field.
    pub variant: &'static str,
    /// One line for `klock bench --list`.
    pub about: &'static str,
    /// Where `klock torture` lists it, if it does.
    pub torture: Option<TortureSide>,
    /// Whether the lock has a real shared (read) side ([`BenchLock::SHARED`]).
    pub shared: bool,
    /// Whether a waiter eventually sleeps ([`BenchLock::SLEEPS`]).
    pub sleeps: bool,
    /// Whether it has a real try ([`TryBench::TRY`]): lockstat can track it.
    pub tracked: bool,
    /// Whether it has a real timed acquire ([`TryBench::TIMED`]).
    pub timed: bool,
    /// Whether it downgrades ([`TryBench::DOWNGRADE`]).
    pub downgrade: bool,
    /// Run one measurement of the common workload with a fresh lock of this type.
    pub run: RunFn,
    /// The same under lockstat (`None` where not [`LockEntry::tracked`]).
    pub run_tracked: Option<RunFn>,
    /// The oracle its runs need ([`BenchLock::oracle`]).
    pub oracle: Option<klock::oncpu::OracleKind>,
}

impl LockEntry {
    fn of<L: TryBench>(
        id: &'static str,
        bench: Option<BenchSide>,
        torture: Option<TortureSide>,
    ) -> Self {
        let in_bench = bench.is_some();
        let b = bench.unwrap_or(BenchSide {
            lock: "",
            variant: "",
            about: "",
        });
        LockEntry {
            id,
            in_bench,
            lock: b.lock,
            variant: b.variant,
            about: b.about,
            torture,
            shared: L::SHARED,
            sleeps: L::SLEEPS,
            tracked: L::TRY,
            timed: L::TIMED,
            downgrade: L::DOWNGRADE,
            run: run::<L>,
            run_tracked: L::TRY.then_some(run::<Stat<L>> as _),
            oracle: L::oracle(),
        }
    }

    /// Whether this lock runs under the eBPF oracle (feature `bpf`, root).
    pub fn needs_bpf(&self) -> bool {
        self.oracle == Some(klock::oncpu::OracleKind::Bpf)
    }
}

/// Every line of the table, bench's and torture's.
pub fn every() -> Vec<LockEntry> {
    macro_rules! entries {
        ($(($ty:ty, $id:literal, $bench:expr, $torture:expr)),* $(,)?) => {
            vec![$(LockEntry::of::<$ty>($id, $bench, $torture)),*]
        };
    }
    locks!(entries)
}

/// The locks of `klock bench`, klock's first, then the peers.
pub fn all() -> Vec<LockEntry> {
    every().into_iter().filter(|e| e.in_bench).collect()
}

/// Look up a bench lock; the error lists the valid names.
pub fn find(id: &str) -> Result<LockEntry, String> {
    let mut all = all();
    match all.iter().position(|e| e.id == id) {
        Some(i) => Ok(all.swap_remove(i)),
        None => Err(format!(
            "unknown lock '{id}'. Valid locks: {} (see `klock bench --list`)",
            all.iter().map(|e| e.id).collect::<Vec<_>>().join(", ")
        )),
    }
}

/// A function generic over the lock type, for [`per_lock`]: a suite with a
/// workload of its own implements it once, e.g. `fn with<L>() -> Self::Out
/// { my_run::<L> }`, and gets its run function for any registered lock.
pub trait PerLock {
    type Out;
    fn with<L: TryBench>() -> Self::Out;
}

/// `G` instantiated for the lock type named `id` (`None`: no such lock).
/// Keeps every (lock, workload) pair monomorphized: no indirect call
/// inside a lock's path, only one to start a run.
pub fn per_lock<G: PerLock>(id: &str) -> Option<G::Out> {
    macro_rules! pick {
        ($(($ty:ty, $id:literal, $bench:expr, $torture:expr)),* $(,)?) => {
            match id {
                $($id => Some(G::with::<$ty>()),)*
                _ => None,
            }
        };
    }
    locks!(pick)
}
