//! `klock_spinlock_t`: [`klock::RawQSpinLock`], the kernel's queued
//! spinlock.

use crate::{errno, get, guarded, me};
use core::cell::UnsafeCell;
use core::ffi::c_int;
use core::mem::MaybeUninit;
use core::sync::atomic::{AtomicU32, Ordering::Relaxed};
use klock::qspinlock::QGuard;
use klock::RawQSpinLock;
use lock_api::RawMutex as _;

/// A spinlock: the kernel's queued spinlock with its paravirt slow path
/// (waiters queue FIFO and spin only while it pays, then sleep). For tiny
/// critical sections. Opaque; 32 bytes, 8-byte aligned (part of the ABI).
/// Initialise with `KLOCK_SPINLOCK_INITIALIZER` or `klock_spin_init`. No
/// timed lock (POSIX spinlocks have none either).
#[repr(C, align(8))]
pub struct klock_spinlock_t {
    _opaque: [u8; 32],
}

/// The layout inside a `klock_spinlock_t`; all-zero bytes are an
/// unlocked lock (`RawQSpinLock::new()` is all zeros).
#[repr(C)]
pub(crate) struct SpinImpl {
    raw: RawQSpinLock,
    /// The holder's tid, 0 if none: set by the holder after locking,
    /// cleared by it before unlocking.
    owner: AtomicU32,
    /// The holder's guard (how it took the lock); only the holder touches it.
    guard: UnsafeCell<MaybeUninit<QGuard>>,
}

impl SpinImpl {
    /// Record the hold of the calling thread `tid`, taken with `g`.
    #[inline(always)]
    fn took(&self, g: Option<QGuard>, tid: u32) -> Result<(), c_int> {
        let g = g.ok_or(libc::EBUSY)?;
        // SAFETY: we hold the lock: only we touch `guard`.
        unsafe { (*self.guard.get()).write(g) };
        self.owner.store(tid, Relaxed);
        Ok(())
    }

    #[inline(always)]
    fn lock(&self) -> Result<(), c_int> {
        // One lookup of the tid for the check and the record.
        let tid = me();
        if self.owner.load(Relaxed) == tid {
            return Err(libc::EDEADLK);
        }
        self.took(Some(self.raw.lock()), tid)
    }

    fn trylock(&self) -> Result<(), c_int> {
        self.took(self.raw.try_lock(), me())
    }

    #[inline(always)]
    fn unlock(&self) -> Result<(), c_int> {
        if self.owner.load(Relaxed) != me() {
            return Err(libc::EPERM);
        }
        self.owner.store(0, Relaxed);
        // SAFETY: we hold the lock and recorded its guard.
        unsafe {
            let g = (*self.guard.get()).assume_init_read();
            self.raw.unlock(g);
        }
        Ok(())
    }
}

/// Initialise `l` as an unlocked spinlock. Same as
/// `KLOCK_SPINLOCK_INITIALIZER`; `pshared` is ignored (the lock works in
/// shared memory too, with the threads of one process).
///
/// # Safety
/// `l` is null or points to writable memory no other thread uses now.
#[no_mangle]
pub unsafe extern "C" fn klock_spin_init(l: *mut klock_spinlock_t, pshared: c_int) -> c_int {
    let _ = pshared;
    guarded(|| {
        // SAFETY: the caller's contract (`get` checks null, size, alignment).
        errno(unsafe { get::<_, SpinImpl>(l) }.map(|_| {
            // SAFETY: non-null, writable, unused by others.
            unsafe {
                l.cast::<SpinImpl>().write(SpinImpl {
                    raw: RawQSpinLock::new(),
                    owner: AtomicU32::new(0),
                    guard: UnsafeCell::new(MaybeUninit::uninit()),
                })
            }
        }))
    })
}

/// Destroy `l`: 0, or `EBUSY` if it is held (or has waiters).
///
/// # Safety
/// `l` is null or points to an initialised `klock_spinlock_t`.
#[no_mangle]
pub unsafe extern "C" fn klock_spin_destroy(l: *mut klock_spinlock_t) -> c_int {
    guarded(|| {
        // SAFETY: the caller's contract.
        errno(unsafe { get::<_, SpinImpl>(l) }.and_then(|l| {
            if l.raw.is_locked() {
                Err(libc::EBUSY)
            } else {
                Ok(())
            }
        }))
    })
}

/// Lock `l`: 0, or `EDEADLK` if the calling thread holds it.
///
/// # Safety
/// `l` is null or points to an initialised `klock_spinlock_t`.
#[no_mangle]
pub unsafe extern "C" fn klock_spin_lock(l: *mut klock_spinlock_t) -> c_int {
    // SAFETY: the caller's contract.
    guarded(|| errno(unsafe { get::<_, SpinImpl>(l) }.and_then(SpinImpl::lock)))
}

/// Lock `l` if it is free: 0 or `EBUSY`.
///
/// # Safety
/// `l` is null or points to an initialised `klock_spinlock_t`.
#[no_mangle]
pub unsafe extern "C" fn klock_spin_trylock(l: *mut klock_spinlock_t) -> c_int {
    // SAFETY: the caller's contract.
    guarded(|| errno(unsafe { get::<_, SpinImpl>(l) }.and_then(SpinImpl::trylock)))
}

/// Unlock `l`: 0, or `EPERM` if the calling thread does not hold it.
///
/// # Safety
/// `l` is null or points to an initialised `klock_spinlock_t`.
#[no_mangle]
pub unsafe extern "C" fn klock_spin_unlock(l: *mut klock_spinlock_t) -> c_int {
    // SAFETY: the caller's contract.
    guarded(|| errno(unsafe { get::<_, SpinImpl>(l) }.and_then(SpinImpl::unlock)))
}
