//! `klock_rtmutex_t`: [`klock::RawRtMutex`], a priority-inheritance mutex
//! on the PI futex.

use crate::time::time_left;
use crate::{errno, get, guarded, me};
use core::cell::UnsafeCell;
use core::ffi::c_int;
use core::mem::MaybeUninit;
use klock::rtmutex::{RtGuard, RtMutexError};
use klock::RawRtMutex;
use lock_api::RawMutex as _;

/// A priority-inheritance mutex: the kernel's PI futex with userspace
/// fast paths (the kernel boosts the owner while a higher-priority thread
/// waits). For real-time threads of different priorities sharing data.
/// Opaque; 64 bytes, 8-byte aligned (part of the ABI). Initialise with
/// `KLOCK_RTMUTEX_INITIALIZER` or `klock_rtmutex_init`.
#[repr(C, align(8))]
pub struct klock_rtmutex_t {
    _opaque: [u8; 64],
}

/// The layout inside a `klock_rtmutex_t`; all-zero bytes are an unlocked
/// mutex (`RawRtMutex::new()` is all zeros).
#[repr(C)]
pub(crate) struct RtImpl {
    raw: RawRtMutex,
    /// The owner's guard; only the owner touches it.
    guard: UnsafeCell<MaybeUninit<RtGuard>>,
}

/// The errno of a failed lock attempt.
fn rt_errno(e: RtMutexError) -> c_int {
    match e {
        RtMutexError::Deadlock => libc::EDEADLK,
        RtMutexError::TimedOut => libc::ETIMEDOUT,
        RtMutexError::Kernel(e) => e,
    }
}

impl RtImpl {
    fn owned_by_me(&self) -> bool {
        self.raw.owner_tid() == Some(me())
    }

    fn took(&self, g: Result<RtGuard, RtMutexError>) -> Result<(), c_int> {
        let g = g.map_err(rt_errno)?;
        // SAFETY: we hold the lock: only we touch `guard`.
        unsafe { (*self.guard.get()).write(g) };
        Ok(())
    }

    #[inline(always)]
    fn lock(&self) -> Result<(), c_int> {
        self.took(self.raw.lock_checked_as(me()))
    }

    fn trylock(&self) -> Result<(), c_int> {
        let g = self.raw.raw_try_lock_as(me()).ok_or(libc::EBUSY)?;
        self.took(Ok(g))
    }

    fn timedlock(&self, clock: libc::clockid_t, ts: *const libc::timespec) -> Result<(), c_int> {
        // SAFETY: forwarded from the C caller's contract.
        let left = unsafe { time_left(clock, ts) }?;
        if self.owned_by_me() {
            return Err(libc::EDEADLK);
        }
        if left.is_zero() {
            let g = self.raw.try_lock().ok_or(libc::ETIMEDOUT)?;
            return self.took(Ok(g));
        }
        self.took(self.raw.try_lock_for_checked(left))
    }

    #[inline(always)]
    fn unlock(&self) -> Result<(), c_int> {
        if !self.owned_by_me() {
            return Err(libc::EPERM);
        }
        // SAFETY: we hold the lock and recorded its guard.
        unsafe {
            let g = (*self.guard.get()).assume_init_read();
            self.raw.unlock(g);
        }
        Ok(())
    }
}

/// Initialise `m` as an unlocked PI mutex. Same as
/// `KLOCK_RTMUTEX_INITIALIZER`; `attr` is reserved and must be null.
///
/// # Safety
/// `m` is null or points to writable memory no other thread uses now.
#[no_mangle]
pub unsafe extern "C" fn klock_rtmutex_init(
    m: *mut klock_rtmutex_t,
    attr: *const core::ffi::c_void,
) -> c_int {
    guarded(|| {
        if !attr.is_null() {
            return libc::EINVAL;
        }
        // SAFETY: the caller's contract (`get` checks null, size, alignment).
        errno(unsafe { get::<_, RtImpl>(m) }.map(|_| {
            // SAFETY: non-null, writable, unused by others.
            unsafe {
                m.cast::<RtImpl>().write(RtImpl {
                    raw: RawRtMutex::new(),
                    guard: UnsafeCell::new(MaybeUninit::uninit()),
                })
            }
        }))
    })
}

/// Destroy `m`: 0, or `EBUSY` if it is locked.
///
/// # Safety
/// `m` is null or points to an initialised `klock_rtmutex_t`.
#[no_mangle]
pub unsafe extern "C" fn klock_rtmutex_destroy(m: *mut klock_rtmutex_t) -> c_int {
    guarded(|| {
        // SAFETY: the caller's contract.
        errno(unsafe { get::<_, RtImpl>(m) }.and_then(|m| {
            if m.raw.is_locked() {
                Err(libc::EBUSY)
            } else {
                Ok(())
            }
        }))
    })
}

/// Lock `m`: 0, `EDEADLK` (the calling thread holds it, or waiting would
/// close a cycle of PI-lock owners), or another errno from the kernel.
///
/// # Safety
/// `m` is null or points to an initialised `klock_rtmutex_t`.
#[no_mangle]
pub unsafe extern "C" fn klock_rtmutex_lock(m: *mut klock_rtmutex_t) -> c_int {
    // SAFETY: the caller's contract.
    guarded(|| errno(unsafe { get::<_, RtImpl>(m) }.and_then(RtImpl::lock)))
}

/// Lock `m` if it is free: 0 or `EBUSY` (also when the caller holds it).
///
/// # Safety
/// `m` is null or points to an initialised `klock_rtmutex_t`.
#[no_mangle]
pub unsafe extern "C" fn klock_rtmutex_trylock(m: *mut klock_rtmutex_t) -> c_int {
    // SAFETY: the caller's contract.
    guarded(|| errno(unsafe { get::<_, RtImpl>(m) }.and_then(RtImpl::trylock)))
}

/// Lock `m` unless the absolute `CLOCK_MONOTONIC` deadline `abstime`
/// passes first: 0, `ETIMEDOUT`, `EDEADLK` or `EINVAL` (bad `abstime`).
///
/// # Safety
/// `m` is null or points to an initialised `klock_rtmutex_t`; `abstime`
/// is null or readable.
#[no_mangle]
pub unsafe extern "C" fn klock_rtmutex_timedlock(
    m: *mut klock_rtmutex_t,
    abstime: *const libc::timespec,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { klock_rtmutex_clocklock(m, libc::CLOCK_MONOTONIC, abstime) }
}

/// As `klock_rtmutex_timedlock`, with the deadline on `clock`
/// (`CLOCK_MONOTONIC` or `CLOCK_REALTIME`; another clock is `EINVAL`).
///
/// # Safety
/// As `klock_rtmutex_timedlock`.
#[no_mangle]
pub unsafe extern "C" fn klock_rtmutex_clocklock(
    m: *mut klock_rtmutex_t,
    clock: libc::clockid_t,
    abstime: *const libc::timespec,
) -> c_int {
    guarded(|| {
        // SAFETY: the caller's contract.
        errno(unsafe { get::<_, RtImpl>(m) }.and_then(|m| m.timedlock(clock, abstime)))
    })
}

/// Unlock `m`: 0, or `EPERM` if the calling thread does not hold it.
///
/// # Safety
/// `m` is null or points to an initialised `klock_rtmutex_t`.
#[no_mangle]
pub unsafe extern "C" fn klock_rtmutex_unlock(m: *mut klock_rtmutex_t) -> c_int {
    // SAFETY: the caller's contract.
    guarded(|| errno(unsafe { get::<_, RtImpl>(m) }.and_then(RtImpl::unlock)))
}
