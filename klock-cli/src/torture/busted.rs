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

use super::lock::{How, TortureLock};
use lock_api::{RawMutex as _, RawMutexTimed as _};
use std::sync::atomic::{AtomicU64, Ordering};

/// A "lock" that does not exclude: every acquisition succeeds at once.
pub struct LockBusted;

impl TortureLock for LockBusted {
    const TRY: bool = true;
    const TIMED: bool = true;

    fn new() -> Self {
        Self
    }
    fn write<T>(&self, _: How, f: impl FnOnce() -> T) -> Option<T> {
        Some(f())
    }
}

/// An rwlock whose read side does not exclude writers.
pub struct RwBusted(parking_lot::RawMutex);

impl TortureLock for RwBusted {
    const SHARED: bool = true;

    fn new() -> Self {
        Self(parking_lot::RawMutex::INIT)
    }
    fn write<T>(&self, _: How, f: impl FnOnce() -> T) -> Option<T> {
        let g = self.0.lock();
        let r = f();
        // SAFETY: `g` is the guard of the acquisition just made.
        unsafe { self.0.unlock(g) };
        Some(r)
    }
    fn read<T>(&self, _: How, f: impl FnOnce() -> T) -> Option<T> {
        Some(f())
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

impl TortureLock for LockDeadlock {
    const TRY: bool = true;
    const TIMED: bool = true;

    fn new() -> Self {
        Self {
            raw: parking_lot::RawMutex::INIT,
            acquisitions: AtomicU64::new(0),
        }
    }
    fn write<T>(&self, how: How, f: impl FnOnce() -> T) -> Option<T> {
        let g = match how {
            How::Block => self.raw.lock(),
            How::Try => self.raw.try_lock()?,
            How::Timed(d) => self.raw.try_lock_for(d)?,
        };
        let r = f();
        // Relaxed: a counter under the lock; only its uniqueness matters.
        if self.acquisitions.fetch_add(1, Ordering::Relaxed) + 1 == DEADLOCK_AFTER {
            // The lost unlock: the guard is dropped without unlocking,
            // so the lock stays held by nobody, forever.
            let _ = g;
        } else {
            // SAFETY: `g` is the guard of the acquisition just made.
            unsafe { self.raw.unlock(g) };
        }
        Some(r)
    }
}

/// The blocking acquisition of [`LockLostWake`] that never returns.
pub const LOST_WAKE_AT: u64 = 1000;

/// A mutex that loses one waiter's wake-up (test-only).
pub struct LockLostWake {
    raw: parking_lot::RawMutex,
    blocking: AtomicU64,
}

impl TortureLock for LockLostWake {
    const TRY: bool = true;

    fn new() -> Self {
        Self {
            raw: parking_lot::RawMutex::INIT,
            blocking: AtomicU64::new(0),
        }
    }
    fn write<T>(&self, how: How, f: impl FnOnce() -> T) -> Option<T> {
        let g = match how {
            How::Block => {
                // Relaxed: only the count's uniqueness matters.
                if self.blocking.fetch_add(1, Ordering::Relaxed) + 1 == LOST_WAKE_AT {
                    // This waiter's wake-up is lost: it sleeps for good.
                    loop {
                        std::thread::park();
                    }
                }
                self.raw.lock()
            }
            _ => self.raw.try_lock()?,
        };
        let r = f();
        // SAFETY: `g` is the guard of the acquisition just made.
        unsafe { self.raw.unlock(g) };
        Some(r)
    }
}
