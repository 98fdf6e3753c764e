//! `klock_rwlock_t`: [`klock::RawQRwLock`], the kernel's queued rwlock.

use crate::rw::{RwImpl, RwRaw};
use crate::time::poll_for;
use crate::{errno, get, guarded};
use core::ffi::c_int;
use klock::RawQRwLock;
use lock_api::{GuardSend, RawRwLock as _};
use std::time::Duration;

/// A reader-writer spinlock: the kernel's queued rwlock (readers share;
/// contended lockers queue FIFO on a queued spinlock; a waiting writer
/// blocks new readers). For read-mostly data with short critical sections
/// and threads ≤ CPUs. Opaque; 32 bytes, 8-byte aligned (part of the
/// ABI). Initialise with `KLOCK_RWLOCK_INITIALIZER` or
/// `klock_rwlock_init`. One `klock_rwlock_unlock` releases either kind of
/// hold. The lock has no timed slow path: the timed functions poll a
/// try-lock (spin, yield, then naps of at most 100 µs) without queueing,
/// so under steady contention they may lose to queued lockers until
/// their deadline.
#[repr(C, align(8))]
pub struct klock_rwlock_t {
    _opaque: [u8; 32],
}

/// The layout inside a `klock_rwlock_t`; all-zero bytes are an unlocked
/// rwlock (`RawQRwLock::new()` is all zeros).
pub(crate) type RwLockImpl = RwImpl<RawQRwLock>;

/// The queued rwlock has no timed slow path: a timed attempt polls the
/// try-lock ([`poll_for`]).
impl RwRaw for RawQRwLock {
    fn shared_guard() -> GuardSend {
        GuardSend::new()
    }
    fn lock_shared_within(&self, left: Duration) -> Option<GuardSend> {
        poll_for(left, || self.try_lock_shared().is_some()).then(GuardSend::new)
    }
    fn lock_exclusive_within(&self, left: Duration) -> Option<GuardSend> {
        poll_for(left, || self.try_lock_exclusive().is_some()).then(GuardSend::new)
    }
}

/// Initialise `l` as an unlocked rwlock. Same as
/// `KLOCK_RWLOCK_INITIALIZER`; `attr` is reserved and must be null.
///
/// # Safety
/// `l` is null or points to writable memory no other thread uses now.
#[no_mangle]
pub unsafe extern "C" fn klock_rwlock_init(
    l: *mut klock_rwlock_t,
    attr: *const core::ffi::c_void,
) -> c_int {
    guarded(|| {
        if !attr.is_null() {
            return libc::EINVAL;
        }
        // SAFETY: the caller's contract (`get` checks null, size, alignment).
        errno(unsafe { get::<_, RwLockImpl>(l) }.map(|_| {
            // SAFETY: non-null, writable, unused by others.
            unsafe { l.cast::<RwLockImpl>().write(RwLockImpl::new()) }
        }))
    })
}

/// Destroy `l`: 0, or `EBUSY` if it is held.
///
/// # Safety
/// `l` is null or points to an initialised `klock_rwlock_t`.
#[no_mangle]
pub unsafe extern "C" fn klock_rwlock_destroy(l: *mut klock_rwlock_t) -> c_int {
    guarded(|| {
        // SAFETY: the caller's contract.
        errno(unsafe { get::<_, RwLockImpl>(l) }.and_then(|l| {
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
/// waiting writer would block it: not detected).
///
/// # Safety
/// `l` is null or points to an initialised `klock_rwlock_t`.
#[no_mangle]
pub unsafe extern "C" fn klock_rwlock_rdlock(l: *mut klock_rwlock_t) -> c_int {
    // SAFETY: the caller's contract.
    guarded(|| errno(unsafe { get::<_, RwLockImpl>(l) }.and_then(RwLockImpl::rdlock)))
}

/// Read-lock `l` if that needs no waiting: 0 or `EBUSY`.
///
/// # Safety
/// `l` is null or points to an initialised `klock_rwlock_t`.
#[no_mangle]
pub unsafe extern "C" fn klock_rwlock_tryrdlock(l: *mut klock_rwlock_t) -> c_int {
    // SAFETY: the caller's contract.
    guarded(|| errno(unsafe { get::<_, RwLockImpl>(l) }.and_then(RwLockImpl::tryrdlock)))
}

/// Read-lock `l` unless the absolute `CLOCK_MONOTONIC` deadline `abstime`
/// passes first: 0, `ETIMEDOUT`, `EDEADLK` or `EINVAL` (bad `abstime`).
///
/// # Safety
/// `l` is null or points to an initialised `klock_rwlock_t`; `abstime` is
/// null or readable.
#[no_mangle]
pub unsafe extern "C" fn klock_rwlock_timedrdlock(
    l: *mut klock_rwlock_t,
    abstime: *const libc::timespec,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { klock_rwlock_clockrdlock(l, libc::CLOCK_MONOTONIC, abstime) }
}

/// As `klock_rwlock_timedrdlock`, with the deadline on `clock`
/// (`CLOCK_MONOTONIC` or `CLOCK_REALTIME`; another clock is `EINVAL`).
///
/// # Safety
/// As `klock_rwlock_timedrdlock`.
#[no_mangle]
pub unsafe extern "C" fn klock_rwlock_clockrdlock(
    l: *mut klock_rwlock_t,
    clock: libc::clockid_t,
    abstime: *const libc::timespec,
) -> c_int {
    guarded(|| {
        // SAFETY: the caller's contract.
        errno(unsafe { get::<_, RwLockImpl>(l) }.and_then(|l| l.timedrdlock(clock, abstime)))
    })
}

/// Write-lock `l`: 0, or `EDEADLK` if the calling thread write-holds it.
///
/// # Safety
/// `l` is null or points to an initialised `klock_rwlock_t`.
#[no_mangle]
pub unsafe extern "C" fn klock_rwlock_wrlock(l: *mut klock_rwlock_t) -> c_int {
    // SAFETY: the caller's contract.
    guarded(|| errno(unsafe { get::<_, RwLockImpl>(l) }.and_then(RwLockImpl::wrlock)))
}

/// Write-lock `l` if it is free: 0 or `EBUSY`.
///
/// # Safety
/// `l` is null or points to an initialised `klock_rwlock_t`.
#[no_mangle]
pub unsafe extern "C" fn klock_rwlock_trywrlock(l: *mut klock_rwlock_t) -> c_int {
    // SAFETY: the caller's contract.
    guarded(|| errno(unsafe { get::<_, RwLockImpl>(l) }.and_then(RwLockImpl::trywrlock)))
}

/// Write-lock `l` unless the absolute `CLOCK_MONOTONIC` deadline
/// `abstime` passes first: 0, `ETIMEDOUT`, `EDEADLK` or `EINVAL`.
///
/// # Safety
/// As `klock_rwlock_timedrdlock`.
#[no_mangle]
pub unsafe extern "C" fn klock_rwlock_timedwrlock(
    l: *mut klock_rwlock_t,
    abstime: *const libc::timespec,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { klock_rwlock_clockwrlock(l, libc::CLOCK_MONOTONIC, abstime) }
}

/// As `klock_rwlock_timedwrlock`, with the deadline on `clock`
/// (`CLOCK_MONOTONIC` or `CLOCK_REALTIME`; another clock is `EINVAL`).
///
/// # Safety
/// As `klock_rwlock_timedrdlock`.
#[no_mangle]
pub unsafe extern "C" fn klock_rwlock_clockwrlock(
    l: *mut klock_rwlock_t,
    clock: libc::clockid_t,
    abstime: *const libc::timespec,
) -> c_int {
    guarded(|| {
        // SAFETY: the caller's contract.
        errno(unsafe { get::<_, RwLockImpl>(l) }.and_then(|l| l.timedwrlock(clock, abstime)))
    })
}

/// Release the calling thread's hold of `l`, read or write: 0, or `EPERM`
/// if `l` is not held or another thread write-holds it. (A read unlock by
/// a thread that holds no read lock while others do is not detected.)
///
/// # Safety
/// `l` is null or points to an initialised `klock_rwlock_t`.
#[no_mangle]
pub unsafe extern "C" fn klock_rwlock_unlock(l: *mut klock_rwlock_t) -> c_int {
    // SAFETY: the caller's contract.
    guarded(|| errno(unsafe { get::<_, RwLockImpl>(l) }.and_then(RwLockImpl::unlock)))
}
