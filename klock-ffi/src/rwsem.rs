//! `klock_rwsem_t`: [`klock::RawRwSem`], the kernel's read-write
//! semaphore.

use crate::time::time_left;
use crate::{errno, get, guarded, me};
use core::cell::UnsafeCell;
use core::ffi::c_int;
use core::mem::MaybeUninit;
use core::sync::atomic::{AtomicU32, Ordering::Relaxed};
use klock::rwsem::WriteGuard;
use klock::RawRwSem;
use lock_api::{GuardNoSend, RawRwLock as _, RawRwLockTimed as _};

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
#[repr(C)]
pub(crate) struct RwSemImpl {
    raw: RawRwSem,
    /// The write holder's tid, 0 if none: set by the writer after locking,
    /// cleared by it before unlocking. Only a thread that set it can read
    /// its own tid here.
    writer: AtomicU32,
    /// The writer's guard; only the write holder touches it.
    guard: UnsafeCell<MaybeUninit<WriteGuard>>,
}

impl RwSemImpl {
    fn written_by_me(&self) -> bool {
        self.writer.load(Relaxed) == me()
    }

    fn wrote(&self, g: Option<WriteGuard>, err: c_int) -> Result<(), c_int> {
        let g = g.ok_or(err)?;
        // SAFETY: we hold the write lock: only we touch `guard`.
        unsafe { (*self.guard.get()).write(g) };
        self.writer.store(me(), Relaxed);
        Ok(())
    }

    fn rdlock(&self) -> Result<(), c_int> {
        if self.written_by_me() {
            return Err(libc::EDEADLK);
        }
        let _ = self.raw.lock_shared();
        Ok(())
    }

    fn tryrdlock(&self) -> Result<(), c_int> {
        self.raw.try_lock_shared().map(drop).ok_or(libc::EBUSY)
    }

    fn timedrdlock(&self, clock: libc::clockid_t, ts: *const libc::timespec) -> Result<(), c_int> {
        // SAFETY: forwarded from the C caller's contract.
        let left = unsafe { time_left(clock, ts) }?;
        if self.written_by_me() {
            return Err(libc::EDEADLK);
        }
        let g = if left.is_zero() {
            self.raw.try_lock_shared()
        } else {
            self.raw.try_lock_shared_for(left)
        };
        g.map(drop).ok_or(libc::ETIMEDOUT)
    }

    fn wrlock(&self) -> Result<(), c_int> {
        if self.written_by_me() {
            return Err(libc::EDEADLK);
        }
        self.wrote(Some(self.raw.lock_exclusive()), 0)
    }

    fn trywrlock(&self) -> Result<(), c_int> {
        self.wrote(self.raw.try_lock_exclusive(), libc::EBUSY)
    }

    fn timedwrlock(&self, clock: libc::clockid_t, ts: *const libc::timespec) -> Result<(), c_int> {
        // SAFETY: forwarded from the C caller's contract.
        let left = unsafe { time_left(clock, ts) }?;
        if self.written_by_me() {
            return Err(libc::EDEADLK);
        }
        let g = if left.is_zero() {
            self.raw.try_lock_exclusive()
        } else {
            self.raw.try_lock_exclusive_for(left)
        };
        self.wrote(g, libc::ETIMEDOUT)
    }

    fn unlock(&self) -> Result<(), c_int> {
        if self.written_by_me() {
            self.writer.store(0, Relaxed);
            // SAFETY: we hold the write lock and recorded its guard.
            unsafe {
                let g = (*self.guard.get()).assume_init_read();
                self.raw.unlock_exclusive(g);
            }
            Ok(())
        } else if self.raw.is_locked_exclusive() || !self.raw.is_locked() {
            // Another thread's write hold, or no hold at all.
            Err(libc::EPERM)
        } else {
            // Readers hold it: by the caller's contract, the caller is one.
            // SAFETY: a read hold of the caller's is released.
            unsafe { self.raw.unlock_shared(GuardNoSend::new()) };
            Ok(())
        }
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
            unsafe {
                l.cast::<RwSemImpl>().write(RwSemImpl {
                    raw: RawRwSem::new(),
                    writer: AtomicU32::new(0),
                    guard: UnsafeCell::new(MaybeUninit::uninit()),
                })
            }
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
            if l.raw.is_locked() {
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
