//! `klock_mutex_t`: [`klock::RawMutex`], the kernel's optimistic-spinning
//! mutex.

use crate::time::time_left;
use crate::{errno, get, guarded, me};
use core::cell::UnsafeCell;
use core::ffi::c_int;
use core::mem::MaybeUninit;
use core::sync::atomic::{AtomicU32, Ordering};
use klock::mutex::OwnerGuard;
use klock::RawMutex;
use lock_api::{RawMutex as _, RawMutexTimed as _};

/// A mutex: the kernel's `struct mutex` (waiters spin while the owner
/// runs, then sleep in FIFO order; hand-off against starvation). Opaque;
/// 128 bytes, 8-byte aligned (part of the ABI). Initialise with
/// `KLOCK_MUTEX_INITIALIZER` or `klock_mutex_init`. Error-checking: a
/// relock by the owner is `EDEADLK`, an unlock by a non-owner `EPERM`.
#[repr(C, align(8))]
pub struct klock_mutex_t {
    _opaque: [u8; 128],
}

/// Not yet initialised: all-zero bytes from `KLOCK_MUTEX_INITIALIZER`.
const ZEROED: u32 = 0;
/// A thread is writing `RawMutex::new()` in place.
const INITIALISING: u32 = 1;
/// `raw` holds a mutex.
const READY: u32 = 2;

/// The layout inside a `klock_mutex_t`. `RawMutex::new()` is not all-zero
/// bytes (its adaptive spin state starts non-zero), so a zeroed mutex is
/// initialised in place by its first user.
#[repr(C)]
pub(crate) struct MutexImpl {
    state: AtomicU32,
    /// The owner's guard, written by the owner after locking and read by
    /// it to unlock: only the thread that holds the lock touches it.
    guard: UnsafeCell<MaybeUninit<OwnerGuard>>,
    raw: UnsafeCell<MaybeUninit<RawMutex>>,
}

impl MutexImpl {
    /// The mutex, initialised in place on first use.
    #[inline]
    pub(crate) fn raw(&self) -> &RawMutex {
        if self.state.load(Ordering::Acquire) != READY {
            self.init_slow();
        }
        // SAFETY: READY was observed with Acquire (here or in init_slow),
        // after the Release that published the initialised mutex.
        unsafe { (*self.raw.get()).assume_init_ref() }
    }

    #[cold]
    fn init_slow(&self) {
        loop {
            match self.state.compare_exchange(
                ZEROED,
                INITIALISING,
                Ordering::Acquire,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    // SAFETY: we won the CAS: no other thread reads or
                    // writes `raw` until we publish READY.
                    unsafe { (*self.raw.get()).write(RawMutex::new()) };
                    self.state.store(READY, Ordering::Release);
                    return;
                }
                Err(READY) => return,
                Err(_) => std::thread::yield_now(),
            }
        }
    }

    /// Whether the calling thread holds the mutex.
    #[inline]
    pub(crate) fn owned_by_me(&self) -> bool {
        self.raw().owner_tid() == Some(me())
    }

    /// Record the guard of a lock the calling thread just took.
    ///
    /// # Safety
    /// The calling thread holds the mutex with `g`.
    #[inline]
    pub(crate) unsafe fn put_guard(&self, g: OwnerGuard) {
        // SAFETY: only the holder touches `guard` (the caller holds it).
        unsafe { (*self.guard.get()).write(g) };
    }

    /// Take back the guard recorded by [`Self::put_guard`].
    ///
    /// # Safety
    /// The calling thread holds the mutex (and recorded its guard).
    #[inline]
    pub(crate) unsafe fn take_guard(&self) -> OwnerGuard {
        // SAFETY: only the holder touches `guard`; it recorded it.
        unsafe { (*self.guard.get()).assume_init_read() }
    }

    #[inline(always)]
    fn lock(&self) -> Result<(), c_int> {
        // The relock check is the lock's own, made only if its CAS fails.
        let g = self
            .raw()
            .raw_lock_unless_held_as(me())
            .ok_or(libc::EDEADLK)?;
        // SAFETY: we hold it with `g`.
        unsafe { self.put_guard(g) };
        Ok(())
    }

    fn trylock(&self) -> Result<(), c_int> {
        let g = self.raw().raw_try_lock_as(me()).ok_or(libc::EBUSY)?;
        // SAFETY: we hold it with `g`.
        unsafe { self.put_guard(g) };
        Ok(())
    }

    fn timedlock(&self, clock: libc::clockid_t, ts: *const libc::timespec) -> Result<(), c_int> {
        // SAFETY: forwarded from the C caller's contract.
        let left = unsafe { time_left(clock, ts) }?;
        if self.owned_by_me() {
            return Err(libc::EDEADLK);
        }
        let raw = self.raw();
        let g = if left.is_zero() {
            raw.try_lock()
        } else {
            raw.try_lock_for(left)
        };
        let g = g.ok_or(libc::ETIMEDOUT)?;
        // SAFETY: we hold it with `g`.
        unsafe { self.put_guard(g) };
        Ok(())
    }

    #[inline(always)]
    fn unlock(&self) -> Result<(), c_int> {
        if !self.owned_by_me() {
            return Err(libc::EPERM);
        }
        // SAFETY: we hold it, and recorded its guard when we locked.
        unsafe {
            let g = self.take_guard();
            self.raw().unlock(g);
        }
        Ok(())
    }
}

/// Initialise `m` as an unlocked mutex. Same as
/// `KLOCK_MUTEX_INITIALIZER`; `attr` is reserved and must be null.
/// Returns 0, or `EINVAL` (null `m`, non-null `attr`).
///
/// # Safety
/// `m` is null or points to writable memory no other thread uses now.
#[no_mangle]
pub unsafe extern "C" fn klock_mutex_init(
    m: *mut klock_mutex_t,
    attr: *const core::ffi::c_void,
) -> c_int {
    guarded(|| {
        if !attr.is_null() {
            return libc::EINVAL;
        }
        // SAFETY: the caller's contract.
        let m = match unsafe { get::<_, MutexImpl>(m) } {
            Ok(m) => m,
            Err(e) => return e,
        };
        // SAFETY: nobody else uses `m` now (the caller's contract).
        unsafe { (*m.raw.get()).write(RawMutex::new()) };
        m.state.store(READY, Ordering::Release);
        0
    })
}

/// Destroy `m`: 0, or `EBUSY` if it is locked. Nothing is freed (the lock
/// owns no memory); it may be initialised again.
///
/// # Safety
/// `m` is null or points to a `klock_mutex_t` initialised by this API.
#[no_mangle]
pub unsafe extern "C" fn klock_mutex_destroy(m: *mut klock_mutex_t) -> c_int {
    guarded(|| {
        // SAFETY: the caller's contract.
        errno(unsafe { get::<_, MutexImpl>(m) }.and_then(|m| {
            if m.raw().is_locked() {
                Err(libc::EBUSY)
            } else {
                Ok(())
            }
        }))
    })
}

/// Lock `m`, waiting as long as it takes. 0, or `EDEADLK` if the calling
/// thread already holds it.
///
/// # Safety
/// `m` is null or points to a `klock_mutex_t` initialised by this API.
#[no_mangle]
pub unsafe extern "C" fn klock_mutex_lock(m: *mut klock_mutex_t) -> c_int {
    // SAFETY: the caller's contract.
    guarded(|| errno(unsafe { get::<_, MutexImpl>(m) }.and_then(MutexImpl::lock)))
}

/// Lock `m` if it is free: 0, or `EBUSY` (also when the calling thread
/// holds it).
///
/// # Safety
/// `m` is null or points to a `klock_mutex_t` initialised by this API.
#[no_mangle]
pub unsafe extern "C" fn klock_mutex_trylock(m: *mut klock_mutex_t) -> c_int {
    // SAFETY: the caller's contract.
    guarded(|| errno(unsafe { get::<_, MutexImpl>(m) }.and_then(MutexImpl::trylock)))
}

/// Lock `m` unless the absolute `CLOCK_MONOTONIC` deadline `abstime`
/// passes first: 0, `ETIMEDOUT`, `EDEADLK` (already held by the caller),
/// or `EINVAL` (bad `abstime`).
///
/// # Safety
/// `m` is null or points to a `klock_mutex_t` initialised by this API;
/// `abstime` is null or readable.
#[no_mangle]
pub unsafe extern "C" fn klock_mutex_timedlock(
    m: *mut klock_mutex_t,
    abstime: *const libc::timespec,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { klock_mutex_clocklock(m, libc::CLOCK_MONOTONIC, abstime) }
}

/// As `klock_mutex_timedlock`, with the deadline on `clock`
/// (`CLOCK_MONOTONIC` or `CLOCK_REALTIME`; another clock is `EINVAL`).
///
/// # Safety
/// As `klock_mutex_timedlock`.
#[no_mangle]
pub unsafe extern "C" fn klock_mutex_clocklock(
    m: *mut klock_mutex_t,
    clock: libc::clockid_t,
    abstime: *const libc::timespec,
) -> c_int {
    guarded(|| {
        // SAFETY: the caller's contract.
        errno(unsafe { get::<_, MutexImpl>(m) }.and_then(|m| m.timedlock(clock, abstime)))
    })
}

/// Unlock `m`: 0, or `EPERM` if the calling thread does not hold it.
///
/// # Safety
/// `m` is null or points to a `klock_mutex_t` initialised by this API.
#[no_mangle]
pub unsafe extern "C" fn klock_mutex_unlock(m: *mut klock_mutex_t) -> c_int {
    // SAFETY: the caller's contract.
    guarded(|| errno(unsafe { get::<_, MutexImpl>(m) }.and_then(MutexImpl::unlock)))
}
