//! The `lock_api` traits of [`RawRwSemWith`]: plain, downgradable and
//! timed locking.

use super::*;

// SAFETY: readers/writer exclusion as argued in the module docs (and
// checked by the loom models); every lock path acquires, every unlock
// releases.
#[cfg(not(loom))]
unsafe impl<const R: u8, const A: u8, W: WaitLockRaw> lock_api::RawRwLock
    for RawRwSemWith<R, A, W>
{
    #[allow(clippy::declare_interior_mutable_const)]
    const INIT: Self = Self::new();
    type SharedGuard = ReadGuard;
    type ExclusiveGuard = WriteGuard;

    #[inline]
    fn lock_shared(&self) -> ReadGuard {
        self.raw_lock_shared()
    }

    #[inline]
    fn try_lock_shared(&self) -> Option<ReadGuard> {
        self.raw_try_lock_shared()
    }

    #[inline]
    unsafe fn unlock_shared(&self, _guard: ReadGuard) {
        // SAFETY: forwarded contract.
        unsafe { self.raw_unlock_shared() }
    }

    #[inline]
    fn lock_exclusive(&self) -> WriteGuard {
        self.raw_lock_exclusive()
    }

    #[inline]
    fn try_lock_exclusive(&self) -> Option<WriteGuard> {
        self.raw_try_lock_exclusive()
    }

    #[inline]
    unsafe fn unlock_exclusive(&self, guard: WriteGuard) {
        // SAFETY: forwarded contract.
        unsafe { self.raw_unlock_exclusive(guard) }
    }

    #[inline]
    fn is_locked(&self) -> bool {
        self.is_held()
    }

    #[inline]
    fn is_locked_exclusive(&self) -> bool {
        self.is_write_held()
    }
}

// SAFETY: the write lock becomes a read lock in one RMW; no writer can
// get in between.
#[cfg(not(loom))]
unsafe impl<const R: u8, const A: u8, W: WaitLockRaw> lock_api::RawRwLockDowngrade
    for RawRwSemWith<R, A, W>
{
    #[inline]
    unsafe fn downgrade(&self, guard: WriteGuard) -> ReadGuard {
        // SAFETY: forwarded contract.
        unsafe { self.raw_downgrade(guard) }
    }
}

// SAFETY: a timed-out attempt owns nothing and has left every queue.
#[cfg(not(loom))]
unsafe impl<const R: u8, const A: u8, W: WaitLockRaw> lock_api::RawRwLockTimed
    for RawRwSemWith<R, A, W>
{
    type Duration = Duration;
    type Instant = std::time::Instant;

    fn try_lock_shared_for(&self, timeout: Duration) -> Option<ReadGuard> {
        self.raw_try_lock_shared_until_ns(sys::deadline_after(timeout))
    }

    fn try_lock_shared_until(&self, timeout: std::time::Instant) -> Option<ReadGuard> {
        let left = timeout.saturating_duration_since(std::time::Instant::now());
        self.raw_try_lock_shared_until_ns(sys::deadline_after(left))
    }

    fn try_lock_exclusive_for(&self, timeout: Duration) -> Option<WriteGuard> {
        self.raw_try_lock_exclusive_until_ns(sys::deadline_after(timeout))
    }

    fn try_lock_exclusive_until(&self, timeout: std::time::Instant) -> Option<WriteGuard> {
        let left = timeout.saturating_duration_since(std::time::Instant::now());
        self.raw_try_lock_exclusive_until_ns(sys::deadline_after(left))
    }
}
