//! Any `lock_api` raw lock as a [`BenchLock`] + [`TryBench`]: [`RawM`] for
//! mutexes, [`RawRw`] for rwlocks. The optional capabilities are
//! type-level flags, so a registry line says what the lock can do:
//!
//! | type | lock_api traits needed | capabilities |
//! |---|---|---|
//! | `RawM<R>` | `RawMutex` | blocking + try |
//! | `RawM<R, Timed>` | `+ RawMutexTimed<Duration = Duration>` | + timed |
//! | `RawRw<R>` | `RawRwLock` | both sides, blocking + try |
//! | `RawRw<R, Timed>` | `+ RawRwLockTimed<Duration = Duration>` | + timed, both sides |
//! | `RawRw<R, Timed, Downgrade>` | `+ RawRwLockDowngrade` | + write-then-downgrade |

use super::lock::{BenchLock, TryBench};
use std::marker::PhantomData;
use std::time::Duration;

/// Capability flag: the lock has a timed acquire (`RawMutexTimed` /
/// `RawRwLockTimed` with `Duration = std::time::Duration`).
pub struct Timed;
/// Capability flag: no timed acquire.
pub struct Untimed;
/// Capability flag: the rwlock can downgrade exclusive to shared
/// (`RawRwLockDowngrade`).
pub struct Downgrade;
/// Capability flag: no downgrade.
pub struct NoDowngrade;

/// What the bench knows about a raw lock type beyond `lock_api`: the
/// [`BenchLock`] constants and event counters that [`RawM`] and [`RawRw`]
/// pass on.
pub trait RawInfo {
    /// [`BenchLock::SLEEPS`].
    const SLEEPS: bool = true;
    /// [`BenchLock::PRIORITY_INHERITANCE`].
    const PRIORITY_INHERITANCE: bool = false;
    /// [`BenchLock::events`].
    fn events() -> Vec<(&'static str, u64)> {
        Vec::new()
    }
}

impl RawInfo for parking_lot::RawMutex {}
impl RawInfo for parking_lot::RawRwLock {}

/// Timed acquisition of a raw mutex, by capability flag.
pub trait MutexTiming<R: lock_api::RawMutex>: Send + Sync + 'static {
    const TIMED: bool;
    /// A timed attempt (without the capability: a try).
    fn try_lock_for(r: &R, d: Duration) -> Option<R::Guard>;
}

impl<R: lock_api::RawMutex> MutexTiming<R> for Untimed {
    const TIMED: bool = false;
    fn try_lock_for(r: &R, _: Duration) -> Option<R::Guard> {
        r.try_lock()
    }
}

impl<R: lock_api::RawMutexTimed<Duration = Duration>> MutexTiming<R> for Timed {
    const TIMED: bool = true;
    fn try_lock_for(r: &R, d: Duration) -> Option<R::Guard> {
        r.try_lock_for(d)
    }
}

/// Timed acquisition of a raw rwlock, by capability flag.
pub trait RwTiming<R: lock_api::RawRwLock>: Send + Sync + 'static {
    const TIMED: bool;
    fn try_lock_exclusive_for(r: &R, d: Duration) -> Option<R::ExclusiveGuard>;
    fn try_lock_shared_for(r: &R, d: Duration) -> Option<R::SharedGuard>;
}

impl<R: lock_api::RawRwLock> RwTiming<R> for Untimed {
    const TIMED: bool = false;
    fn try_lock_exclusive_for(r: &R, _: Duration) -> Option<R::ExclusiveGuard> {
        r.try_lock_exclusive()
    }
    fn try_lock_shared_for(r: &R, _: Duration) -> Option<R::SharedGuard> {
        r.try_lock_shared()
    }
}

impl<R: lock_api::RawRwLockTimed<Duration = Duration>> RwTiming<R> for Timed {
    const TIMED: bool = true;
    fn try_lock_exclusive_for(r: &R, d: Duration) -> Option<R::ExclusiveGuard> {
        r.try_lock_exclusive_for(d)
    }
    fn try_lock_shared_for(r: &R, d: Duration) -> Option<R::SharedGuard> {
        r.try_lock_shared_for(d)
    }
}

/// Write-then-downgrade of a raw rwlock, by capability flag.
pub trait RwDowngrading<R: lock_api::RawRwLock>: Send + Sync + 'static {
    const DOWNGRADE: bool;
    /// With `g` held: run `w`, downgrade (if able), run `r`, release.
    ///
    /// # Safety
    /// `g` must be the guard of an exclusive acquisition of `lock` made on
    /// this thread.
    unsafe fn finish<T>(
        lock: &R,
        g: R::ExclusiveGuard,
        w: impl FnOnce(),
        r: impl FnOnce() -> T,
    ) -> T;
}

impl<R: lock_api::RawRwLock> RwDowngrading<R> for NoDowngrade {
    const DOWNGRADE: bool = false;
    unsafe fn finish<T>(
        lock: &R,
        g: R::ExclusiveGuard,
        w: impl FnOnce(),
        r: impl FnOnce() -> T,
    ) -> T {
        w();
        let out = r();
        // SAFETY: forwarded contract.
        unsafe { lock.unlock_exclusive(g) };
        out
    }
}

impl<R: lock_api::RawRwLockDowngrade> RwDowngrading<R> for Downgrade {
    const DOWNGRADE: bool = true;
    unsafe fn finish<T>(
        lock: &R,
        g: R::ExclusiveGuard,
        w: impl FnOnce(),
        r: impl FnOnce() -> T,
    ) -> T {
        w();
        // SAFETY: forwarded contract; the shared guard is released below.
        let s = unsafe { lock.downgrade(g) };
        let out = r();
        // SAFETY: `s` is the shared guard the downgrade produced.
        unsafe { lock.unlock_shared(s) };
        out
    }
}

/// Any `lock_api` raw mutex (klock's locks, parking_lot's); `T` is
/// [`Timed`] or [`Untimed`].
pub struct RawM<R, T = Untimed>(R, PhantomData<T>);

impl<R: lock_api::RawMutex, T> RawM<R, T> {
    pub fn new() -> Self {
        Self(R::INIT, PhantomData)
    }
    /// Run `f` holding `g`, then release it.
    #[inline]
    fn holding<U>(&self, g: R::Guard, f: impl FnOnce() -> U) -> U {
        let r = f();
        // SAFETY: `g` is the guard of an acquisition just made on this thread.
        unsafe { self.0.unlock(g) };
        r
    }
}

impl<R: lock_api::RawMutex, T> Default for RawM<R, T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<R, T> BenchLock for RawM<R, T>
where
    R: lock_api::RawMutex + RawInfo + Send + Sync + 'static,
    T: MutexTiming<R>,
{
    const SLEEPS: bool = R::SLEEPS;
    const PRIORITY_INHERITANCE: bool = R::PRIORITY_INHERITANCE;

    fn new() -> Self {
        Self(R::INIT, PhantomData)
    }
    #[inline]
    fn write<U>(&self, f: impl FnOnce() -> U) -> U {
        self.holding(self.0.lock(), f)
    }
    fn events() -> Vec<(&'static str, u64)> {
        R::events()
    }
}

impl<R, T> TryBench for RawM<R, T>
where
    R: lock_api::RawMutex + RawInfo + Send + Sync + 'static,
    T: MutexTiming<R>,
{
    const TIMED: bool = T::TIMED;

    #[inline]
    fn try_write<U, F: FnOnce() -> U>(&self, f: F) -> Result<U, F> {
        match self.0.try_lock() {
            Some(g) => Ok(self.holding(g, f)),
            None => Err(f),
        }
    }
    fn try_write_for<U, F: FnOnce() -> U>(&self, d: Duration, f: F) -> Result<U, F> {
        match T::try_lock_for(&self.0, d) {
            Some(g) => Ok(self.holding(g, f)),
            None => Err(f),
        }
    }
}

/// Any `lock_api` raw rwlock; `T` is [`Timed`] or [`Untimed`], `D` is
/// [`Downgrade`] or [`NoDowngrade`].
pub struct RawRw<R, T = Untimed, D = NoDowngrade>(R, PhantomData<(T, D)>);

impl<R: lock_api::RawRwLock, T, D> RawRw<R, T, D> {
    #[inline]
    fn exclusive<U>(&self, g: R::ExclusiveGuard, f: impl FnOnce() -> U) -> U {
        let r = f();
        // SAFETY: `g` is the guard of an acquisition just made on this thread.
        unsafe { self.0.unlock_exclusive(g) };
        r
    }
    #[inline]
    fn shared<U>(&self, g: R::SharedGuard, f: impl FnOnce() -> U) -> U {
        let r = f();
        // SAFETY: as above, shared side.
        unsafe { self.0.unlock_shared(g) };
        r
    }
}

impl<R, T, D> BenchLock for RawRw<R, T, D>
where
    R: lock_api::RawRwLock + RawInfo + Send + Sync + 'static,
    T: RwTiming<R>,
    D: RwDowngrading<R>,
{
    const SHARED: bool = true;
    const SLEEPS: bool = R::SLEEPS;
    const PRIORITY_INHERITANCE: bool = R::PRIORITY_INHERITANCE;

    fn new() -> Self {
        Self(R::INIT, PhantomData)
    }
    #[inline]
    fn write<U>(&self, f: impl FnOnce() -> U) -> U {
        self.exclusive(self.0.lock_exclusive(), f)
    }
    #[inline]
    fn read<U>(&self, f: impl FnOnce() -> U) -> U {
        self.shared(self.0.lock_shared(), f)
    }
    fn events() -> Vec<(&'static str, u64)> {
        R::events()
    }
}

impl<R, T, D> TryBench for RawRw<R, T, D>
where
    R: lock_api::RawRwLock + RawInfo + Send + Sync + 'static,
    T: RwTiming<R>,
    D: RwDowngrading<R>,
{
    const TIMED: bool = T::TIMED;
    const DOWNGRADE: bool = D::DOWNGRADE;

    #[inline]
    fn try_write<U, F: FnOnce() -> U>(&self, f: F) -> Result<U, F> {
        match self.0.try_lock_exclusive() {
            Some(g) => Ok(self.exclusive(g, f)),
            None => Err(f),
        }
    }
    #[inline]
    fn try_read<U, F: FnOnce() -> U>(&self, f: F) -> Result<U, F> {
        match self.0.try_lock_shared() {
            Some(g) => Ok(self.shared(g, f)),
            None => Err(f),
        }
    }
    fn try_write_for<U, F: FnOnce() -> U>(&self, d: Duration, f: F) -> Result<U, F> {
        match T::try_lock_exclusive_for(&self.0, d) {
            Some(g) => Ok(self.exclusive(g, f)),
            None => Err(f),
        }
    }
    fn try_read_for<U, F: FnOnce() -> U>(&self, d: Duration, f: F) -> Result<U, F> {
        match T::try_lock_shared_for(&self.0, d) {
            Some(g) => Ok(self.shared(g, f)),
            None => Err(f),
        }
    }
    fn write_downgrade<U>(&self, w: impl FnOnce(), r: impl FnOnce() -> U) -> U {
        let g = self.0.lock_exclusive();
        // SAFETY: `g` was just acquired exclusively on this thread.
        unsafe { D::finish(&self.0, g, w, r) }
    }
}
