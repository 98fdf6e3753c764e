//! Deliberately broken locks: how we know the torture test can fail.
//!
//! - [`LockBusted`] (`--type lock_busted`, after the kernel's): takes
//!   nothing, so writers overlap. Must end in FAILURE.
//! - [`RwBusted`] (`--type rwlock_busted`): writers exclude each other, but
//!   readers take nothing, so readers run beside writers. Must end in
//!   FAILURE, on the Reads line.
//! - [`LockDeadlock`] (hidden `--type lock_deadlock`, for the watchdog
//!   test): a correct mutex until its [`DEADLOCK_AFTER`]th acquisition,
//!   whose unlock is lost: every thread then waits forever (a lost wake-up
//!   in its purest form). The watchdog must fail the run and end the
//!   process.
//! - [`LockLostWake`] (hidden `--type lock_lostwake`): a correct mutex,
//!   except that one blocking locker is never woken (it waits forever)
//!   while the others go on: the lost wake-up as it shows in real locks.
//!   The watchdog's per-thread bound must catch it.

//!
//! They are locks of the one registry like any other (torture-only lines),
//! so they implement the bench's lock traits: the torture run reaches them
//! through the same blanket impl as every real lock.

use super::peers::{BenchLock, TryBench};
use lock_api::{RawMutex as _, RawMutexTimed as _};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The guard of the parking_lot mutex under the broken ones.
type Guard = <parking_lot::RawMutex as lock_api::RawMutex>::Guard;

/// A "lock" that does not exclude: every acquisition succeeds at once.
pub struct LockBusted;

impl BenchLock for LockBusted {
    fn new() -> Self {
        Self
    }
    fn write<T>(&self, f: impl FnOnce() -> T) -> T {
        f()
    }
}

impl TryBench for LockBusted {
    const TIMED: bool = true;
    fn try_write<T, F: FnOnce() -> T>(&self, f: F) -> Result<T, F> {
        Ok(f())
    }
    fn try_write_for<T, F: FnOnce() -> T>(&self, _: Duration, f: F) -> Result<T, F> {
        Ok(f())
    }
}

/// An rwlock whose read side does not exclude writers.
pub struct RwBusted(parking_lot::RawMutex);

impl BenchLock for RwBusted {
    const SHARED: bool = true;

    fn new() -> Self {
        Self(parking_lot::RawMutex::INIT)
    }
    fn write<T>(&self, f: impl FnOnce() -> T) -> T {
        let g = self.0.lock();
        let r = f();
        // SAFETY: `g` is the guard of the acquisition just made.
        unsafe { self.0.unlock(g) };
        r
    }
    fn read<T>(&self, f: impl FnOnce() -> T) -> T {
        f()
    }
}

/// Blocking only: the broken read side is what it tests.
impl TryBench for RwBusted {
    const TRY: bool = false;
    fn try_write<T, F: FnOnce() -> T>(&self, f: F) -> Result<T, F> {
        Err(f)
    }
}

/// The acquisition of [`LockDeadlock`] whose unlock is lost.
pub const DEADLOCK_AFTER: u64 = 2000;

/// A mutex that stops releasing after [`DEADLOCK_AFTER`] acquisitions
/// (test-only: the watchdog's target).
pub struct LockDeadlock {
    raw: parking_lot::RawMutex,
    acquisitions: AtomicU64,
}

impl LockDeadlock {
    /// Run `f` holding the lock (just acquired), then release it — except
    /// on the one acquisition whose unlock is lost.
    fn holding<T>(&self, g: Guard, f: impl FnOnce() -> T) -> T {
        let r = f();
        // Relaxed: a counter under the lock; only its uniqueness matters.
        if self.acquisitions.fetch_add(1, Ordering::Relaxed) + 1 == DEADLOCK_AFTER {
            // The lost unlock: the guard is dropped without unlocking, so
            // the lock stays held by nobody, forever.
            let _ = g;
        } else {
            // SAFETY: `g` is the guard of the caller's acquisition, on this thread.
            unsafe { self.raw.unlock(g) };
        }
        r
    }
}

impl BenchLock for LockDeadlock {
    fn new() -> Self {
        Self {
            raw: parking_lot::RawMutex::INIT,
            acquisitions: AtomicU64::new(0),
        }
    }
    fn write<T>(&self, f: impl FnOnce() -> T) -> T {
        let g = self.raw.lock();
        self.holding(g, f)
    }
}

impl TryBench for LockDeadlock {
    const TIMED: bool = true;
    fn try_write<T, F: FnOnce() -> T>(&self, f: F) -> Result<T, F> {
        match self.raw.try_lock() {
            Some(g) => Ok(self.holding(g, f)),
            None => Err(f),
        }
    }
    fn try_write_for<T, F: FnOnce() -> T>(&self, d: Duration, f: F) -> Result<T, F> {
        match self.raw.try_lock_for(d) {
            Some(g) => Ok(self.holding(g, f)),
            None => Err(f),
        }
    }
}

/// The blocking acquisition of [`LockLostWake`] that never returns.
pub const LOST_WAKE_AT: u64 = 1000;

/// A mutex that loses one waiter's wake-up (test-only).
pub struct LockLostWake {
    raw: parking_lot::RawMutex,
    blocking: AtomicU64,
}

impl LockLostWake {
    fn holding<T>(&self, g: Guard, f: impl FnOnce() -> T) -> T {
        let r = f();
        // SAFETY: `g` is the guard of the caller's acquisition, on this thread.
        unsafe { self.raw.unlock(g) };
        r
    }
}

impl BenchLock for LockLostWake {
    fn new() -> Self {
        Self {
            raw: parking_lot::RawMutex::INIT,
            blocking: AtomicU64::new(0),
        }
    }
    fn write<T>(&self, f: impl FnOnce() -> T) -> T {
        // Relaxed: only the count's uniqueness matters.
        if self.blocking.fetch_add(1, Ordering::Relaxed) + 1 == LOST_WAKE_AT {
            // This waiter's wake-up is lost: it sleeps for good.
            loop {
                std::thread::park();
            }
        }
        let g = self.raw.lock();
        self.holding(g, f)
    }
}

impl TryBench for LockLostWake {
    fn try_write<T, F: FnOnce() -> T>(&self, f: F) -> Result<T, F> {
        match self.raw.try_lock() {
            Some(g) => Ok(self.holding(g, f)),
            None => Err(f),
        }
    }
}
