//! What `klock_rwsem_t` and `klock_rwlock_t` share: a raw reader-writer
//! lock held in place, the write holder's tid (for `EDEADLK` and `EPERM`)
//! and its guard, and POSIX's one unlock for either kind of hold. The two
//! locks differ only in how a timed attempt waits ([`RwRaw`]).

use crate::me;
use crate::time::time_left;
use core::cell::UnsafeCell;
use core::ffi::c_int;
use core::mem::MaybeUninit;
use core::sync::atomic::{AtomicU32, Ordering::Relaxed};
use std::time::Duration;

/// A `lock_api` reader-writer lock as the C API drives it.
pub(crate) trait RwRaw: lock_api::RawRwLock {
    /// The guard of a read hold the caller has (readers keep none: the
    /// guards carry no state).
    fn shared_guard() -> Self::SharedGuard;
    /// Read-lock, waiting at most `left` (zero: one try).
    fn lock_shared_within(&self, left: Duration) -> Option<Self::SharedGuard>;
    /// Write-lock, waiting at most `left` (zero: one try).
    fn lock_exclusive_within(&self, left: Duration) -> Option<Self::ExclusiveGuard>;
    /// Read-lock, unless `write_held_by_caller` says the caller holds the
    /// write lock (`None`); `tid` is the caller's, for a lock that records
    /// it (its own lookup is a thread-local access, a call in a shared
    /// library). A lock may ask only once its fast path failed.
    #[inline(always)]
    fn lock_shared_unless_as(
        &self,
        tid: u32,
        write_held_by_caller: impl FnOnce() -> bool,
    ) -> Option<Self::SharedGuard> {
        let _ = tid;
        if write_held_by_caller() {
            return None;
        }
        Some(self.lock_shared())
    }
    /// Held by readers and no writer (a snapshot).
    #[inline(always)]
    fn is_read_held(&self) -> bool {
        !self.is_locked_exclusive() && self.is_locked()
    }
    /// Write-lock; `tid` as for [`lock_shared_unless_as`](Self::lock_shared_unless_as).
    #[inline(always)]
    fn lock_exclusive_as(&self, tid: u32) -> Self::ExclusiveGuard {
        let _ = tid;
        self.lock_exclusive()
    }
    /// Read-lock if that needs no waiting; `tid` as for
    /// [`lock_shared_unless_as`](Self::lock_shared_unless_as).
    #[inline(always)]
    fn try_lock_shared_as(&self, tid: u32) -> Option<Self::SharedGuard> {
        let _ = tid;
        self.try_lock_shared()
    }
    /// Write-lock if it is free; `tid` as for
    /// [`lock_shared_unless_as`](Self::lock_shared_unless_as).
    #[inline(always)]
    fn try_lock_exclusive_as(&self, tid: u32) -> Option<Self::ExclusiveGuard> {
        let _ = tid;
        self.try_lock_exclusive()
    }
}

/// The layout inside the opaque C type; all-zero bytes are an unlocked
/// lock when `R::INIT` is all zeros (both of klock's are).
#[repr(C)]
pub(crate) struct RwImpl<R: RwRaw> {
    raw: R,
    /// The write holder's tid, 0 if none: set by the writer after locking,
    /// cleared by it before unlocking. Only a thread that set it can read
    /// its own tid here.
    writer: AtomicU32,
    /// The writer's guard; only the write holder touches it.
    guard: UnsafeCell<MaybeUninit<R::ExclusiveGuard>>,
}

impl<R: RwRaw> RwImpl<R> {
    pub(crate) fn new() -> Self {
        Self {
            raw: R::INIT,
            writer: AtomicU32::new(0),
            guard: UnsafeCell::new(MaybeUninit::uninit()),
        }
    }

    pub(crate) fn is_locked(&self) -> bool {
        self.raw.is_locked()
    }

    #[inline]
    fn written_by_me(&self) -> bool {
        self.writer.load(Relaxed) == me()
    }

    #[inline]
    fn wrote(&self, g: Option<R::ExclusiveGuard>, err: c_int) -> Result<(), c_int> {
        let g = g.ok_or(err)?;
        // SAFETY: we hold the write lock: only we touch `guard`.
        unsafe { (*self.guard.get()).write(g) };
        self.writer.store(me(), Relaxed);
        Ok(())
    }

    #[inline]
    pub(crate) fn rdlock(&self) -> Result<(), c_int> {
        self.raw
            .lock_shared_unless_as(me(), || self.written_by_me())
            .map(drop)
            .ok_or(libc::EDEADLK)
    }

    pub(crate) fn tryrdlock(&self) -> Result<(), c_int> {
        self.raw
            .try_lock_shared_as(me())
            .map(drop)
            .ok_or(libc::EBUSY)
    }

    pub(crate) fn timedrdlock(
        &self,
        clock: libc::clockid_t,
        ts: *const libc::timespec,
    ) -> Result<(), c_int> {
        // SAFETY: forwarded from the C caller's contract.
        let left = unsafe { time_left(clock, ts) }?;
        if self.written_by_me() {
            return Err(libc::EDEADLK);
        }
        self.raw
            .lock_shared_within(left)
            .map(drop)
            .ok_or(libc::ETIMEDOUT)
    }

    #[inline]
    pub(crate) fn wrlock(&self) -> Result<(), c_int> {
        if self.written_by_me() {
            return Err(libc::EDEADLK);
        }
        self.wrote(Some(self.raw.lock_exclusive_as(me())), 0)
    }

    pub(crate) fn trywrlock(&self) -> Result<(), c_int> {
        self.wrote(self.raw.try_lock_exclusive_as(me()), libc::EBUSY)
    }

    pub(crate) fn timedwrlock(
        &self,
        clock: libc::clockid_t,
        ts: *const libc::timespec,
    ) -> Result<(), c_int> {
        // SAFETY: forwarded from the C caller's contract.
        let left = unsafe { time_left(clock, ts) }?;
        if self.written_by_me() {
            return Err(libc::EDEADLK);
        }
        self.wrote(self.raw.lock_exclusive_within(left), libc::ETIMEDOUT)
    }

    #[inline]
    pub(crate) fn unlock(&self) -> Result<(), c_int> {
        if self.written_by_me() {
            self.writer.store(0, Relaxed);
            // SAFETY: we hold the write lock and recorded its guard.
            unsafe {
                let g = (*self.guard.get()).assume_init_read();
                self.raw.unlock_exclusive(g);
            }
            Ok(())
        } else if !self.raw.is_read_held() {
            // Another thread's write hold, or no hold at all.
            Err(libc::EPERM)
        } else {
            // Readers hold it: by the caller's contract, the caller is one.
            // SAFETY: a read hold of the caller's is released.
            unsafe { self.raw.unlock_shared(R::shared_guard()) };
            Ok(())
        }
    }
}
