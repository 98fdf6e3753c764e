//! `klock_cond_t`: [`klock::RawCondvar`], a futex condition variable for
//! `klock_mutex_t`.

use crate::mutex::{klock_mutex_t, MutexImpl};
use crate::time::time_left;
use crate::{errno, get, guarded};
use core::ffi::c_int;
use klock::RawCondvar;
use lock_api::{RawCondvar as _, RawCondvarTimed as _};

/// A condition variable for `klock_mutex_t` (a futex on a sequence
/// number; waits may wake spuriously: wait in a loop on a predicate).
/// Opaque; 32 bytes, 8-byte aligned (part of the ABI). All-zero bytes
/// (`KLOCK_COND_INITIALIZER`) are a condition variable nobody waits on.
#[repr(C, align(8))]
pub struct klock_cond_t {
    _opaque: [u8; 32],
}

/// Unlock `m`, wait on `c`, lock `m` again; `left`: the timeout (`None`:
/// none). `Ok(true)` if it timed out.
///
/// # Safety
/// `c` and `m` are null or point to initialised objects of this API.
unsafe fn wait(
    c: *mut klock_cond_t,
    m: *mut klock_mutex_t,
    left: Option<std::time::Duration>,
) -> Result<bool, c_int> {
    // SAFETY: the caller's contract.
    let c = unsafe { get::<_, RawCondvar>(c) }?;
    // SAFETY: as above.
    let m = unsafe { get::<_, MutexImpl>(m) }?;
    if !m.owned_by_me() {
        return Err(libc::EPERM);
    }
    // SAFETY: we hold `m` and recorded its guard. The guard moves to our
    // stack for the wait (other lockers record theirs meanwhile) and back
    // once the wait has locked `m` again.
    unsafe {
        let mut g = m.take_guard();
        let timed_out = match left {
            None => {
                c.wait(m.raw(), &mut g);
                false
            }
            Some(left) => c.wait_for(m.raw(), &mut g, &left),
        };
        m.put_guard(g);
        Ok(timed_out)
    }
}

/// Initialise `c`. Same as `KLOCK_COND_INITIALIZER`; `attr` is reserved
/// and must be null.
///
/// # Safety
/// `c` is null or points to writable memory no other thread uses now.
#[no_mangle]
pub unsafe extern "C" fn klock_cond_init(
    c: *mut klock_cond_t,
    attr: *const core::ffi::c_void,
) -> c_int {
    guarded(|| {
        if !attr.is_null() || c.is_null() {
            return libc::EINVAL;
        }
        // SAFETY: non-null, writable, unused by others (the caller's
        // contract); the size and alignment fit (checked in `get`).
        unsafe { c.cast::<RawCondvar>().write(RawCondvar::new()) };
        0
    })
}

/// Destroy `c`: 0 (waiters are not detected: destroying a condition
/// variable somebody waits on is undefined, as in POSIX).
///
/// # Safety
/// `c` is null or points to an initialised `klock_cond_t`.
#[no_mangle]
pub unsafe extern "C" fn klock_cond_destroy(c: *mut klock_cond_t) -> c_int {
    // SAFETY: the caller's contract.
    guarded(|| errno(unsafe { get::<_, RawCondvar>(c) }.map(|_| ())))
}

/// Atomically unlock `m` and wait for a signal on `c`, then lock `m`
/// again. Returns 0 (possibly spuriously), or `EPERM` if the calling
/// thread does not hold `m`.
///
/// # Safety
/// `c` and `m` are null or point to initialised objects of this API.
#[no_mangle]
pub unsafe extern "C" fn klock_cond_wait(c: *mut klock_cond_t, m: *mut klock_mutex_t) -> c_int {
    // SAFETY: the caller's contract.
    guarded(|| errno(unsafe { wait(c, m, None) }.map(drop)))
}

/// As `klock_cond_wait`, until the absolute `CLOCK_MONOTONIC` deadline
/// `abstime`: 0, `ETIMEDOUT` (`m` is locked again either way), `EPERM`,
/// or `EINVAL` (bad `abstime`; `m` stays locked, no wait).
///
/// # Safety
/// As `klock_cond_wait`; `abstime` is null or readable.
#[no_mangle]
pub unsafe extern "C" fn klock_cond_timedwait(
    c: *mut klock_cond_t,
    m: *mut klock_mutex_t,
    abstime: *const libc::timespec,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { klock_cond_clockwait(c, m, libc::CLOCK_MONOTONIC, abstime) }
}

/// As `klock_cond_timedwait`, with the deadline on `clock`
/// (`CLOCK_MONOTONIC` or `CLOCK_REALTIME`; another clock is `EINVAL`).
///
/// # Safety
/// As `klock_cond_timedwait`.
#[no_mangle]
pub unsafe extern "C" fn klock_cond_clockwait(
    c: *mut klock_cond_t,
    m: *mut klock_mutex_t,
    clock: libc::clockid_t,
    abstime: *const libc::timespec,
) -> c_int {
    guarded(|| {
        // SAFETY: the caller's contract.
        let left = match unsafe { time_left(clock, abstime) } {
            Ok(left) => left,
            Err(e) => return e,
        };
        // SAFETY: the caller's contract.
        match unsafe { wait(c, m, Some(left)) } {
            Ok(true) => libc::ETIMEDOUT,
            Ok(false) => 0,
            Err(e) => e,
        }
    })
}

/// Wake one waiter of `c`, if any. 0.
///
/// # Safety
/// `c` is null or points to an initialised `klock_cond_t`.
#[no_mangle]
pub unsafe extern "C" fn klock_cond_signal(c: *mut klock_cond_t) -> c_int {
    // SAFETY: the caller's contract.
    guarded(|| {
        errno(unsafe { get::<_, RawCondvar>(c) }.map(|c| {
            c.notify_one();
        }))
    })
}

/// Wake every waiter of `c`. 0.
///
/// # Safety
/// `c` is null or points to an initialised `klock_cond_t`.
#[no_mangle]
pub unsafe extern "C" fn klock_cond_broadcast(c: *mut klock_cond_t) -> c_int {
    // SAFETY: the caller's contract.
    guarded(|| {
        errno(unsafe { get::<_, RawCondvar>(c) }.map(|c| {
            c.notify_all();
        }))
    })
}
