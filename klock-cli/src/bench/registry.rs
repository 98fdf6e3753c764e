//! Every lock the benchmark knows, by name: one line of [`locks!`] each.
//!
//! A line is `(Type, "id", "lock", "variant", "about")`: the type that
//! implements [`BenchLock`] and [`TryBench`], the CLI and table name, the
//! JSON `lock` and `variant` fields, and the `--list` line. Everything
//! else — shared side, try, sleeping waiters, priority inheritance, the
//! oracle — the registry reads from the type's trait constants, so a
//! capability is stated once, where the lock is implemented.
//!
//! Suites with a workload of their own run a lock through [`per_lock`]:
//! they name a generic function once (a [`PerLock`] impl) and the registry
//! instantiates it for the lock type behind an id. The registry names no
//! suite, so suites may name the registry without a circle.

use super::klocks::*;
use super::peers::*;
use super::pi_peers::{PiFutexLock, PthreadPi};
use super::tracked::Stat;
use super::workload::{run, RunOutcome, Workload};

/// The lock table: calls `$then!` with every line.
macro_rules! locks {
    ($then:ident) => {
        $then! {
            (QSpin<{ klock::qspinlock::DEFAULT_PENDING_LOOPS }>, "qspinlock", "klock-qspinlock", "paravirt,pending-loops=512",
                "klock::SpinLock: queued spinlock, pending bit; paravirt slow path: waiters spin while it pays, then sleep; steals while the queue head sleeps"),
            (QSpin<{ klock::qspinlock::DEFAULT_PENDING_LOOPS }, false>, "qspinlock-native", "klock-qspinlock", "native,pending-loops=512",
                "klock qspinlock with the kernel's native slow path: pure spinning, strict FIFO (the 2018 mail's 'before' column)"),
            (QSpin<0, false>, "qspinlock-pl0", "klock-qspinlock", "native,pending-loops=0",
                "klock native qspinlock without the pending->locked wait (the 2018 mail's 'patched' column)"),
            (QSpinRmw, "qspinlock-rmw", "klock-qspinlock", "paravirt,pending-loops=512,unlock=rmw",
                "klock::SpinLock through its raw calls, always unlocking with the 32-bit RMW (qspinlock uses whichever of byte store and RMW this CPU runs faster)"),
            (KMutex<{ klock::mutex::OWNER_SPIN }>, "mutex", "klock-mutex", "owner-spin",
                "klock::Mutex: spins while the owner runs (OSQ-gated), else sleeps on a futex; hand-off; spinning turned off while the lock's adaptive test finds sleeping faster"),
            (KMutex<{ klock::mutex::OWNER_SPIN_FIXED }>, "mutex-fixed", "klock-mutex", "owner-spin,adapt=off",
                "klock::Mutex without the adaptive test: always spins on a running owner (the kernel's OWNER_SPIN exactly)"),
            (OnBpf<KMutex<{ klock::mutex::OWNER_SPIN }>>, "mutex-bpf", "klock-mutex", "owner-spin,oncpu=bpf",
                "klock::Mutex under the exact eBPF owner-running oracle (feature bpf, root)"),
            (KMutex<{ klock::mutex::NO_OWNER_SPIN }>, "mutex-nospin", "klock-mutex", "no-owner-spin",
                "klock::Mutex with owner spinning off (kernel NO_OWNER_SPIN): contended lockers sleep"),
            (KMutex<{ klock::mutex::OWNER_SPIN }, klock::RawQSpinLock>, "mutex-qwait", "klock-mutex", "owner-spin,wait_lock=qspinlock",
                "klock::Mutex with its wait list under a qspinlock (the kernel's choice) instead of the yielding lock"),
            (QRw, "qrwlock", "klock-qrwlock", "default",
                "klock::RwLock: queued rwlock, FIFO wait queue on a qspinlock, waiting writer blocks new readers"),
            (RwSem<{ klock::rwsem::OFF }, { klock::rwsem::OFF }>, "rwsem-nospin", "klock-rwsem", "reader-spin-off",
                "klock::RwSem, reader optimistic spinning off (the 2019 mail's 'before rspin')"),
            (RwSem<{ klock::rwsem::ON }, { klock::rwsem::OFF }>, "rwsem-rspin", "klock-rwsem", "reader-spin-no-adaptive",
                "klock::RwSem, reader spinning on, no adaptive disabling (the 2019 mail's 'before patch')"),
            (RwSem<{ klock::rwsem::ON }, { klock::rwsem::ON }>, "rwsem", "klock-rwsem", "reader-spin-adaptive",
                "klock::RwSem, reader spinning + adaptive disabling (the 2019 mail's 'after patch')"),
            (RwSem<{ klock::rwsem::STEAL }, { klock::rwsem::OFF }>, "rwsem-steal", "klock-rwsem", "reader-steal",
                "klock::RwSem, readers steal a free lock instead of spinning (mainline's later design)"),
            (OnBpf<RwSem<{ klock::rwsem::ON }, { klock::rwsem::ON }>>, "rwsem-bpf", "klock-rwsem", "reader-spin-adaptive,oncpu=bpf",
                "klock::RwSem (as rwsem) under the exact eBPF owner-running oracle (feature bpf, root)"),
            (StdMutex, "std-mutex", "std-mutex", "default",
                "std::sync::Mutex (futex, spin 100 then park)"),
            (ParkingLotMutex, "parking_lot", "parking_lot-mutex", "default",
                "parking_lot::Mutex (spin with backoff, then park)"),
            (PthreadNormal, "pthread", "pthread-mutex", "normal",
                "glibc pthread_mutex_t, PTHREAD_MUTEX_NORMAL"),
            (PthreadAdaptive, "pthread-adaptive", "pthread-mutex", "adaptive",
                "glibc pthread_mutex_t, PTHREAD_MUTEX_ADAPTIVE_NP"),
            (PthreadSpin, "pthread-spin", "pthread-spinlock", "default",
                "glibc pthread_spinlock_t (never sleeps)"),
            (TicketLock, "ticket", "ticket", "default",
                "baseline ticket spinlock (FIFO, never sleeps)"),
            (TtasLock, "ttas", "ttas", "default",
                "baseline test-and-test-and-set spinlock"),
            (StdRwLock, "std-rwlock", "std-rwlock", "default",
                "std::sync::RwLock"),
            (ParkingLotRwLock, "parking_lot-rwlock", "parking_lot-rwlock", "default",
                "parking_lot::RwLock"),
            (PthreadRwLock, "pthread-rwlock", "pthread-rwlock", "default",
                "glibc pthread_rwlock_t (reader-preferring default)"),
            // --- rtmutex
            (RtSpin, "rtmutex", "klock-rtmutex", "top-waiter-spin",
                "klock::RtMutex: PI futex (LOCK_PI2/UNLOCK_PI), userspace top-waiter spinning, non-RT waiters wait in userspace"),
            (RtKwait, "rtmutex-kwait", "klock-rtmutex", "top-waiter-spin-kernel-wait",
                "klock::RtMutex, top-waiter spinning but every other waiter queued in the kernel (as docs/design.md describes the kernel's)"),
            (RtNoSpin, "rtmutex-nospin", "klock-rtmutex", "no-spin",
                "klock::RtMutex with userspace spinning off (fast paths + kernel PI only)"),
            (PthreadPi, "pthread-pi", "pthread-mutex", "prio-inherit",
                "glibc pthread_mutex_t with PTHREAD_PRIO_INHERIT"),
            (PiFutexLock, "pi-futex", "pi-futex", "raw",
                "raw PI futex: CAS fast paths, FUTEX_LOCK_PI2/UNLOCK_PI, no userspace spinning"),
        }
    };
}

/// One run of the common workload.
pub type RunFn = fn(&Workload) -> Result<RunOutcome, String>;

/// A lock as the CLI names it.
#[derive(Clone, Copy)]
pub struct LockEntry {
    /// CLI and table name (unique).
    pub id: &'static str,
    /// JSON `lock` field.
    pub lock: &'static str,
    /// JSON `variant` field.
    pub variant: &'static str,
    /// Whether the lock has a real shared (read) side ([`BenchLock::SHARED`]).
    pub shared: bool,
    /// Whether a waiter eventually sleeps ([`BenchLock::SLEEPS`]).
    pub sleeps: bool,
    /// Whether lockstat can track it: it has a real try ([`TryBench::TRY`]).
    pub tracked: bool,
    /// One line for `--list`.
    pub about: &'static str,
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
        lock: &'static str,
        variant: &'static str,
        about: &'static str,
    ) -> Self {
        LockEntry {
            id,
            lock,
            variant,
            shared: L::SHARED,
            sleeps: L::SLEEPS,
            tracked: L::TRY,
            about,
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

/// All locks, klock's first, then the peers.
pub fn all() -> Vec<LockEntry> {
    macro_rules! entries {
        ($(($ty:ty, $id:literal, $lock:literal, $variant:literal, $about:literal)),* $(,)?) => {
            vec![$(LockEntry::of::<$ty>($id, $lock, $variant, $about)),*]
        };
    }
    locks!(entries)
}

/// Look up `id`; the error lists the valid names.
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
        ($(($ty:ty, $id:literal, $lock:literal, $variant:literal, $about:literal)),* $(,)?) => {
            match id {
                $($id => Some(G::with::<$ty>()),)*
                _ => None,
            }
        };
    }
    locks!(pick)
}
