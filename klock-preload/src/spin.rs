//! `pthread_spin_*`: [`RawQSpinLock32`], the kernel's queued spinlock with
//! its paravirt slow path, in place: its word is the 4-byte
//! `pthread_spinlock_t` (0 unlocked).
//!
//! A process-shared spinlock cannot be a queued spinlock (its queue nodes
//! and sleeps are the process's own), and glibc's is a bare
//! test-and-set word; forwarding to it would leave nothing in the 4 bytes
//! to tell the two apart later. So a process-shared spinlock is a
//! test-and-test-and-set lock here, marked in place by [`PSHARED`]: bit
//! 15, in the queued spinlock's pending byte, whose bits 9..15 it never
//! sets.

use crate::guarded;
use crate::stat::{self, Kind};
use core::ffi::c_int;
use core::sync::atomic::{
    AtomicU32,
    Ordering::{Acquire, Relaxed, Release},
};
use klock::RawQSpinLock32;
use libc::pthread_spinlock_t;

const _: () = assert!(core::mem::size_of::<pthread_spinlock_t>() == 4);
const _: () = assert!(core::mem::size_of::<RawQSpinLock32>() == 4);
const _: () =
    assert!(core::mem::align_of::<RawQSpinLock32>() <= core::mem::align_of::<pthread_spinlock_t>());

/// Marks a process-shared test-and-set spinlock.
const PSHARED: u32 = 1 << 15;
/// Its locked bit.
const TAS_LOCKED: u32 = 1;
/// Busy re-reads of a held process-shared lock between `sched_yield`s.
const TAS_SPINS: u32 = 128;

/// The lock word and the queued spinlock (the same 4 bytes: the queued
/// spinlock is its word), or `EINVAL` for null.
///
/// # Safety
/// `l` is null or points to a live `pthread_spinlock_t`.
#[inline]
unsafe fn raw<'a>(
    l: *mut pthread_spinlock_t,
) -> Result<(&'a AtomicU32, &'a RawQSpinLock32), c_int> {
    if l.is_null() {
        return Err(libc::EINVAL);
    }
    // SAFETY: non-null, live, 4 bytes, aligned (asserted above); the
    // queued spinlock is its one AtomicU32 word, valid for every value.
    Ok(unsafe { (&*l.cast::<AtomicU32>(), &*l.cast::<RawQSpinLock32>()) })
}

/// Initialise `l`; `pshared` chooses the test-and-set form.
///
/// # Safety
/// `l` is null or writable and unused by others.
#[no_mangle]
pub unsafe extern "C" fn pthread_spin_init(l: *mut pthread_spinlock_t, pshared: c_int) -> c_int {
    crate::forward_family!(Spin, pthread_spin_init: fn(*mut pthread_spinlock_t, c_int) -> c_int, l, pshared);
    guarded(|| {
        // SAFETY: the caller's contract.
        match unsafe { raw(l) } {
            Ok((w, _)) => {
                let v = if pshared == libc::PTHREAD_PROCESS_SHARED {
                    PSHARED
                } else {
                    0
                };
                // Relaxed: the program publishes the initialised lock.
                w.store(v, Relaxed);
                0
            }
            Err(e) => e,
        }
    })
}

/// Destroy `l`: 0, or `EBUSY` if it is held or contended.
///
/// # Safety
/// `l` is null or a live spinlock.
#[no_mangle]
pub unsafe extern "C" fn pthread_spin_destroy(l: *mut pthread_spinlock_t) -> c_int {
    crate::forward_family!(Spin, pthread_spin_destroy: fn(*mut pthread_spinlock_t) -> c_int, l);
    guarded(|| {
        // SAFETY: the caller's contract.
        match unsafe { raw(l) } {
            Ok((w, q)) => {
                let v = w.load(Relaxed);
                let busy = if v & PSHARED != 0 {
                    v & TAS_LOCKED != 0
                } else {
                    q.is_contended_or_locked()
                };
                if busy {
                    libc::EBUSY
                } else {
                    0
                }
            }
            Err(e) => e,
        }
    })
}

/// Take the test-and-set form: spin on reads (no stores while held),
/// yielding now and then so a preempted holder can run.
fn tas_lock(w: &AtomicU32) {
    let mut n = 0u32;
    loop {
        let v = w.load(Relaxed);
        // Acquire pairs with the Release in the holder's unlock.
        if v & TAS_LOCKED == 0
            && w.compare_exchange_weak(v, v | TAS_LOCKED, Acquire, Relaxed)
                .is_ok()
        {
            return;
        }
        n = n.wrapping_add(1);
        if n.is_multiple_of(TAS_SPINS) {
            std::thread::yield_now();
        } else {
            core::hint::spin_loop();
        }
    }
}

/// Lock `l`, spinning (a queued spinlock's waiters sleep once spinning
/// stops paying). A holder that locks again spins forever, as in glibc.
///
/// Only the unprofiled fast path is here; the forwarding, the profile,
/// the test-and-set loop and the slow path are `lock_slow`'s (figures in
/// `docs/preload.md`, "Spinlocks").
///
/// # Safety
/// `l` is null or a live spinlock.
#[no_mangle]
pub unsafe extern "C" fn pthread_spin_lock(l: *mut pthread_spinlock_t) -> c_int {
    if !l.is_null() && !crate::to_glibc(crate::lock_map::Family::Spin) && !stat::on() {
        // The queued spinlock's fast path first, without loading the word
        // (see RawQSpinLock32::raw_lock_fast): a process-shared lock's
        // PSHARED, in the pending byte, makes it fail, and its word says
        // which lock this is.
        // SAFETY: non-null and live (the caller's contract); see `raw`.
        let q = unsafe { &*l.cast::<RawQSpinLock32>() };
        // As `guarded`, which returns only a code.
        return match std::panic::catch_unwind(|| q.raw_lock_fast()) {
            Ok(Ok(())) => 0,
            // SAFETY: as above.
            Ok(Err(v)) => unsafe { lock_slow(l, Some(v)) },
            Err(_) => libc::ENOTRECOVERABLE,
        };
    }
    // SAFETY: the caller's contract.
    unsafe { lock_slow(l, None) }
}

/// Everything but an unprofiled fast path: `failed` is the word that fast
/// path found, `None` if it was not tried (a null lock, a forwarded
/// family, the profile on).
///
/// # Safety
/// As for `pthread_spin_lock`.
#[cold]
#[inline(never)]
unsafe fn lock_slow(l: *mut pthread_spinlock_t, failed: Option<u32>) -> c_int {
    crate::forward_family!(Spin, pthread_spin_lock: fn(*mut pthread_spinlock_t) -> c_int, l);
    guarded(|| {
        // SAFETY: the caller's contract.
        let (w, q) = match unsafe { raw(l) } {
            Ok(wq) => wq,
            Err(e) => return e,
        };
        let v = failed.unwrap_or_else(|| w.load(Relaxed));
        if v & PSHARED != 0 {
            tas_lock(w);
        } else if stat::on() {
            stat::lock_exclusive(
                l as usize,
                Kind::Spin,
                || q.raw_try_lock(),
                || {
                    q.raw_lock();
                    true
                },
            );
        } else {
            q.raw_lock();
        }
        0
    })
}

/// Lock `l` if it is free: 0 or `EBUSY`.
///
/// # Safety
/// `l` is null or a live spinlock.
#[no_mangle]
pub unsafe extern "C" fn pthread_spin_trylock(l: *mut pthread_spinlock_t) -> c_int {
    crate::forward_family!(Spin, pthread_spin_trylock: fn(*mut pthread_spinlock_t) -> c_int, l);
    guarded(|| {
        // SAFETY: the caller's contract.
        match unsafe { raw(l) } {
            Ok((w, q)) => {
                // The pending byte alone first, as in the unlock.
                let got = if q.pending_byte() & PSHARED != 0 {
                    let v = w.load(Relaxed);
                    // Acquire: as in tas_lock.
                    v & TAS_LOCKED == 0
                        && w.compare_exchange(v, v | TAS_LOCKED, Acquire, Relaxed)
                            .is_ok()
                } else {
                    let got = q.raw_try_lock();
                    if got && stat::on() {
                        stat::acquired(l as usize, Kind::Spin, true);
                    }
                    got
                };
                if got {
                    0
                } else {
                    libc::EBUSY
                }
            }
            Err(e) => e,
        }
    })
}

/// Unlock `l`: 0. As in glibc the owner is not checked (a spinlock
/// records none); unlocking an unlocked lock does nothing.
///
/// The unprofiled queued spinlock's unlock alone here, as in
/// `pthread_spin_lock`.
///
/// # Safety
/// `l` is null or a live spinlock.
#[no_mangle]
pub unsafe extern "C" fn pthread_spin_unlock(l: *mut pthread_spinlock_t) -> c_int {
    if !l.is_null() && !crate::to_glibc(crate::lock_map::Family::Spin) && !stat::on() {
        // SAFETY: non-null and live (the caller's contract); see `raw`.
        let q = unsafe { &*l.cast::<RawQSpinLock32>() };
        if q.pending_byte() & PSHARED == 0 {
            return guarded(|| {
                if q.locked_byte() != 0 {
                    // SAFETY: held, as in `unlock_slow`.
                    unsafe { q.raw_unlock() };
                }
                0
            });
        }
    }
    // SAFETY: the caller's contract.
    unsafe { unlock_slow(l) }
}

/// `pthread_spin_unlock` of a null, forwarded, profiled or
/// process-shared lock.
///
/// # Safety
/// As for `pthread_spin_unlock`.
#[cold]
#[inline(never)]
unsafe fn unlock_slow(l: *mut pthread_spinlock_t) -> c_int {
    crate::forward_family!(Spin, pthread_spin_unlock: fn(*mut pthread_spinlock_t) -> c_int, l);
    guarded(|| {
        // SAFETY: the caller's contract.
        match unsafe { raw(l) } {
            Ok((w, q)) => {
                // The two bytes at their own width, not the word: a 4-byte
                // load just after the queued spinlock's byte-wide fast
                // path waits for its store to drain (RawQSpinLock32's
                // locked_byte).
                if q.pending_byte() & PSHARED != 0 {
                    // Release pairs with the next locker's Acquire CAS.
                    w.fetch_and(!TAS_LOCKED, Release);
                } else if q.locked_byte() != 0 {
                    // A clear locked byte means nobody holds it (a pending
                    // or queued waiter sets it as it takes over), and the
                    // queued spinlock's unlock must not run then.
                    if stat::on() {
                        stat::releasing_exclusive(l as usize, Kind::Spin);
                    }
                    // SAFETY: held (by the caller, or by another thread
                    // the program unlocks for, as glibc allows).
                    unsafe { q.raw_unlock() };
                }
                0
            }
            Err(e) => e,
        }
    })
}
