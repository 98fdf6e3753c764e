//! The locks klock is measured against, and the [`BenchLock`] trait through
//! which every lock — peer or klock's — plugs into every suite.

pub use super::raw::{Downgrade, NoDowngrade, RawM, RawRw, Timed, Untimed};
use crossbeam_utils::CachePadded;
use std::cell::UnsafeCell;
use std::hint::spin_loop;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

/// A lock as the benchmark sees it: run a closure under the exclusive
/// (write) or shared (read) side. Exclusive-only locks use the default
/// `read`, which takes the lock exclusively.
///
/// Generic closures keep every (lock, workload) pair monomorphized: the
/// harness adds no indirect call to any lock's path.
pub trait BenchLock: Send + Sync + 'static {
    /// Whether a waiter eventually sleeps (`false`: a pure spinlock, which
    /// the pi suite refuses: a real-time waiter spinning on one CPU would
    /// starve the owner for good).
    const SLEEPS: bool = true;
    /// Whether the lock has priority inheritance (a PI futex): the pi
    /// suite's watchdog must then count no stall.
    const PRIORITY_INHERITANCE: bool = false;
    /// Whether `read` really shares: readers run beside each other.
    const SHARED: bool = false;
    /// A fresh, unlocked lock.
    fn new() -> Self;
    /// Run `f` holding the lock exclusively.
    fn write<R>(&self, f: impl FnOnce() -> R) -> R;
    /// Run `f` holding the lock shared (exclusively if the lock has no shared mode).
    #[inline]
    fn read<R>(&self, f: impl FnOnce() -> R) -> R {
        self.write(f)
    }
    /// Process-wide event counters of this lock type (name, count), if it has any.
    fn events() -> Vec<(&'static str, u64)> {
        Vec::new()
    }
    /// The owner-running oracle this lock must run under (`None`: the
    /// process's, chosen at start-up). See [`with_oracle`].
    fn oracle() -> Option<klock::oncpu::OracleKind> {
        None
    }
}

/// Run `f` under lock type `L`'s oracle (if it names one), then switch
/// back to the oracle in use before — so the eBPF program is attached
/// only during the runs that measure it and costs the others nothing.
pub fn with_oracle<L: BenchLock, R>(f: impl FnOnce() -> Result<R, String>) -> Result<R, String> {
    use klock::oncpu::{oracle_kind, use_oracle, OracleKind};
    let Some(want) = L::oracle() else {
        return f();
    };
    let before = oracle_kind().unwrap_or(OracleKind::Budget);
    if before == want {
        return f();
    }
    use_oracle(want)?;
    let r = f();
    use_oracle(before)?;
    r
}

/// `parking_lot::Mutex`.
pub type ParkingLotMutex = RawM<parking_lot::RawMutex, Timed>;
/// `parking_lot::RwLock`.
pub type ParkingLotRwLock = RawRw<parking_lot::RawRwLock, Timed, Downgrade>;

/// `std::sync::Mutex`.
pub struct StdMutex(std::sync::Mutex<()>);

impl BenchLock for StdMutex {
    fn new() -> Self {
        Self(std::sync::Mutex::new(()))
    }
    #[inline]
    fn write<T>(&self, f: impl FnOnce() -> T) -> T {
        let _g = self.0.lock().unwrap_or_else(|e| e.into_inner());
        f()
    }
}

/// `std::sync::RwLock`.
pub struct StdRwLock(std::sync::RwLock<()>);

impl BenchLock for StdRwLock {
    const SHARED: bool = true;

    fn new() -> Self {
        Self(std::sync::RwLock::new(()))
    }
    #[inline]
    fn write<T>(&self, f: impl FnOnce() -> T) -> T {
        let _g = self.0.write().unwrap_or_else(|e| e.into_inner());
        f()
    }
    #[inline]
    fn read<T>(&self, f: impl FnOnce() -> T) -> T {
        let _g = self.0.read().unwrap_or_else(|e| e.into_inner());
        f()
    }
}

// The glibc peers below call glibc's own pthread functions through the
// libc crate: measuring glibc's implementation is their point, and rustix
// (raw syscalls) has no pthread locks.

/// Panics with a clear message if a pthread call failed (they return an errno).
fn check(call: &str, rc: libc::c_int) {
    assert_eq!(
        rc,
        0,
        "{call} failed: {}",
        std::io::Error::from_raw_os_error(rc)
    );
}

/// glibc `pthread_mutex_t` of a given type (boxed: pthread objects must not move).
pub struct PthreadMutex<const KIND: libc::c_int>(Box<UnsafeCell<libc::pthread_mutex_t>>);

// SAFETY: pthread mutexes are made to be shared between threads.
unsafe impl<const K: libc::c_int> Send for PthreadMutex<K> {}
unsafe impl<const K: libc::c_int> Sync for PthreadMutex<K> {}

/// `PTHREAD_MUTEX_NORMAL`.
pub type PthreadNormal = PthreadMutex<{ libc::PTHREAD_MUTEX_NORMAL }>;
/// `PTHREAD_MUTEX_ADAPTIVE_NP` (glibc spins a bounded, adaptive count, then sleeps).
pub type PthreadAdaptive = PthreadMutex<{ libc::PTHREAD_MUTEX_ADAPTIVE_NP }>;

impl<const KIND: libc::c_int> BenchLock for PthreadMutex<KIND> {
    fn new() -> Self {
        let m = Box::new(UnsafeCell::new(libc::PTHREAD_MUTEX_INITIALIZER));
        // SAFETY: attr is initialised before use and destroyed after; `m` is
        // boxed so its address is stable from init on.
        unsafe {
            let mut attr = std::mem::zeroed::<libc::pthread_mutexattr_t>();
            check(
                "pthread_mutexattr_init",
                libc::pthread_mutexattr_init(&mut attr),
            );
            check(
                "pthread_mutexattr_settype",
                libc::pthread_mutexattr_settype(&mut attr, KIND),
            );
            check(
                "pthread_mutex_init",
                libc::pthread_mutex_init(m.get(), &attr),
            );
            libc::pthread_mutexattr_destroy(&mut attr);
        }
        Self(m)
    }
    #[inline]
    fn write<T>(&self, f: impl FnOnce() -> T) -> T {
        // SAFETY: initialised in `new`; lock/unlock are paired on this thread.
        unsafe { libc::pthread_mutex_lock(self.0.get()) };
        let r = f();
        unsafe { libc::pthread_mutex_unlock(self.0.get()) };
        r
    }
}

impl<const K: libc::c_int> Drop for PthreadMutex<K> {
    fn drop(&mut self) {
        // SAFETY: unlocked (we own it exclusively) and initialised.
        unsafe { libc::pthread_mutex_destroy(self.0.get()) };
    }
}

/// glibc `pthread_spinlock_t`.
pub struct PthreadSpin(Box<UnsafeCell<libc::pthread_spinlock_t>>);

// SAFETY: made to be shared between threads.
unsafe impl Send for PthreadSpin {}
unsafe impl Sync for PthreadSpin {}

impl BenchLock for PthreadSpin {
    /// Never sleeps: a pure spinlock.
    const SLEEPS: bool = false;

    fn new() -> Self {
        let s = Box::new(UnsafeCell::new(0));
        // SAFETY: boxed, so the address is stable from init on.
        check("pthread_spin_init", unsafe {
            libc::pthread_spin_init(s.get(), libc::PTHREAD_PROCESS_PRIVATE)
        });
        Self(s)
    }
    #[inline]
    fn write<T>(&self, f: impl FnOnce() -> T) -> T {
        // SAFETY: initialised in `new`.
        unsafe { libc::pthread_spin_lock(self.0.get()) };
        let r = f();
        unsafe { libc::pthread_spin_unlock(self.0.get()) };
        r
    }
}

impl Drop for PthreadSpin {
    fn drop(&mut self) {
        // SAFETY: initialised, unlocked.
        unsafe { libc::pthread_spin_destroy(self.0.get()) };
    }
}

/// glibc `pthread_rwlock_t` (default attributes: reader-preferring).
pub struct PthreadRwLock(Box<UnsafeCell<libc::pthread_rwlock_t>>);

// SAFETY: made to be shared between threads.
unsafe impl Send for PthreadRwLock {}
unsafe impl Sync for PthreadRwLock {}

impl BenchLock for PthreadRwLock {
    const SHARED: bool = true;

    fn new() -> Self {
        let l = Box::new(UnsafeCell::new(libc::PTHREAD_RWLOCK_INITIALIZER));
        // SAFETY: boxed, so the address is stable from init on.
        check("pthread_rwlock_init", unsafe {
            libc::pthread_rwlock_init(l.get(), std::ptr::null())
        });
        Self(l)
    }
    #[inline]
    fn write<T>(&self, f: impl FnOnce() -> T) -> T {
        // SAFETY: initialised in `new`.
        unsafe { libc::pthread_rwlock_wrlock(self.0.get()) };
        let r = f();
        unsafe { libc::pthread_rwlock_unlock(self.0.get()) };
        r
    }
    #[inline]
    fn read<T>(&self, f: impl FnOnce() -> T) -> T {
        // SAFETY: initialised in `new`.
        unsafe { libc::pthread_rwlock_rdlock(self.0.get()) };
        let r = f();
        unsafe { libc::pthread_rwlock_unlock(self.0.get()) };
        r
    }
}

impl Drop for PthreadRwLock {
    fn drop(&mut self) {
        // SAFETY: initialised, unlocked.
        unsafe { libc::pthread_rwlock_destroy(self.0.get()) };
    }
}

/// Baseline: a ticket lock (FIFO; every waiter spins on the same line —
/// the pre-2014 kernel spinlock). Both halves share one cache line, as in
/// the kernel's.
pub struct TicketLock {
    next: AtomicU32,
    owner: AtomicU32,
}

impl BenchLock for TicketLock {
    /// Never sleeps: a pure spinlock.
    const SLEEPS: bool = false;

    fn new() -> Self {
        Self {
            next: AtomicU32::new(0),
            owner: AtomicU32::new(0),
        }
    }
    #[inline]
    fn write<T>(&self, f: impl FnOnce() -> T) -> T {
        let me = self.next.fetch_add(1, Ordering::Relaxed);
        // Acquire pairs with the Release store of the previous holder.
        while self.owner.load(Ordering::Acquire) != me {
            spin_loop();
        }
        let r = f();
        // Only the holder writes `owner`, so load+store is enough.
        self.owner.store(me.wrapping_add(1), Ordering::Release);
        r
    }
}

/// Baseline: test-and-test-and-set (spin on a read, then swap).
pub struct TtasLock(CachePadded<AtomicBool>);

impl BenchLock for TtasLock {
    /// Never sleeps: a pure spinlock.
    const SLEEPS: bool = false;

    fn new() -> Self {
        Self(CachePadded::new(AtomicBool::new(false)))
    }
    #[inline]
    fn write<T>(&self, f: impl FnOnce() -> T) -> T {
        // Acquire on the successful swap pairs with the Release store in unlock.
        while self.0.swap(true, Ordering::Acquire) {
            while self.0.load(Ordering::Relaxed) {
                spin_loop();
            }
        }
        let r = f();
        self.0.store(false, Ordering::Release);
        r
    }
}

// --- try-locks, for `klock stat` (lockstat needs to tell a contended
// acquisition from an uncontended one) -------------------------------------

/// What a [`BenchLock`] can do beyond blocking: *try* (run `f` under the
/// lock if it is free right now, else hand `f` back), try for a while,
/// and downgrade. Each capability has a constant saying whether the lock
/// really has it; without it, the method falls back to a weaker one (a
/// timed attempt to a try, a downgrade to an exclusive hold). `klock
/// stat` and the treelock suite's tracked runs use the try to count
/// contentions; `klock torture` mixes in what the lock has.
pub trait TryBench: BenchLock {
    /// Whether the try is real. A lock without one (`false`) answers every
    /// try with `Err`, and `klock stat` and treelock's lockstat runs leave
    /// it out rather than count every acquisition as contended.
    const TRY: bool = true;
    /// Run `f` holding the lock exclusively if that takes no waiting.
    fn try_write<R, F: FnOnce() -> R>(&self, f: F) -> Result<R, F>;
    /// Run `f` holding the lock shared if that takes no waiting.
    fn try_read<R, F: FnOnce() -> R>(&self, f: F) -> Result<R, F> {
        self.try_write(f)
    }

    /// Whether the lock has a real timed acquire ([`TryBench::try_write_for`]).
    const TIMED: bool = false;
    /// Run `f` holding the lock exclusively if that takes at most `d`
    /// (without `TIMED`: a try).
    fn try_write_for<R, F: FnOnce() -> R>(&self, d: Duration, f: F) -> Result<R, F> {
        let _ = d;
        self.try_write(f)
    }
    /// The same, shared.
    fn try_read_for<R, F: FnOnce() -> R>(&self, d: Duration, f: F) -> Result<R, F> {
        let _ = d;
        self.try_read(f)
    }

    /// Whether [`TryBench::write_downgrade`] really downgrades.
    const DOWNGRADE: bool = false;
    /// Take the lock exclusively and run `w`, downgrade to shared without
    /// letting another writer in, run `r`, release. Without `DOWNGRADE`
    /// both run under the exclusive lock.
    fn write_downgrade<T>(&self, w: impl FnOnce(), r: impl FnOnce() -> T) -> T {
        self.write(|| {
            w();
            r()
        })
    }
}

impl TryBench for StdMutex {
    #[inline]
    fn try_write<T, F: FnOnce() -> T>(&self, f: F) -> Result<T, F> {
        match self.0.try_lock() {
            Ok(_g) => Ok(f()),
            Err(std::sync::TryLockError::Poisoned(e)) => {
                let _g = e.into_inner();
                Ok(f())
            }
            Err(std::sync::TryLockError::WouldBlock) => Err(f),
        }
    }
}

impl TryBench for StdRwLock {
    #[inline]
    fn try_write<T, F: FnOnce() -> T>(&self, f: F) -> Result<T, F> {
        match self.0.try_write() {
            Ok(_g) => Ok(f()),
            Err(std::sync::TryLockError::Poisoned(e)) => {
                let _g = e.into_inner();
                Ok(f())
            }
            Err(std::sync::TryLockError::WouldBlock) => Err(f),
        }
    }
    #[inline]
    fn try_read<T, F: FnOnce() -> T>(&self, f: F) -> Result<T, F> {
        match self.0.try_read() {
            Ok(_g) => Ok(f()),
            Err(std::sync::TryLockError::Poisoned(e)) => {
                let _g = e.into_inner();
                Ok(f())
            }
            Err(std::sync::TryLockError::WouldBlock) => Err(f),
        }
    }
}

impl<const KIND: libc::c_int> TryBench for PthreadMutex<KIND> {
    #[inline]
    fn try_write<T, F: FnOnce() -> T>(&self, f: F) -> Result<T, F> {
        // SAFETY: initialised in `new`; unlocked on this thread if taken.
        if unsafe { libc::pthread_mutex_trylock(self.0.get()) } != 0 {
            return Err(f);
        }
        let r = f();
        unsafe { libc::pthread_mutex_unlock(self.0.get()) };
        Ok(r)
    }
}

impl TryBench for PthreadSpin {
    #[inline]
    fn try_write<T, F: FnOnce() -> T>(&self, f: F) -> Result<T, F> {
        // SAFETY: initialised in `new`.
        if unsafe { libc::pthread_spin_trylock(self.0.get()) } != 0 {
            return Err(f);
        }
        let r = f();
        unsafe { libc::pthread_spin_unlock(self.0.get()) };
        Ok(r)
    }
}

impl TryBench for PthreadRwLock {
    #[inline]
    fn try_write<T, F: FnOnce() -> T>(&self, f: F) -> Result<T, F> {
        // SAFETY: initialised in `new`.
        if unsafe { libc::pthread_rwlock_trywrlock(self.0.get()) } != 0 {
            return Err(f);
        }
        let r = f();
        unsafe { libc::pthread_rwlock_unlock(self.0.get()) };
        Ok(r)
    }
    #[inline]
    fn try_read<T, F: FnOnce() -> T>(&self, f: F) -> Result<T, F> {
        // SAFETY: initialised in `new`.
        if unsafe { libc::pthread_rwlock_tryrdlock(self.0.get()) } != 0 {
            return Err(f);
        }
        let r = f();
        unsafe { libc::pthread_rwlock_unlock(self.0.get()) };
        Ok(r)
    }
}

impl TryBench for TicketLock {
    #[inline]
    fn try_write<T, F: FnOnce() -> T>(&self, f: F) -> Result<T, F> {
        let owner = self.owner.load(Ordering::Relaxed);
        // Free iff next == owner: take ticket `owner`. Acquire pairs with
        // the Release store of the previous holder.
        if self
            .next
            .compare_exchange(
                owner,
                owner.wrapping_add(1),
                Ordering::Acquire,
                Ordering::Relaxed,
            )
            .is_err()
        {
            return Err(f);
        }
        let r = f();
        self.owner.store(owner.wrapping_add(1), Ordering::Release);
        Ok(r)
    }
}

impl TryBench for TtasLock {
    #[inline]
    fn try_write<T, F: FnOnce() -> T>(&self, f: F) -> Result<T, F> {
        // Acquire on the swap pairs with the Release store in unlock.
        if self.0.load(Ordering::Relaxed) || self.0.swap(true, Ordering::Acquire) {
            return Err(f);
        }
        let r = f();
        self.0.store(false, Ordering::Release);
        Ok(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// Every peer excludes: 4 threads × 20,000 non-atomic increments.
    fn excludes<L: BenchLock>() {
        struct Shared<L> {
            lock: L,
            n: UnsafeCell<u64>,
        }
        // SAFETY: `n` is only touched under `lock`.
        unsafe impl<L: Sync> Sync for Shared<L> {}
        let s = Arc::new(Shared {
            lock: L::new(),
            n: UnsafeCell::new(0),
        });
        // Time-bounded as well: FIFO spinlocks (ticket) crawl when the
        // threads outnumber free CPUs, e.g. next to other tests.
        let t0 = std::time::Instant::now();
        let hs: Vec<_> = (0..4)
            .map(|_| {
                let s = s.clone();
                std::thread::spawn(move || {
                    let mut done = 0u64;
                    while done < 20_000 && t0.elapsed() < std::time::Duration::from_secs(1) {
                        // SAFETY: under the lock.
                        s.lock.write(|| unsafe { *s.n.get() += 1 });
                        done += 1;
                    }
                    done
                })
            })
            .collect();
        let total: u64 = hs.into_iter().map(|h| h.join().unwrap()).sum();
        assert!(total > 0);
        assert_eq!(unsafe { *s.n.get() }, total);
    }

    #[test]
    fn every_peer_excludes() {
        excludes::<StdMutex>();
        excludes::<StdRwLock>();
        excludes::<ParkingLotMutex>();
        excludes::<ParkingLotRwLock>();
        excludes::<PthreadNormal>();
        excludes::<PthreadAdaptive>();
        excludes::<PthreadSpin>();
        excludes::<PthreadRwLock>();
        excludes::<TicketLock>();
        excludes::<TtasLock>();
    }

    #[test]
    fn rwlocks_share_reads() {
        fn shares<L: BenchLock>() {
            let l = Arc::new(L::new());
            let l2 = l.clone();
            // Inside a read section, another thread's read must get in.
            // A lock that does not share would block it: fail after a
            // while instead of hanging (the panic ends our read section,
            // which lets the other reader finish).
            l.read(|| {
                let (tx, rx) = std::sync::mpsc::channel();
                std::thread::spawn(move || tx.send(l2.read(|| 1)));
                assert_eq!(
                    rx.recv_timeout(std::time::Duration::from_secs(10)),
                    Ok(1),
                    "a second reader could not get in during a read section"
                );
            });
        }
        shares::<StdRwLock>();
        shares::<ParkingLotRwLock>();
        shares::<PthreadRwLock>();
    }
}
