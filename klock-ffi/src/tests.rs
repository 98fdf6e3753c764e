//! The C API's error paths, called from Rust.

use crate::*;
use core::ptr::null_mut;
use libc::{timespec, CLOCK_MONOTONIC, EBUSY, EDEADLK, EINVAL, EPERM, ETIMEDOUT};
use std::mem::MaybeUninit;

/// A zeroed C lock (what the `KLOCK_*_INITIALIZER` macros give).
fn zeroed<T>() -> Box<T> {
    // SAFETY: every C lock type is a byte array, valid when all-zero.
    Box::new(unsafe { MaybeUninit::<T>::zeroed().assume_init() })
}

fn now_plus(ns: i64) -> timespec {
    let mut t = timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid out-pointer.
    assert_eq!(unsafe { libc::clock_gettime(CLOCK_MONOTONIC, &mut t) }, 0);
    let total = t.tv_sec as i128 * 1_000_000_000 + t.tv_nsec as i128 + ns as i128;
    timespec {
        tv_sec: (total / 1_000_000_000) as libc::time_t,
        tv_nsec: (total % 1_000_000_000) as libc::c_long,
    }
}

#[test]
fn null_pointers_are_einval() {
    let ts = now_plus(0);
    // SAFETY: null is allowed everywhere; it is rejected.
    unsafe {
        assert_eq!(klock_mutex_init(null_mut(), core::ptr::null()), EINVAL);
        assert_eq!(klock_mutex_lock(null_mut()), EINVAL);
        assert_eq!(klock_mutex_trylock(null_mut()), EINVAL);
        assert_eq!(klock_mutex_timedlock(null_mut(), &ts), EINVAL);
        assert_eq!(klock_mutex_unlock(null_mut()), EINVAL);
        assert_eq!(klock_mutex_destroy(null_mut()), EINVAL);
        assert_eq!(klock_rwsem_init(null_mut(), core::ptr::null()), EINVAL);
        assert_eq!(klock_rwsem_rdlock(null_mut()), EINVAL);
        assert_eq!(klock_rwsem_wrlock(null_mut()), EINVAL);
        assert_eq!(klock_rwsem_timedwrlock(null_mut(), &ts), EINVAL);
        assert_eq!(klock_rwsem_unlock(null_mut()), EINVAL);
        assert_eq!(klock_rwlock_init(null_mut(), core::ptr::null()), EINVAL);
        assert_eq!(klock_rwlock_rdlock(null_mut()), EINVAL);
        assert_eq!(klock_rwlock_unlock(null_mut()), EINVAL);
        assert_eq!(klock_spin_init(null_mut(), 0), EINVAL);
        assert_eq!(klock_spin_lock(null_mut()), EINVAL);
        assert_eq!(klock_spin_unlock(null_mut()), EINVAL);
        assert_eq!(klock_rtmutex_init(null_mut(), core::ptr::null()), EINVAL);
        assert_eq!(klock_rtmutex_lock(null_mut()), EINVAL);
        assert_eq!(klock_rtmutex_unlock(null_mut()), EINVAL);
        assert_eq!(klock_cond_init(null_mut(), core::ptr::null()), EINVAL);
        assert_eq!(klock_cond_signal(null_mut()), EINVAL);
        assert_eq!(klock_cond_broadcast(null_mut()), EINVAL);
        let mut m = zeroed::<klock_mutex_t>();
        assert_eq!(klock_cond_wait(null_mut(), &mut *m), EINVAL);
        let mut c = zeroed::<klock_cond_t>();
        assert_eq!(klock_cond_wait(&mut *c, null_mut()), EINVAL);
        // A null deadline, and a non-null attr.
        assert_eq!(klock_mutex_timedlock(&mut *m, core::ptr::null()), EINVAL);
        let attr = 1u8;
        assert_eq!(
            klock_mutex_init(&mut *m, (&attr as *const u8).cast()),
            EINVAL
        );
    }
}

#[test]
fn bad_timespecs_and_clocks_are_einval() {
    let mut m = zeroed::<klock_mutex_t>();
    let mut s = zeroed::<klock_rwsem_t>();
    let mut l = zeroed::<klock_rwlock_t>();
    let mut r = zeroed::<klock_rtmutex_t>();
    let mut c = zeroed::<klock_cond_t>();
    let mut bad = now_plus(1_000_000);
    for nsec in [-1, 1_000_000_000] {
        bad.tv_nsec = nsec;
        // SAFETY: valid locks and deadlines.
        unsafe {
            assert_eq!(klock_mutex_timedlock(&mut *m, &bad), EINVAL);
            assert_eq!(klock_rwsem_timedrdlock(&mut *s, &bad), EINVAL);
            assert_eq!(klock_rwsem_timedwrlock(&mut *s, &bad), EINVAL);
            assert_eq!(klock_rwlock_timedrdlock(&mut *l, &bad), EINVAL);
            assert_eq!(klock_rwlock_timedwrlock(&mut *l, &bad), EINVAL);
            assert_eq!(klock_rtmutex_timedlock(&mut *r, &bad), EINVAL);
            assert_eq!(klock_mutex_lock(&mut *m), 0);
            assert_eq!(klock_cond_timedwait(&mut *c, &mut *m, &bad), EINVAL);
            assert_eq!(klock_mutex_unlock(&mut *m), 0);
        }
    }
    let ok = now_plus(1_000_000);
    // SAFETY: valid locks and deadlines.
    unsafe {
        assert_eq!(
            klock_mutex_clocklock(&mut *m, libc::CLOCK_PROCESS_CPUTIME_ID, &ok),
            EINVAL
        );
        assert_eq!(
            klock_rwsem_clockwrlock(&mut *s, libc::CLOCK_BOOTTIME, &ok),
            EINVAL
        );
        assert_eq!(klock_rtmutex_clocklock(&mut *r, 12345, &ok), EINVAL);
        // Nothing was locked by the failed calls.
        assert_eq!(klock_mutex_destroy(&mut *m), 0);
        assert_eq!(klock_rwsem_destroy(&mut *s), 0);
        assert_eq!(klock_rwlock_destroy(&mut *l), 0);
        assert_eq!(klock_rtmutex_destroy(&mut *r), 0);
    }
}

#[test]
fn unlock_of_unlocked_is_eperm() {
    let mut m = zeroed::<klock_mutex_t>();
    let mut s = zeroed::<klock_rwsem_t>();
    let mut l = zeroed::<klock_rwlock_t>();
    let mut p = zeroed::<klock_spinlock_t>();
    let mut r = zeroed::<klock_rtmutex_t>();
    let mut c = zeroed::<klock_cond_t>();
    // SAFETY: valid locks.
    unsafe {
        assert_eq!(klock_mutex_unlock(&mut *m), EPERM);
        assert_eq!(klock_rwsem_unlock(&mut *s), EPERM);
        assert_eq!(klock_rwlock_unlock(&mut *l), EPERM);
        assert_eq!(klock_spin_unlock(&mut *p), EPERM);
        assert_eq!(klock_rtmutex_unlock(&mut *r), EPERM);
        assert_eq!(klock_cond_wait(&mut *c, &mut *m), EPERM);
        // Locked and unlocked once: a second unlock is EPERM too.
        assert_eq!(klock_mutex_lock(&mut *m), 0);
        assert_eq!(klock_mutex_unlock(&mut *m), 0);
        assert_eq!(klock_mutex_unlock(&mut *m), EPERM);
        assert_eq!(klock_spin_lock(&mut *p), 0);
        assert_eq!(klock_spin_unlock(&mut *p), 0);
        assert_eq!(klock_spin_unlock(&mut *p), EPERM);
    }
}

/// Raw pointers moved into another thread (the test keeps the locks alive).
struct SendPtr<T>(*mut T);
// SAFETY: the pointee is a C lock, made for sharing between threads.
unsafe impl<T> Send for SendPtr<T> {}

#[test]
fn unlock_by_other_thread_is_eperm_and_misuse_is_reported() {
    let mut m = zeroed::<klock_mutex_t>();
    let mut s = zeroed::<klock_rwsem_t>();
    let mut p = zeroed::<klock_spinlock_t>();
    let mut r = zeroed::<klock_rtmutex_t>();
    // SAFETY: valid locks.
    unsafe {
        assert_eq!(klock_mutex_lock(&mut *m), 0);
        assert_eq!(klock_rwsem_wrlock(&mut *s), 0);
        assert_eq!(klock_spin_lock(&mut *p), 0);
        assert_eq!(klock_rtmutex_lock(&mut *r), 0);
        // Relocking, destroying while held.
        assert_eq!(klock_mutex_lock(&mut *m), EDEADLK);
        assert_eq!(klock_mutex_trylock(&mut *m), EBUSY);
        assert_eq!(klock_rwsem_wrlock(&mut *s), EDEADLK);
        assert_eq!(klock_rwsem_rdlock(&mut *s), EDEADLK);
        assert_eq!(klock_spin_lock(&mut *p), EDEADLK);
        assert_eq!(klock_rtmutex_lock(&mut *r), EDEADLK);
        assert_eq!(klock_rtmutex_trylock(&mut *r), EBUSY);
        assert_eq!(klock_mutex_destroy(&mut *m), EBUSY);
        assert_eq!(klock_rwsem_destroy(&mut *s), EBUSY);
        assert_eq!(klock_spin_destroy(&mut *p), EBUSY);
        assert_eq!(klock_rtmutex_destroy(&mut *r), EBUSY);
    }
    let ptrs = (
        SendPtr(&mut *m as *mut klock_mutex_t),
        SendPtr(&mut *s as *mut klock_rwsem_t),
        SendPtr(&mut *p as *mut klock_spinlock_t),
        SendPtr(&mut *r as *mut klock_rtmutex_t),
    );
    std::thread::spawn(move || {
        let (m, s, p, r) = ptrs;
        let past = now_plus(-1);
        // SAFETY: the locks outlive this thread (joined below).
        unsafe {
            assert_eq!(klock_mutex_unlock(m.0), EPERM);
            assert_eq!(klock_rwsem_unlock(s.0), EPERM);
            assert_eq!(klock_spin_unlock(p.0), EPERM);
            assert_eq!(klock_rtmutex_unlock(r.0), EPERM);
            assert_eq!(klock_mutex_timedlock(m.0, &past), ETIMEDOUT);
            assert_eq!(klock_rwsem_timedrdlock(s.0, &past), ETIMEDOUT);
            assert_eq!(klock_rtmutex_timedlock(r.0, &past), ETIMEDOUT);
            let soon = now_plus(5_000_000);
            assert_eq!(klock_mutex_timedlock(m.0, &soon), ETIMEDOUT);
        }
    })
    .join()
    .unwrap();
    // SAFETY: valid locks, held by this thread.
    unsafe {
        assert_eq!(klock_mutex_unlock(&mut *m), 0);
        assert_eq!(klock_rwsem_unlock(&mut *s), 0);
        assert_eq!(klock_spin_unlock(&mut *p), 0);
        assert_eq!(klock_rtmutex_unlock(&mut *r), 0);
        assert_eq!(klock_mutex_destroy(&mut *m), 0);
        assert_eq!(klock_rwsem_destroy(&mut *s), 0);
        assert_eq!(klock_spin_destroy(&mut *p), 0);
        assert_eq!(klock_rtmutex_destroy(&mut *r), 0);
    }
}

/// The all-zero lock is the Rust `new()` lock, for the types that do not
/// initialise lazily (their `Debug` shows every field that matters).
#[test]
fn zero_bytes_are_the_unlocked_lock() {
    fn same<T: core::fmt::Debug>(new: T) {
        // SAFETY: only formatted, then forgotten; for these types all-zero
        // is what is checked here.
        let z = core::mem::ManuallyDrop::new(unsafe { MaybeUninit::<T>::zeroed().assume_init() });
        assert_eq!(format!("{:?}", &*z), format!("{new:?}"));
    }
    same(klock::RawRwSem::new());
    same(klock::RawQSpinLock::new());
    same(klock::RawQRwLock::new());
    same(klock::RawRtMutex::new());
    same(klock::RawCondvar::new());
}
