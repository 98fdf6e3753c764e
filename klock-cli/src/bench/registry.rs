//! Every lock the benchmark knows, by name.

use super::klocks::*;
use super::peers::*;
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
}

macro_rules! entry {
    ($ty:ty, $id:expr, $lock:expr, $variant:expr, $shared:expr, $about:expr) => {
        LockEntry {
            id: $id,
            lock: $lock,
            variant: $variant,
            shared: $shared,
            about: $about,
            run: run::<$ty>,
        }
    };
}

/// All locks, klock's first, then the peers.
pub fn all() -> Vec<LockEntry> {
    vec![
        entry!(
            QSpin<512>,
            "qspinlock",
            "klock-qspinlock",
            "pending-loops=512",
            false,
            "klock::SpinLock: queued spinlock, pending bit, bounded pending wait (kernel default)"
        ),
        entry!(
            QSpin<0>,
            "qspinlock-pl0",
            "klock-qspinlock",
            "pending-loops=0",
            false,
            "klock qspinlock without the pending->locked wait (the seed's 'patched' column)"
        ),
        entry!(
            RwSem<{ klock::rwsem::OFF }, { klock::rwsem::OFF }>,
            "rwsem-nospin",
            "klock-rwsem",
            "reader-spin-off",
            true,
            "klock::RwSem, reader optimistic spinning off (the seed's 'before rspin')"
        ),
        entry!(
            RwSem<{ klock::rwsem::ON }, { klock::rwsem::OFF }>,
            "rwsem-rspin",
            "klock-rwsem",
            "reader-spin-no-adaptive",
            true,
            "klock::RwSem, reader spinning on, no adaptive disabling (the seed's 'before patch')"
        ),
        entry!(
            RwSem<{ klock::rwsem::ON }, { klock::rwsem::ON }>,
            "rwsem",
            "klock-rwsem",
            "reader-spin-adaptive",
            true,
            "klock::RwSem, reader spinning + adaptive disabling (the seed's 'after patch')"
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
