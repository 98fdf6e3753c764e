//! Every lock `klock torture --type` knows. Adding a lock is one line:
//! `klock!(ADAPTER<RAW, FLAGS…>, "id", "about")` — see [`super::lock`] for
//! the adapters and what each capability flag needs.

use super::busted::{LockBusted, LockDeadlock, LockLostWake, RwBusted};
use super::engine::{run, Config, Outcome};
use super::lock::TortureLock;
use crate::bench::klocks::{KMutex, QRw, QSpin, RtKwait, RtNoSpin, RtSpin, RwSem};
use crate::bench::peers::{
    ParkingLotMutex, ParkingLotRwLock, PthreadAdaptive, PthreadNormal, PthreadRwLock, PthreadSpin,
    StdMutex, StdRwLock, TicketLock, TtasLock,
};
use klock::mutex::{NO_OWNER_SPIN, OWNER_SPIN};

/// One `--type`.
pub struct TortureType {
    pub id: &'static str,
    pub about: &'static str,
    /// One of klock's own locks (CI tortures every one of these).
    pub klock: bool,
    /// Deliberately broken (expected to FAIL).
    pub broken: bool,
    /// Not listed (test-only).
    pub hidden: bool,
    pub shared: bool,
    pub try_: bool,
    pub timed: bool,
    pub downgrade: bool,
    pub run: fn(&Config) -> Outcome,
}

macro_rules! entry {
    ($ty:ty, $id:expr, $about:expr, $klock:expr, $broken:expr, $hidden:expr) => {
        TortureType {
            id: $id,
            about: $about,
            klock: $klock,
            broken: $broken,
            hidden: $hidden,
            shared: <$ty as TortureLock>::SHARED,
            try_: <$ty as TortureLock>::TRY,
            timed: <$ty as TortureLock>::TIMED,
            downgrade: <$ty as TortureLock>::DOWNGRADE,
            run: run::<$ty>,
        }
    };
}

/// A klock lock (must SUCCEED; CI runs each).
macro_rules! klock {
    ($ty:ty, $id:expr, $about:expr) => {
        entry!($ty, $id, $about, true, false, false)
    };
}

/// A peer lock (must SUCCEED).
macro_rules! peer {
    ($ty:ty, $id:expr, $about:expr) => {
        entry!($ty, $id, $about, false, false, false)
    };
}

/// A deliberately broken lock (must FAIL); `hidden` ones are test-only.
macro_rules! broken {
    ($ty:ty, $id:expr, $about:expr, hidden: $hidden:expr) => {
        entry!($ty, $id, $about, false, true, $hidden)
    };
}

/// Every type: klock's, then the peers, then the broken ones.
pub fn all() -> Vec<TortureType> {
    vec![
        klock!(
            QSpin<{ klock::qspinlock::DEFAULT_PENDING_LOOPS }>,
            "qspinlock",
            "klock::SpinLock: queued spinlock (pending wait 512), paravirt slow path (spin, then sleep)"
        ),
        klock!(
            QSpin<{ klock::qspinlock::DEFAULT_PENDING_LOOPS }, false>,
            "qspinlock-native",
            "klock queued spinlock, the kernel's native slow path (pure spinning)"
        ),
        klock!(
            QSpin<0, false>,
            "qspinlock-pl0",
            "klock native queued spinlock without the pending->locked wait"
        ),
        klock!(
            KMutex<OWNER_SPIN>,
            "mutex",
            "klock::Mutex: spins on a running owner (kernel OWNER_SPIN) unless its adaptive test finds sleeping faster"
        ),
        klock!(
            KMutex<{ klock::mutex::OWNER_SPIN_FIXED }>,
            "mutex-fixed",
            "klock mutex, always spins on a running owner (no adaptive test)"
        ),
        klock!(
            KMutex<NO_OWNER_SPIN>,
            "mutex-nospin",
            "klock mutex, never spins (sleeps at once)"
        ),
        klock!(
            RwSem<{ klock::rwsem::ON }, { klock::rwsem::ON }>,
            "rwsem",
            "klock::RwSem: rw-semaphore, reader optimistic spinning, adaptive disabling"
        ),
        klock!(
            RwSem<{ klock::rwsem::ON }, { klock::rwsem::OFF }>,
            "rwsem-rspin",
            "klock rw-semaphore, reader spinning without adaptive disabling"
        ),
        klock!(
            RwSem<{ klock::rwsem::OFF }, { klock::rwsem::OFF }>,
            "rwsem-nospin",
            "klock rw-semaphore without reader optimistic spinning"
        ),
        klock!(
            RwSem<{ klock::rwsem::STEAL }, { klock::rwsem::OFF }>,
            "rwsem-steal",
            "klock rw-semaphore, readers steal a free lock instead of spinning (mainline's design)"
        ),
        klock!(
            RtSpin,
            "rtmutex",
            "klock::RtMutex: priority-inheritance futex mutex, top-waiter spinning, non-RT waiters wait in userspace"
        ),
        klock!(
            RtKwait,
            "rtmutex-kwait",
            "klock rt-mutex, top-waiter spinning, every other waiter in the kernel"
        ),
        klock!(
            RtNoSpin,
            "rtmutex-nospin",
            "klock rt-mutex, no userspace spinning (straight to FUTEX_LOCK_PI2)"
        ),
        klock!(
            QRw,
            "qrwlock",
            "klock::RwLock: queued rwlock (fair: a waiting writer blocks new readers)"
        ),
        peer!(StdMutex, "std-mutex", "std::sync::Mutex"),
        peer!(ParkingLotMutex, "parking_lot", "parking_lot::Mutex"),
        peer!(PthreadNormal, "pthread", "glibc pthread_mutex_t, NORMAL"),
        peer!(PthreadAdaptive, "pthread-adaptive", "glibc pthread_mutex_t, ADAPTIVE_NP"),
        peer!(PthreadSpin, "pthread-spin", "glibc pthread_spinlock_t"),
        peer!(TicketLock, "ticket", "baseline ticket spinlock"),
        peer!(TtasLock, "ttas", "baseline test-and-test-and-set spinlock"),
        peer!(StdRwLock, "std-rwlock", "std::sync::RwLock"),
        peer!(ParkingLotRwLock, "parking_lot-rwlock", "parking_lot::RwLock"),
        peer!(PthreadRwLock, "pthread-rwlock", "glibc pthread_rwlock_t"),
        broken!(LockBusted, "lock_busted", "BROKEN on purpose: takes nothing (must end in FAILURE)", hidden: false),
        broken!(RwBusted, "rwlock_busted", "BROKEN on purpose: readers ignore writers (must end in FAILURE)", hidden: false),
        broken!(LockDeadlock, "lock_deadlock", "BROKEN on purpose: loses an unlock, deadlocks (watchdog test)", hidden: true),
        broken!(LockLostWake, "lock_lostwake", "BROKEN on purpose: one waiter is never woken (watchdog test)", hidden: true),
    ]
}

/// Look up `id` (hidden types included); the error lists the valid names.
pub fn find(id: &str) -> Result<TortureType, String> {
    let mut all = all();
    match all.iter().position(|t| t.id == id) {
        Some(i) => Ok(all.swap_remove(i)),
        None => Err(format!(
            "unknown --type '{id}'. Valid types: {} (see `klock torture --list`)",
            all.iter()
                .filter(|t| !t.hidden)
                .map(|t| t.id)
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

#[cfg(test)]
mod tests {
    /// A klock type has the id, and the configuration, it has in `klock
    /// bench`, so a torture failure and a bench figure name the same lock.
    #[test]
    fn klock_types_are_bench_locks() {
        for t in super::all().iter().filter(|t| t.klock) {
            let b = crate::bench::registry::find(t.id)
                .unwrap_or_else(|e| panic!("torture type {} is not a bench lock: {e}", t.id));
            assert_eq!(b.shared, t.shared, "{}: shared side differs", t.id);
        }
    }
}
