//! Every lock the benchmark knows, by name.

use super::klocks::*;
use super::peers::*;
use super::stat::{Runners, Stat};
use super::treelock;
use super::workload::{run, RunOutcome, Workload};

/// A lock as the CLI names it.
pub struct LockEntry {
    /// CLI and table name (unique).
    pub id: &'static str,
    /// JSON `lock` field.
    pub lock: &'static str,
    /// JSON `variant` field.
    pub variant: &'static str,
    /// Whether the lock has a real shared (read) side.
    pub shared: bool,
    /// One line for `--list`.
    pub about: &'static str,
    /// Run one measurement with a fresh lock of this type.
    pub run: fn(&Workload) -> Result<RunOutcome, String>,
    /// How the treelock suite and `klock stat` run this type.
    pub runners: Runners,
    /// The oracle its runs need ([`BenchLock::oracle`]).
    pub oracle: Option<klock::oncpu::OracleKind>,
}

/// `entry!(Type, id, lock, variant, shared, about)`; a type without a
/// `TryBench` impl (no lockstat tracking) adds `[untracked]` after `Type`.
macro_rules! entry {
    ($ty:ty $( [$untracked:ident] )?, $id:expr, $lock:expr, $variant:expr, $shared:expr, $about:expr) => {
        LockEntry {
            id: $id,
            lock: $lock,
            variant: $variant,
            shared: $shared,
            about: $about,
            run: run::<$ty>,
            runners: entry!(@runners $ty $( [$untracked] )?),
            oracle: <$ty as BenchLock>::oracle(),
        }
    };
    (@runners $ty:ty) => {
        Runners {
            pi: super::pi::runner::<$ty>(),
            tree: treelock::run::<$ty>,
            tree_tracked: Some(treelock::run::<Stat<$ty>>),
            tracked: Some(run::<Stat<$ty>>),
        }
    };
    (@runners $ty:ty [untracked]) => {
        Runners {
            pi: super::pi::runner::<$ty>(),
            tree: treelock::run::<$ty>,
            tree_tracked: None,
            tracked: None,
        }
    };
}

impl LockEntry {
    /// Whether this lock runs under the eBPF oracle (feature `bpf`, root).
    pub fn needs_bpf(&self) -> bool {
        self.oracle == Some(klock::oncpu::OracleKind::Bpf)
    }
}

/// All locks, klock's first, then the peers.
pub fn all() -> Vec<LockEntry> {
    vec![
        entry!(
            QSpin<{ klock::qspinlock::DEFAULT_PENDING_LOOPS }>,
            "qspinlock",
            "klock-qspinlock",
            "paravirt,pending-loops=512",
            false,
            "klock::SpinLock: queued spinlock, pending bit; paravirt slow path: waiters spin while it pays, then sleep; steals while the queue head sleeps"
        ),
        entry!(
            QSpin<{ klock::qspinlock::DEFAULT_PENDING_LOOPS }, false>,
            "qspinlock-native",
            "klock-qspinlock",
            "native,pending-loops=512",
            false,
            "klock qspinlock with the kernel's native slow path: pure spinning, strict FIFO (the 2018 mail's 'before' column)"
        ),
        entry!(
            QSpin<0, false>,
            "qspinlock-pl0",
            "klock-qspinlock",
            "native,pending-loops=0",
            false,
            "klock native qspinlock without the pending->locked wait (the 2018 mail's 'patched' column)"
        ),
        entry!(
            QSpinRmw,
            "qspinlock-rmw",
            "klock-qspinlock",
            "paravirt,pending-loops=512,unlock=rmw",
            false,
            "klock::SpinLock through its raw calls, always unlocking with the 32-bit RMW (qspinlock uses whichever of byte store and RMW this CPU runs faster)"
        ),
        entry!(
            KMutex<{ klock::mutex::OWNER_SPIN }>,
            "mutex",
            "klock-mutex",
            "owner-spin",
            false,
            "klock::Mutex: spins while the owner runs (OSQ-gated), else sleeps on a futex; hand-off; spinning turned off while the lock's adaptive test finds sleeping faster"
        ),
        entry!(
            KMutex<{ klock::mutex::OWNER_SPIN_FIXED }>,
            "mutex-fixed",
            "klock-mutex",
            "owner-spin,adapt=off",
            false,
            "klock::Mutex without the adaptive test: always spins on a running owner (the kernel's OWNER_SPIN exactly)"
        ),
        entry!(
            OnBpf<KMutex<{ klock::mutex::OWNER_SPIN }>>,
            "mutex-bpf",
            "klock-mutex",
            "owner-spin,oncpu=bpf",
            false,
            "klock::Mutex under the exact eBPF owner-running oracle (feature bpf, root)"
        ),
        entry!(
            KMutex<{ klock::mutex::NO_OWNER_SPIN }>,
            "mutex-nospin",
            "klock-mutex",
            "no-owner-spin",
            false,
            "klock::Mutex with owner spinning off (kernel NO_OWNER_SPIN): contended lockers sleep"
        ),
        entry!(
            KMutex<{ klock::mutex::OWNER_SPIN }, klock::RawQSpinLock>,
            "mutex-qwait",
            "klock-mutex",
            "owner-spin,wait_lock=qspinlock",
            false,
            "klock::Mutex with its wait list under a qspinlock (the kernel's choice) instead of the yielding lock"
        ),
        entry!(
            QRw,
            "qrwlock",
            "klock-qrwlock",
            "default",
            true,
            "klock::RwLock: queued rwlock, FIFO wait queue on a qspinlock, waiting writer blocks new readers"
        ),
        entry!(
            RwSem<{ klock::rwsem::OFF }, { klock::rwsem::OFF }>,
            "rwsem-nospin",
            "klock-rwsem",
            "reader-spin-off",
            true,
            "klock::RwSem, reader optimistic spinning off (the 2019 mail's 'before rspin')"
        ),
        entry!(
            RwSem<{ klock::rwsem::ON }, { klock::rwsem::OFF }>,
            "rwsem-rspin",
            "klock-rwsem",
            "reader-spin-no-adaptive",
            true,
            "klock::RwSem, reader spinning on, no adaptive disabling (the 2019 mail's 'before patch')"
        ),
        entry!(
            RwSem<{ klock::rwsem::ON }, { klock::rwsem::ON }>,
            "rwsem",
            "klock-rwsem",
            "reader-spin-adaptive",
            true,
            "klock::RwSem, reader spinning + adaptive disabling (the 2019 mail's 'after patch')"
        ),
        entry!(
            RwSem<{ klock::rwsem::STEAL }, { klock::rwsem::OFF }>,
            "rwsem-steal",
            "klock-rwsem",
            "reader-steal",
            true,
            "klock::RwSem, readers steal a free lock instead of spinning (mainline's later design)"
        ),
        entry!(
            OnBpf<RwSem<{ klock::rwsem::ON }, { klock::rwsem::ON }>>,
            "rwsem-bpf",
            "klock-rwsem",
            "reader-spin-adaptive,oncpu=bpf",
            true,
            "klock::RwSem (as rwsem) under the exact eBPF owner-running oracle (feature bpf, root)"
        ),
        entry!(
            StdMutex,
            "std-mutex",
            "std-mutex",
            "default",
            false,
            "std::sync::Mutex (futex, spin 100 then park)"
        ),
        entry!(
            ParkingLotMutex,
            "parking_lot",
            "parking_lot-mutex",
            "default",
            false,
            "parking_lot::Mutex (spin with backoff, then park)"
        ),
        entry!(
            PthreadNormal,
            "pthread",
            "pthread-mutex",
            "normal",
            false,
            "glibc pthread_mutex_t, PTHREAD_MUTEX_NORMAL"
        ),
        entry!(
            PthreadAdaptive,
            "pthread-adaptive",
            "pthread-mutex",
            "adaptive",
            false,
            "glibc pthread_mutex_t, PTHREAD_MUTEX_ADAPTIVE_NP"
        ),
        entry!(
            PthreadSpin,
            "pthread-spin",
            "pthread-spinlock",
            "default",
            false,
            "glibc pthread_spinlock_t (never sleeps)"
        ),
        entry!(
            TicketLock,
            "ticket",
            "ticket",
            "default",
            false,
            "baseline ticket spinlock (FIFO, never sleeps)"
        ),
        entry!(
            TtasLock,
            "ttas",
            "ttas",
            "default",
            false,
            "baseline test-and-test-and-set spinlock"
        ),
        entry!(
            StdRwLock,
            "std-rwlock",
            "std-rwlock",
            "default",
            true,
            "std::sync::RwLock"
        ),
        entry!(
            ParkingLotRwLock,
            "parking_lot-rwlock",
            "parking_lot-rwlock",
            "default",
            true,
            "parking_lot::RwLock"
        ),
        entry!(
            PthreadRwLock,
            "pthread-rwlock",
            "pthread-rwlock",
            "default",
            true,
            "glibc pthread_rwlock_t (reader-preferring default)"
        ),
        // --- rtmutex
        entry!(
            RtSpin,
            "rtmutex",
            "klock-rtmutex",
            "top-waiter-spin",
            false,
            "klock::RtMutex: PI futex (LOCK_PI2/UNLOCK_PI), userspace top-waiter spinning, non-RT waiters wait in userspace"
        ),
        entry!(
            RtKwait,
            "rtmutex-kwait",
            "klock-rtmutex",
            "top-waiter-spin-kernel-wait",
            false,
            "klock::RtMutex, top-waiter spinning but every other waiter queued in the kernel (as docs/design.md describes the kernel's)"
        ),
        entry!(
            RtNoSpin,
            "rtmutex-nospin",
            "klock-rtmutex",
            "no-spin",
            false,
            "klock::RtMutex with userspace spinning off (fast paths + kernel PI only)"
        ),
        entry!(
            super::pi::PthreadPi[untracked],
            "pthread-pi",
            "pthread-mutex",
            "prio-inherit",
            false,
            "glibc pthread_mutex_t with PTHREAD_PRIO_INHERIT"
        ),
        entry!(
            super::pi::PiFutexLock[untracked],
            "pi-futex",
            "pi-futex",
            "raw",
            false,
            "raw PI futex: CAS fast paths, FUTEX_LOCK_PI2/UNLOCK_PI, no userspace spinning"
        ),
    ]
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
