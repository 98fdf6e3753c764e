//! The locks klock is measured against.

// The lock traits, re-exported: the peers are where most code meets them.
pub use super::lock::{with_oracle, BenchLock, TryBench};
pub use super::raw::{Downgrade, NoDowngrade, RawM, RawRw, Timed, Untimed};
use std::cell::UnsafeCell;
use std::hint::spin_loop;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

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

// The glibc peers sit inline, next to the data they protect, as a
// `pthread_mutex_t` in a C struct does (and as every other lock here
// does). Each is initialised as a value and moved into place before its
// first use: glibc's unlocked, never-used pthread objects hold no pointer
// to themselves, so such a value is the same bytes as the object's static
// initializer (`PTHREAD_MUTEX_INITIALIZER`, its `_NP` kinds,
// `PTHREAD_RWLOCK_INITIALIZER`), which C code copies into place this way.

/// glibc `pthread_mutex_t` of a given type.
pub struct PthreadMutex<const KIND: libc::c_int>(UnsafeCell<libc::pthread_mutex_t>);

// SAFETY: pthread mutexes are made to be shared between threads.
unsafe impl<const K: libc::c_int> Send for PthreadMutex<K> {}
unsafe impl<const K: libc::c_int> Sync for PthreadMutex<K> {}

/// `PTHREAD_MUTEX_NORMAL`.
pub type PthreadNormal = PthreadMutex<{ libc::PTHREAD_MUTEX_NORMAL }>;
/// `PTHREAD_MUTEX_ADAPTIVE_NP` (glibc spins a bounded, adaptive count, then sleeps).
pub type PthreadAdaptive = PthreadMutex<{ libc::PTHREAD_MUTEX_ADAPTIVE_NP }>;

impl<const KIND: libc::c_int> BenchLock for PthreadMutex<KIND> {
    fn new() -> Self {
        let m = UnsafeCell::new(libc::PTHREAD_MUTEX_INITIALIZER);
        // SAFETY: attr is initialised before use and destroyed after; `m`
        // is moved before its first use only (see above).
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
pub struct PthreadSpin(UnsafeCell<libc::pthread_spinlock_t>);

// SAFETY: made to be shared between threads.
unsafe impl Send for PthreadSpin {}
unsafe impl Sync for PthreadSpin {}

impl BenchLock for PthreadSpin {
    /// Never sleeps: a pure spinlock.
    const SLEEPS: bool = false;

    fn new() -> Self {
        let s = UnsafeCell::new(0);
        // SAFETY: a plain int; moved before its first use only.
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
pub struct PthreadRwLock(UnsafeCell<libc::pthread_rwlock_t>);

// SAFETY: made to be shared between threads.
unsafe impl Send for PthreadRwLock {}
unsafe impl Sync for PthreadRwLock {}

impl BenchLock for PthreadRwLock {
    const SHARED: bool = true;

    fn new() -> Self {
        let l = UnsafeCell::new(libc::PTHREAD_RWLOCK_INITIALIZER);
        // SAFETY: moved before its first use only (see above).
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

/// Baseline: test-and-test-and-set (spin on a read, then swap). Unpadded,
/// like every other lock here: it shares its line with the data after it.
pub struct TtasLock(AtomicBool);

impl BenchLock for TtasLock {
    /// Never sleeps: a pure spinlock.
    const SLEEPS: bool = false;

    fn new() -> Self {
        Self(AtomicBool::new(false))
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
