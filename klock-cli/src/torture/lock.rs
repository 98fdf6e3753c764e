//! The lock as the torture test sees it: [`TortureLock`], and generic
//! adapters that turn any `lock_api` raw lock into one with a single type
//! expression.
//!
//! The adapters carry the lock's optional capabilities as type-level flags,
//! so the registry line says what the torture run may mix in:
//!
//! | type | lock_api traits needed | torture mixes in |
//! |---|---|---|
//! | `Mx<R>` | `RawMutex` | blocking + try |
//! | `Mx<R, Timed>` | `RawMutex + RawMutexTimed<Duration = Duration>` | + timed |
//! | `Rw<R>` | `RawRwLock` | both sides, blocking + try |
//! | `Rw<R, Timed>` | `+ RawRwLockTimed<Duration = Duration>` | + timed, both sides |
//! | `Rw<R, Timed, Downgrade>` | `+ RawRwLockDowngrade` | + write-then-downgrade |
//! | `Rw<R, Untimed, Downgrade>` | `RawRwLock + RawRwLockDowngrade` | downgrade, no timed |
//!
//! Locks outside `lock_api` (std, pthread, the ticket and TTAS baselines)
//! come in through [`StdMx`], [`StdRw`] (with try) and [`Peer`]
//! (blocking only, over the benchmark's `BenchLock`).

use crate::bench::peers::BenchLock;
use std::marker::PhantomData;
use std::time::Duration;

/// How one acquisition is attempted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum How {
    /// `lock()`: wait as long as it takes.
    Block,
    /// `try_lock()`: one attempt, may fail.
    Try,
    /// `try_lock_for(d)`: wait at most `d`.
    Timed(Duration),
}

/// A lock under torture: run a closure holding it, acquired the way `how`
/// says. `None` means a try or timed attempt did not get the lock (the
/// closure did not run). The engine only asks for what the `TRY`, `TIMED`,
/// `DOWNGRADE` and `SHARED` flags promise.
pub trait TortureLock: Send + Sync + 'static {
    /// Has a real shared (read) side: readers may run beside each other.
    const SHARED: bool = false;
    /// `How::Try` is a real try-lock.
    const TRY: bool = false;
    /// `How::Timed` is a real timed lock.
    const TIMED: bool = false;
    /// [`TortureLock::write_downgrade`] really downgrades.
    const DOWNGRADE: bool = false;

    /// A fresh, unlocked lock.
    fn new() -> Self;

    /// Run `f` holding the lock exclusively.
    fn write<T>(&self, how: How, f: impl FnOnce() -> T) -> Option<T>;

    /// Run `f` holding the lock shared (exclusively without a shared side).
    fn read<T>(&self, how: How, f: impl FnOnce() -> T) -> Option<T> {
        self.write(how, f)
    }

    /// Take the lock exclusively and run `w`, downgrade to shared without
    /// letting another writer in, run `r`, release. Without `DOWNGRADE`
    /// both run under the exclusive lock.
    fn write_downgrade<T>(&self, how: How, w: impl FnOnce(), r: impl FnOnce() -> T) -> Option<T> {
        self.write(how, || {
            w();
            r()
        })
    }
}

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

/// Any `lock_api` raw mutex; `T` is [`Timed`] or [`Untimed`].
pub struct Mx<R, T = Untimed>(R, PhantomData<T>);

impl<R, T> TortureLock for Mx<R, T>
where
    R: lock_api::RawMutex + Send + Sync + 'static,
    T: MutexTiming<R>,
{
    const TRY: bool = true;
    const TIMED: bool = T::TIMED;

    fn new() -> Self {
        Self(R::INIT, PhantomData)
    }

    fn write<U>(&self, how: How, f: impl FnOnce() -> U) -> Option<U> {
        let g = match how {
            How::Block => self.0.lock(),
            How::Try => self.0.try_lock()?,
            How::Timed(d) => T::try_lock_for(&self.0, d)?,
        };
        let r = f();
        // SAFETY: `g` is the guard of the acquisition just made, on this thread.
        unsafe { self.0.unlock(g) };
        Some(r)
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

/// Any `lock_api` raw rwlock; `T` is [`Timed`] or [`Untimed`], `D` is
/// [`Downgrade`] or [`NoDowngrade`].
pub struct Rw<R, T = Untimed, D = NoDowngrade>(R, PhantomData<(T, D)>);

impl<R, T, D> TortureLock for Rw<R, T, D>
where
    R: lock_api::RawRwLock + Send + Sync + 'static,
    T: RwTiming<R>,
    D: RwDowngrading<R>,
{
    const SHARED: bool = true;
    const TRY: bool = true;
    const TIMED: bool = T::TIMED;
    const DOWNGRADE: bool = D::DOWNGRADE;

    fn new() -> Self {
        Self(R::INIT, PhantomData)
    }

    fn write<U>(&self, how: How, f: impl FnOnce() -> U) -> Option<U> {
        let g = self.lock_exclusive(how)?;
        let r = f();
        // SAFETY: `g` is the guard of the acquisition just made, on this thread.
        unsafe { self.0.unlock_exclusive(g) };
        Some(r)
    }

    fn read<U>(&self, how: How, f: impl FnOnce() -> U) -> Option<U> {
        let g = match how {
            How::Block => self.0.lock_shared(),
            How::Try => self.0.try_lock_shared()?,
            How::Timed(d) => T::try_lock_shared_for(&self.0, d)?,
        };
        let r = f();
        // SAFETY: as in `write`, shared side.
        unsafe { self.0.unlock_shared(g) };
        Some(r)
    }

    fn write_downgrade<U>(&self, how: How, w: impl FnOnce(), r: impl FnOnce() -> U) -> Option<U> {
        let g = self.lock_exclusive(how)?;
        // SAFETY: `g` was just acquired exclusively on this thread.
        Some(unsafe { D::finish(&self.0, g, w, r) })
    }
}

impl<R: lock_api::RawRwLock, T: RwTiming<R>, D> Rw<R, T, D> {
    fn lock_exclusive(&self, how: How) -> Option<R::ExclusiveGuard> {
        match how {
            How::Block => Some(self.0.lock_exclusive()),
            How::Try => self.0.try_lock_exclusive(),
            How::Timed(d) => T::try_lock_exclusive_for(&self.0, d),
        }
    }
}

/// A benchmark peer without try or timed acquisition (pthread, ticket,
/// TTAS): blocking only. `SHARED` says whether its `read` really shares.
pub struct Peer<L, const SHARED: bool>(L);

impl<L: BenchLock, const S: bool> TortureLock for Peer<L, S> {
    const SHARED: bool = S;

    fn new() -> Self {
        Self(L::new())
    }
    fn write<T>(&self, _: How, f: impl FnOnce() -> T) -> Option<T> {
        Some(self.0.write(f))
    }
    fn read<T>(&self, _: How, f: impl FnOnce() -> T) -> Option<T> {
        Some(self.0.read(f))
    }
}

/// A std lock guard taken the way `how` says: blocking, or with the try
/// form (`None` when it would block). Poisoning is ignored: torture
/// checks exclusion itself.
fn std_guard<G>(
    how: How,
    block: impl FnOnce() -> std::sync::LockResult<G>,
    try_: impl FnOnce() -> std::sync::TryLockResult<G>,
) -> Option<G> {
    match how {
        How::Block => Some(block().unwrap_or_else(|e| e.into_inner())),
        _ => match try_() {
            Ok(g) => Some(g),
            Err(std::sync::TryLockError::Poisoned(e)) => Some(e.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => None,
        },
    }
}

/// `std::sync::Mutex` with its `try_lock`.
pub struct StdMx(std::sync::Mutex<()>);

impl TortureLock for StdMx {
    const TRY: bool = true;

    fn new() -> Self {
        Self(std::sync::Mutex::new(()))
    }
    fn write<T>(&self, how: How, f: impl FnOnce() -> T) -> Option<T> {
        let _g = std_guard(how, || self.0.lock(), || self.0.try_lock())?;
        Some(f())
    }
}

/// `std::sync::RwLock` with its `try_read` / `try_write`.
pub struct StdRw(std::sync::RwLock<()>);

impl TortureLock for StdRw {
    const SHARED: bool = true;
    const TRY: bool = true;

    fn new() -> Self {
        Self(std::sync::RwLock::new(()))
    }
    fn write<T>(&self, how: How, f: impl FnOnce() -> T) -> Option<T> {
        let _g = std_guard(how, || self.0.write(), || self.0.try_write())?;
        Some(f())
    }
    fn read<T>(&self, how: How, f: impl FnOnce() -> T) -> Option<T> {
        let _g = std_guard(how, || self.0.read(), || self.0.try_read())?;
        Some(f())
    }
}
