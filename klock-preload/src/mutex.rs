//! `pthread_mutex_*`: [`RawMutexCompact`] in place inside the 40-byte
//! `pthread_mutex_t`.
//!
//! ```text
//! bytes 0..16   owner word, OSQ tail, wait_lock, spin budget (the lock)
//! bytes 16..20  the kind: glibc's `__kind`, where its static initializers
//!               put it (recursive 1, errorcheck 2, adaptive 3); the lock
//!               never touches it
//! bytes 20..24  extra holds of a recursive mutex (glibc's `__spins` and
//!               `__elision`, zero in every static initializer)
//! bytes 24..40  the FIFO wait list
//! ```
//!
//! A mutex whose attributes klock cannot honour in place (process-shared,
//! robust, priority inheritance or protection) is glibc's: its init is
//! forwarded, and glibc records those attributes as bits of `__kind`
//! ([`GLIBC_ONLY`]), which every later call reads to forward as well.

use crate::stat::{self, Kind};
use crate::time::time_left;
use crate::{forwarded, guarded, real};
use core::ffi::c_int;
use core::sync::atomic::{AtomicU32, Ordering::Relaxed};
use klock::mutex::RawMutexCompact;
use libc::{pthread_mutex_t, pthread_mutexattr_t, timespec};

const _: () = assert!(core::mem::size_of::<pthread_mutex_t>() == 40);
const _: () = assert!(core::mem::size_of::<RawMutexCompact>() <= 40);
const _: () =
    assert!(core::mem::align_of::<RawMutexCompact>() <= core::mem::align_of::<pthread_mutex_t>());

const RECURSIVE: u32 = libc::PTHREAD_MUTEX_RECURSIVE as u32;
const ERRORCHECK: u32 = libc::PTHREAD_MUTEX_ERRORCHECK as u32;
/// glibc's `PTHREAD_MUTEX_ADAPTIVE_NP`: a normal mutex to klock (its own
/// lock decides whether to spin).
const ADAPTIVE: u32 = 3;
/// The type in the kind word: normal 0, recursive 1, errorcheck 2,
/// adaptive 3 (glibc's values, which its static initializers write).
const TYPE_MASK: u32 = 3;
/// The bits glibc's `pthread_mutex_init` adds to `__kind` for a robust
/// (16), priority-inheritance (32), priority-protect (64) or
/// process-shared (128) mutex: such a mutex is glibc's own.
const GLIBC_ONLY: u32 = 16 | 32 | 64 | 128;

extern "C" {
    // In glibc (since 2.12 for the robust one); declared here as the libc
    // crate lacks them for this target.
    fn pthread_mutexattr_gettype(attr: *const pthread_mutexattr_t, kind: *mut c_int) -> c_int;
    fn pthread_mutexattr_getrobust(attr: *const pthread_mutexattr_t, robust: *mut c_int) -> c_int;
    fn pthread_mutexattr_getprotocol(
        attr: *const pthread_mutexattr_t,
        protocol: *mut c_int,
    ) -> c_int;
}

/// The klock mutex in `m`, or `EINVAL` for a null pointer.
///
/// # Safety
/// `m` is null or points to a live `pthread_mutex_t`.
#[inline]
unsafe fn raw<'a>(m: *mut pthread_mutex_t) -> Result<&'a RawMutexCompact, c_int> {
    if m.is_null() {
        return Err(libc::EINVAL);
    }
    // SAFETY: non-null and live by the caller's contract; the size and
    // alignment fit (asserted above); every byte pattern the program's
    // initializers or this library leave is a valid RawMutexCompact
    // (all-zero is unlocked), and it is only changed through atomics and
    // its UnsafeCell.
    Ok(unsafe { &*m.cast::<RawMutexCompact>() })
}

/// The lean path's mutex and the caller's tid: `Some` for a normal mutex
/// (kind 0: `PTHREAD_MUTEX_INITIALIZER`, or initialised without
/// attributes) or an adaptive one (kind 3), which klock treats alike,
/// while the mutex family may take its lean path ([`crate::mutex_lean`]:
/// klock's, unprofiled, the tid read from glibc's thread descriptor).
/// Its lock is [`lock_unprofiled`], its trylock the lock's own, and its
/// holder's unlock [`unlock_held`]: what the general
/// path does for such a mutex, without the tests that the lean flag
/// answers at once. `None`: the general path decides (other kinds,
/// glibc's mutexes, null, a thread without its tid yet, and the unlock
/// of a mutex the caller does not hold).
///
/// # Safety
/// `m` is null or points to a live `pthread_mutex_t`.
#[inline(always)]
unsafe fn lean<'a>(m: *mut pthread_mutex_t) -> Option<(&'a RawMutexCompact, u32)> {
    if !crate::mutex_lean() || m.is_null() {
        return None;
    }
    // SAFETY: non-null; as in `raw`.
    let r = unsafe { &*m.cast::<RawMutexCompact>() };
    let k = kind(r);
    if k != 0 && k != ADAPTIVE {
        return None;
    }
    let tid = klock::thread::glibc_descriptor_tid();
    (tid != 0).then_some((r, tid))
}

/// The kind word at bytes 16..20. Relaxed: it is written by `init` or a
/// static initializer before the program shares the mutex.
#[inline]
fn kind(r: &RawMutexCompact) -> u32 {
    r.spare()[0].load(Relaxed)
}

/// Extra holds of a recursive mutex: only its holder reads or writes it.
#[inline]
fn depth(r: &RawMutexCompact) -> &AtomicU32 {
    &r.spare()[1]
}

/// One more hold of a recursive mutex the caller holds.
fn relock(r: &RawMutexCompact) -> c_int {
    let d = depth(r).load(Relaxed);
    if d == u32::MAX {
        return libc::EAGAIN;
    }
    depth(r).store(d + 1, Relaxed);
    0
}

/// What a condition wait released, to take back after it.
#[derive(Clone, Copy)]
pub(crate) enum Released {
    /// A klock mutex, with the extra holds of a recursive one.
    Klock(u32),
    /// glibc's mutex.
    Glibc,
}

/// Release the caller's hold of `m` for a condition wait: all of it for a
/// recursive mutex (taken back by [`reacquire`]). `EPERM` if the caller
/// does not hold a klock mutex.
///
/// # Safety
/// `m` is null or points to a live `pthread_mutex_t`.
pub(crate) unsafe fn release_for_wait(m: *mut pthread_mutex_t) -> Result<Released, c_int> {
    // SAFETY: the caller's contract.
    let r = unsafe { raw(m) }?;
    // Every mutex is glibc's when the lock map says so.
    if kind(r) & GLIBC_ONLY != 0 || crate::to_glibc(crate::lock_map::Family::Mutex) {
        forwarded();
        // SAFETY: glibc's mutex, passed on.
        let rc = unsafe { real!(pthread_mutex_unlock: fn(*mut pthread_mutex_t) -> c_int)(m) };
        return if rc == 0 {
            Ok(Released::Glibc)
        } else {
            Err(rc)
        };
    }
    let tid = crate::me();
    if !r.held_by(tid) {
        return Err(libc::EPERM);
    }
    let d = depth(r).load(Relaxed);
    depth(r).store(0, Relaxed);
    if stat::on() {
        stat::releasing_exclusive(m as usize, Kind::Mutex);
    }
    // SAFETY: we hold it.
    unsafe { r.unlock_as(tid) };
    Ok(Released::Klock(d))
}

/// Take back what [`release_for_wait`] released: 0, or glibc's error
/// (`EOWNERDEAD` of a robust mutex).
///
/// # Safety
/// As [`release_for_wait`], for the same `m`.
pub(crate) unsafe fn reacquire(m: *mut pthread_mutex_t, what: Released) -> c_int {
    match what {
        Released::Glibc => {
            forwarded();
            // SAFETY: glibc's mutex, passed on.
            unsafe { real!(pthread_mutex_lock: fn(*mut pthread_mutex_t) -> c_int)(m) }
        }
        Released::Klock(d) => {
            // SAFETY: the caller's contract (it was ours a moment ago).
            let r = unsafe { &*m.cast::<RawMutexCompact>() };
            lock(m as usize, r, crate::me());
            depth(r).store(d, Relaxed);
            0
        }
    }
}

/// Initialise `m`. Attributes klock cannot honour in place make it
/// glibc's mutex (forwarded).
///
/// # Safety
/// `m` is null or writable; `attr` is null or an initialised attribute.
#[no_mangle]
pub unsafe extern "C" fn pthread_mutex_init(
    m: *mut pthread_mutex_t,
    attr: *const pthread_mutexattr_t,
) -> c_int {
    crate::forward_family!(Mutex, pthread_mutex_init: fn(*mut pthread_mutex_t, *const pthread_mutexattr_t) -> c_int, m, attr);
    guarded(|| {
        if m.is_null() {
            return libc::EINVAL;
        }
        let mut ty = 0;
        if !attr.is_null() {
            let (mut shared, mut robust, mut protocol) = (0, 0, 0);
            // SAFETY: an initialised attribute (the caller's contract).
            let ok = unsafe {
                pthread_mutexattr_gettype(attr, &mut ty) == 0
                    && libc::pthread_mutexattr_getpshared(attr, &mut shared) == 0
                    && pthread_mutexattr_getrobust(attr, &mut robust) == 0
                    && pthread_mutexattr_getprotocol(attr, &mut protocol) == 0
            };
            if !ok {
                return libc::EINVAL;
            }
            if shared == libc::PTHREAD_PROCESS_SHARED
                || robust != 0
                || protocol != libc::PTHREAD_PRIO_NONE
            {
                forwarded();
                // SAFETY: passed on as given.
                return unsafe {
                    real!(pthread_mutex_init: fn(*mut pthread_mutex_t, *const pthread_mutexattr_t) -> c_int)(
                        m, attr,
                    )
                };
            }
        }
        // SAFETY: non-null, writable and unused by others (the caller's
        // contract); size and alignment fit.
        unsafe { m.cast::<RawMutexCompact>().write(RawMutexCompact::new()) };
        // SAFETY: just written.
        let r = unsafe { &*m.cast::<RawMutexCompact>() };
        r.spare()[0].store(ty as u32 & TYPE_MASK, Relaxed);
        0
    })
}

/// Destroy `m`: 0, or `EBUSY` if it is locked.
///
/// # Safety
/// `m` is null or a live mutex.
#[no_mangle]
pub unsafe extern "C" fn pthread_mutex_destroy(m: *mut pthread_mutex_t) -> c_int {
    crate::forward_family!(Mutex, pthread_mutex_destroy: fn(*mut pthread_mutex_t) -> c_int, m);
    guarded(|| {
        // SAFETY: the caller's contract.
        let r = match unsafe { raw(m) } {
            Ok(r) => r,
            Err(e) => return e,
        };
        if kind(r) & GLIBC_ONLY != 0 {
            forwarded();
            // SAFETY: glibc's mutex, passed on.
            return unsafe { real!(pthread_mutex_destroy: fn(*mut pthread_mutex_t) -> c_int)(m) };
        }
        if r.is_locked() {
            libc::EBUSY
        } else {
            0
        }
    })
}

/// Lock `m`: a normal or adaptive mutex relocked by its holder waits
/// forever, as glibc's; errorcheck says `EDEADLK`; recursive counts.
///
/// # Safety
/// `m` is null or a live mutex.
#[no_mangle]
pub unsafe extern "C" fn pthread_mutex_lock(m: *mut pthread_mutex_t) -> c_int {
    // SAFETY: the caller's contract.
    if let Some((r, tid)) = unsafe { lean(m) } {
        return guarded(|| {
            lock_unprofiled(r, tid);
            0
        });
    }
    crate::forward_family!(Mutex, pthread_mutex_lock: fn(*mut pthread_mutex_t) -> c_int, m);
    guarded(|| {
        // SAFETY: the caller's contract.
        let r = match unsafe { raw(m) } {
            Ok(r) => r,
            Err(e) => return e,
        };
        let k = kind(r);
        // The common case first: a normal mutex. Through the `match`
        // below, the same steps cost 8.2-8.4 ns a lock+unlock pair
        // against 6.5-7.1 (2-vCPU AMD guest; docs/preload.md): the
        // compiler laid the normal type's path out behind the other
        // types' branches. Most normal mutexes now take the lean path
        // above; this line stays because the function's layout with it
        // measured faster for the kinds that come here (without it the
        // recursive and errorcheck pairs took 11.8-12.1 ns against
        // 10.6-11.2, the lean normal pair 8.7-9.0 against 8.1-8.4).
        if k == 0 {
            lock(m as usize, r, crate::me());
            return 0;
        }
        if k & GLIBC_ONLY != 0 {
            forwarded();
            // SAFETY: glibc's mutex, passed on.
            return unsafe { real!(pthread_mutex_lock: fn(*mut pthread_mutex_t) -> c_int)(m) };
        }
        match k & TYPE_MASK {
            ty @ (RECURSIVE | ERRORCHECK) => {
                // One tid lookup for the check and the lock.
                let tid = crate::me();
                if lock_unless_held(m as usize, r, tid) {
                    0
                } else if ty == RECURSIVE {
                    relock(r)
                } else {
                    libc::EDEADLK
                }
            }
            _ => {
                lock(m as usize, r, crate::me());
                0
            }
        }
    })
}

/// Lock a klock mutex unless the calling thread `tid` holds it: `false`,
/// nothing changed, if it does. Unprofiled, with threads, the lock's CAS
/// comes first and its failure value answers the question
/// ([`RawMutexCompact::lock_unless_held_as`]); otherwise the owner test,
/// then [`lock`].
#[inline]
fn lock_unless_held(addr: usize, r: &RawMutexCompact, tid: u32) -> bool {
    if stat::on() || crate::single_threaded() {
        if r.held_by(tid) {
            return false;
        }
        lock(addr, r, tid);
        true
    } else {
        r.lock_unless_held_as(tid)
    }
}

/// Lock a klock mutex as the calling thread `tid`, unprofiled: without
/// atomics while the process has one thread (as glibc's mutex does),
/// else with the lock's own fast path.
#[inline(always)]
fn lock_unprofiled(r: &RawMutexCompact, tid: u32) {
    if !(crate::single_threaded()
        // SAFETY: with one thread in the process nobody else touches it.
        && unsafe { r.try_lock_single_threaded_as(tid) })
    {
        r.lock_as(tid);
    }
}

/// Lock a klock mutex as the calling thread `tid`: through the profile
/// when it is on, else without atomics while the process has one thread
/// (as glibc's mutex does), else with the lock's own fast path.
#[inline]
fn lock(addr: usize, r: &RawMutexCompact, tid: u32) {
    if stat::on() {
        stat::lock_exclusive(
            addr,
            Kind::Mutex,
            || r.try_lock_as(tid),
            || {
                r.lock_as(tid);
                true
            },
        );
    } else {
        lock_unprofiled(r, tid);
    }
}

/// Release a klock mutex that the calling thread `tid` holds: without
/// atomics while the process has one thread, else the lock's own unlock.
///
/// # Safety
/// `tid` holds `r`.
#[inline]
unsafe fn unlock_held(r: &RawMutexCompact, tid: u32) {
    // SAFETY: with one thread in the process nobody else touches it.
    if !(crate::single_threaded() && unsafe { r.unlock_single_threaded_as(tid) }) {
        // SAFETY: the caller's contract.
        unsafe { r.unlock_as(tid) };
    }
}

/// Lock `m` if it is free: 0 or `EBUSY` (a recursive mutex's holder
/// counts one more hold).
///
/// # Safety
/// `m` is null or a live mutex.
#[no_mangle]
pub unsafe extern "C" fn pthread_mutex_trylock(m: *mut pthread_mutex_t) -> c_int {
    // SAFETY: the caller's contract.
    if let Some((r, tid)) = unsafe { lean(m) } {
        return guarded(|| if r.try_lock_as(tid) { 0 } else { libc::EBUSY });
    }
    crate::forward_family!(Mutex, pthread_mutex_trylock: fn(*mut pthread_mutex_t) -> c_int, m);
    guarded(|| {
        // SAFETY: the caller's contract.
        let r = match unsafe { raw(m) } {
            Ok(r) => r,
            Err(e) => return e,
        };
        let k = kind(r);
        if k & GLIBC_ONLY != 0 {
            forwarded();
            // SAFETY: glibc's mutex, passed on.
            return unsafe { real!(pthread_mutex_trylock: fn(*mut pthread_mutex_t) -> c_int)(m) };
        }
        let tid = crate::me();
        if k & TYPE_MASK == RECURSIVE && r.held_by(tid) {
            return relock(r);
        }
        if r.try_lock_as(tid) {
            if stat::on() {
                stat::acquired(m as usize, Kind::Mutex, true);
            }
            0
        } else {
            libc::EBUSY
        }
    })
}

/// The timed lock of a klock mutex: deadline `ts` on `clock`.
fn timedlock(r: &RawMutexCompact, clock: libc::clockid_t, ts: *const timespec) -> c_int {
    // SAFETY: `ts` is null or readable (the C caller's contract).
    let left = match unsafe { time_left(clock, ts) } {
        Ok(left) => left,
        Err(e) => return e,
    };
    let tid = crate::me();
    match kind(r) & TYPE_MASK {
        RECURSIVE if r.held_by(tid) => return relock(r),
        ERRORCHECK if r.held_by(tid) => return libc::EDEADLK,
        _ => {}
    }
    let addr = r as *const RawMutexCompact as usize;
    let got = if left.is_zero() {
        let got = r.try_lock_as(tid);
        if got && stat::on() {
            stat::acquired(addr, Kind::Mutex, true);
        }
        got
    } else {
        let deadline = klock::sys::deadline_after(left);
        if stat::on() {
            stat::lock_exclusive(
                addr,
                Kind::Mutex,
                || r.try_lock_as(tid),
                || r.lock_until_ns_as(tid, deadline),
            )
        } else {
            r.lock_until_ns_as(tid, deadline)
        }
    };
    if got {
        0
    } else {
        libc::ETIMEDOUT
    }
}

/// Lock `m` unless the absolute `CLOCK_REALTIME` deadline `ts` passes
/// first: 0, `ETIMEDOUT`, `EDEADLK` or `EINVAL` (bad `ts`).
///
/// # Safety
/// `m` is null or a live mutex; `ts` is null or readable.
#[no_mangle]
pub unsafe extern "C" fn pthread_mutex_timedlock(
    m: *mut pthread_mutex_t,
    ts: *const timespec,
) -> c_int {
    crate::forward_family!(Mutex, pthread_mutex_timedlock: fn(*mut pthread_mutex_t, *const timespec) -> c_int, m, ts);
    guarded(|| {
        // SAFETY: the caller's contract.
        let r = match unsafe { raw(m) } {
            Ok(r) => r,
            Err(e) => return e,
        };
        if kind(r) & GLIBC_ONLY != 0 {
            forwarded();
            // SAFETY: glibc's mutex, passed on.
            return unsafe {
                real!(pthread_mutex_timedlock: fn(*mut pthread_mutex_t, *const timespec) -> c_int)(
                    m, ts,
                )
            };
        }
        timedlock(r, libc::CLOCK_REALTIME, ts)
    })
}

/// As `pthread_mutex_timedlock`, the deadline on `clock`
/// (`CLOCK_REALTIME` or `CLOCK_MONOTONIC`; another is `EINVAL`).
///
/// # Safety
/// As `pthread_mutex_timedlock`.
#[no_mangle]
pub unsafe extern "C" fn pthread_mutex_clocklock(
    m: *mut pthread_mutex_t,
    clock: libc::clockid_t,
    ts: *const timespec,
) -> c_int {
    crate::forward_family!(Mutex, pthread_mutex_clocklock: fn(*mut pthread_mutex_t, libc::clockid_t, *const timespec) -> c_int, m, clock, ts);
    guarded(|| {
        // SAFETY: the caller's contract.
        let r = match unsafe { raw(m) } {
            Ok(r) => r,
            Err(e) => return e,
        };
        if kind(r) & GLIBC_ONLY != 0 {
            forwarded();
            // SAFETY: glibc's mutex, passed on.
            return unsafe {
                real!(pthread_mutex_clocklock: fn(*mut pthread_mutex_t, libc::clockid_t, *const timespec) -> c_int)(
                    m, clock, ts,
                )
            };
        }
        timedlock(r, clock, ts)
    })
}

/// Unlock `m`. Errorcheck and recursive: `EPERM` unless the caller holds
/// it. Normal and adaptive, as glibc: released whoever holds it, and 0
/// for an unlocked one.
///
/// # Safety
/// `m` is null or a live mutex.
#[no_mangle]
pub unsafe extern "C" fn pthread_mutex_unlock(m: *mut pthread_mutex_t) -> c_int {
    // SAFETY: the caller's contract.
    if let Some((r, tid)) = unsafe { lean(m) } {
        if r.held_by(tid) {
            return guarded(|| {
                // SAFETY: the caller holds it.
                unsafe { unlock_held(r, tid) };
                0
            });
        }
    }
    crate::forward_family!(Mutex, pthread_mutex_unlock: fn(*mut pthread_mutex_t) -> c_int, m);
    guarded(|| {
        // SAFETY: the caller's contract.
        let r = match unsafe { raw(m) } {
            Ok(r) => r,
            Err(e) => return e,
        };
        let k = kind(r);
        if k & GLIBC_ONLY != 0 {
            forwarded();
            // SAFETY: glibc's mutex, passed on.
            return unsafe { real!(pthread_mutex_unlock: fn(*mut pthread_mutex_t) -> c_int)(m) };
        }
        match k & TYPE_MASK {
            RECURSIVE | ERRORCHECK => {
                let tid = crate::me();
                if !r.held_by(tid) {
                    libc::EPERM
                } else if k & TYPE_MASK == RECURSIVE && depth(r).load(Relaxed) > 0 {
                    depth(r).store(depth(r).load(Relaxed) - 1, Relaxed);
                    0
                } else {
                    if stat::on() {
                        stat::releasing_exclusive(m as usize, Kind::Mutex);
                    }
                    // SAFETY: we hold it.
                    unsafe { unlock_held(r, tid) };
                    0
                }
            }
            _ => {
                // Normal and adaptive: the holder's unlock is one RMW;
                // another thread's releases it all the same, as glibc
                // does. The ownership test loads the word first. A CAS
                // from "ours, no flag" instead (no load; a second RMW when
                // a waiter's flag is set) was faster alone, 20-22 against
                // 24-27 ns a pair in bench/uncontended.c, but slower
                // contended, 16-18 against 20-24 M ops/s in
                // bench/contend.c at 4 and 8 threads on 2 CPUs.
                if stat::on() {
                    stat::releasing_exclusive(m as usize, Kind::Mutex);
                }
                let tid = crate::me();
                if r.held_by(tid) {
                    // SAFETY: we hold it.
                    unsafe { unlock_held(r, tid) };
                } else {
                    r.unlock_any();
                }
                0
            }
        }
    })
}
