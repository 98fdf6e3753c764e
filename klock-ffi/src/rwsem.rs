//! `klock_rwsem_t`: [`klock::RawRwSem`], the kernel's read-write
//! semaphore.

use crate::rw::{RwImpl, RwRaw};
use crate::{errno, get, guarded};
use core::ffi::c_int;
use klock::rwsem::{ReadGuard, WriteGuard};
use klock::RawRwSem;
use lock_api::{RawRwLock as _, RawRwLockTimed as _};
use std::time::Duration;

/// A read-write semaphore: the kernel's `struct rw_semaphore` (readers
/// share, writers exclude; optimistic spinning on a running writer, then
/// sleeping). For read-mostly data with long or sleeping read sections.
/// Opaque; 96 bytes, 8-byte aligned (part of the ABI). Initialise with
/// `KLOCK_RWSEM_INITIALIZER` or `klock_rwsem_init`. One
/// `klock_rwsem_unlock` releases either kind of hold.
#[repr(C, align(8))]
pub struct klock_rwsem_t {
    _opaque: [u8; 96],
}

/// The layout inside a `klock_rwsem_t`; all-zero bytes are an unlocked
/// rw-semaphore (`RawRwSem::new()` is all zeros).
pub(crate) type RwSemImpl = RwImpl<RawRwSem>;

impl RwRaw for RawRwSem {
    fn shared_guard() -> ReadGuard {
        ReadGuard::new()
    }
    fn lock_shared_within(&self, left: Duration) -> Option<ReadGuard> {
        if left.is_zero() {
            self.try_lock_shared()
        } else {
            self.try_lock_shared_for(left)
        }
    }
    fn lock_exclusive_within(&self, left: Duration) -> Option<WriteGuard> {
        if left.is_zero() {
            self.try_lock_exclusive()
        } else {
            self.try_lock_exclusive_for(left)
        }
    }
    #[inline(always)]
    fn lock_shared_unless_as(
        &self,
        tid: u32,
        write_held_by_caller: impl FnOnce() -> bool,
    ) -> Option<ReadGuard> {
        self.raw_lock_shared_unless_as(tid, write_held_by_caller)
    }
    #[inline(always)]
    fn is_read_held(&self) -> bool {
        RawRwSem::is_read_held(self)
    }
    #[inline(always)]
    fn lock_exclusive_as(&self, tid: u32) -> WriteGuard {
        self.raw_lock_exclusive_as(tid)
    }
    #[inline(always)]
    fn try_lock_shared_as(&self, tid: u32) -> Option<ReadGuard> {
        self.raw_try_lock_shared_as(tid)
    }
    #[inline(always)]
    fn try_lock_exclusive_as(&self, tid: u32) -> Option<WriteGuard> {
        self.raw_try_lock_exclusive_as(tid)
    }
}

/// Initialise `l` as an unlocked rw-semaphore. Same as
/// `KLOCK_RWSEM_INITIALIZER`; `attr` is reserved and must be null.
///
/// # Safety
/// `l` is null or points to writable memory no other thread uses now.
#[no_mangle]
pub unsafe extern "C" fn klock_rwsem_init(
    l: *mut klock_rwsem_t,
    attr: *const core::ffi::c_void,
) -> c_int {
    guarded(|| {
        if !attr.is_null() {
            return libc::EINVAL;
        }
        // SAFETY: the caller's contract (`get` checks null, size, alignment).
        errno(unsafe { get::<_, RwSemImpl>(l) }.map(|_| {
            // SAFETY: non-null, writable, unused by others.
            unsafe { l.cast::<RwSemImpl>().write(RwSemImpl::new()) }
        }))
    })
}

/// Destroy `l`: 0, or `EBUSY` if it is held.
///
/// # Safety
/// `l` is null or points to an initialised `klock_rwsem_t`.
#[no_mangle]
pub unsafe extern "C" fn klock_rwsem_destroy(l: *mut klock_rwsem_t) -> c_int {
    guarded(|| {
        // SAFETY: the caller's contract.
        errno(unsafe { get::<_, RwSemImpl>(l) }.and_then(|l| {
            if l.is_locked() {
                Err(libc::EBUSY)
            } else {
                Ok(())
            }
        }))
    })
}

/// Read-lock `l`: 0, or `EDEADLK` if the calling thread write-holds it.
/// A thread that already read-holds `l` must not read-lock it again (a
/// queued writer would block it: not detected).
///
/// # Safety
/// `l` is null or points to an initialised `klock_rwsem_t`.
#[no_mangle]
pub unsafe extern "C" fn klock_rwsem_rdlock(l: *mut klock_rwsem_t) -> c_int {
    // SAFETY: the caller's contract.
    guarded(|| errno(unsafe { get::<_, RwSemImpl>(l) }.and_then(RwSemImpl::rdlock)))
}

/// Read-lock `l` if that needs no waiting: 0 or `EBUSY`.
///
/// # Safety
/// `l` is null or points to an initialised `klock_rwsem_t`.
#[no_mangle]
pub unsafe extern "C" fn klock_rwsem_tryrdlock(l: *mut klock_rwsem_t) -> c_int {
    // SAFETY: the caller's contract.
    guarded(|| errno(unsafe { get::<_, RwSemImpl>(l) }.and_then(RwSemImpl::tryrdlock)))
}

/// Read-lock `l` unless the absolute `CLOCK_MONOTONIC` deadline `abstime`
/// passes first: 0, `ETIMEDOUT`, `EDEADLK` or `EINVAL` (bad `abstime`).
///
/// # Safety
/// `l` is null or points to an initialised `klock_rwsem_t`; `abstime` is
/// null or readable.
#[no_mangle]
pub unsafe extern "C" fn klock_rwsem_timedrdlock(
    l: *mut klock_rwsem_t,
    abstime: *const libc::timespec,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { klock_rwsem_clockrdlock(l, libc::CLOCK_MONOTONIC, abstime) }
}

/// As `klock_rwsem_timedrdlock`, with the deadline on `clock`
/// (`CLOCK_MONOTONIC` or `CLOCK_REALTIME`; another clock is `EINVAL`).
///
/// # Safety
/// As `klock_rwsem_timedrdlock`.
#[no_mangle]
pub unsafe extern "C" fn klock_rwsem_clockrdlock(
    l: *mut klock_rwsem_t,
    clock: libc::clockid_t,
    abstime: *const libc::timespec,
) -> c_int {
    guarded(|| {
        // SAFETY: the caller's contract.
        errno(unsafe { get::<_, RwSemImpl>(l) }.and_then(|l| l.timedrdlock(clock, abstime)))
    })
}

/// Write-lock `l`: 0, or `EDEADLK` if the calling thread write-holds it.
///
/// # Safety
/// `l` is null or points to an initialised `klock_rwsem_t`.
#[no_mangle]
pub unsafe extern "C" fn klock_rwsem_wrlock(l: *mut klock_rwsem_t) -> c_int {
    // SAFETY: the caller's contract.
    guarded(|| errno(unsafe { get::<_, RwSemImpl>(l) }.and_then(RwSemImpl::wrlock)))
}

/// Write-lock `l` if it is free: 0 or `EBUSY`.
///
/// # Safety
/// `l` is null or points to an initialised `klock_rwsem_t`.
#[no_mangle]
pub unsafe extern "C" fn klock_rwsem_trywrlock(l: *mut klock_rwsem_t) -> c_int {
    // SAFETY: the caller's contract.
    guarded(|| errno(unsafe { get::<_, RwSemImpl>(l) }.and_then(RwSemImpl::trywrlock)))
}

/// Write-lock `l` unless the absolute `CLOCK_MONOTONIC` deadline
/// `abstime` passes first: 0, `ETIMEDOUT`, `EDEADLK` or `EINVAL`.
///
/// # Safety
/// As `klock_rwsem_timedrdlock`.
#[no_mangle]
pub unsafe extern "C" fn klock_rwsem_timedwrlock(
    l: *mut klock_rwsem_t,
    abstime: *const libc::timespec,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { klock_rwsem_clockwrlock(l, libc::CLOCK_MONOTONIC, abstime) }
}

/// As `klock_rwsem_timedwrlock`, with the deadline on `clock`
/// (`CLOCK_MONOTONIC` or `CLOCK_REALTIME`; another clock is `EINVAL`).
///
/// # Safety
/// As `klock_rwsem_timedrdlock`.
#[no_mangle]
pub unsafe extern "C" fn klock_rwsem_clockwrlock(
    l: *mut klock_rwsem_t,
    clock: libc::clockid_t,
    abstime: *const libc::timespec,
) -> c_int {
    guarded(|| {
        // SAFETY: the caller's contract.
        errno(unsafe { get::<_, RwSemImpl>(l) }.and_then(|l| l.timedwrlock(clock, abstime)))
    })
}

/// Release the calling thread's hold of `l`, read or write: 0, or `EPERM`
/// if `l` is not held or another thread write-holds it. (A read unlock by
/// a thread that holds no read lock while others do is not detected.)
///
/// # Safety
/// `l` is null or points to an initialised `klock_rwsem_t`.
#[no_mangle]
pub unsafe extern "C" fn klock_rwsem_unlock(l: *mut klock_rwsem_t) -> c_int {
    // SAFETY: the caller's contract.
    guarded(|| errno(unsafe { get::<_, RwSemImpl>(l) }.and_then(RwSemImpl::unlock)))
}
