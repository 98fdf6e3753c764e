//! `pthread_rwlock_*`: [`RawRwSem`], the kernel's rw-semaphore, in place
//! inside the 56-byte `pthread_rwlock_t` (readers share, writers exclude;
//! optimistic spinning on a running writer, then FIFO sleeping).
//!
//! The rw-semaphore fills the first 48 bytes; all-zero bytes are an
//! unlocked one. glibc's `__flags` (the writer preference) is the word at
//! byte 48, past the rw-semaphore's end (asserted below):
//! `PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP` puts 2 there, and
//! nothing reads it. The preference itself needs no storage: the
//! rw-semaphore is always writer fair (a reader queues behind a waiting
//! writer), which is what `PREFER_WRITER_NONRECURSIVE` asks for, unless
//! the process turns on `KLOCK_RWSEM_READER_PASS` (off by default), which
//! lets readers pass waiting writers.
//!
//! POSIX lets a thread read-lock a rwlock it already read-holds, and with
//! glibc's default (reader preference) that never waits. Behind a queued
//! writer it would wait here, for a writer that waits for it: so each
//! thread takes the rw-semaphore's read lock once per rwlock and counts
//! its further read holds in a thread-local table ([`crate::reads`]). It
//! also makes a read unlock without a read hold `EPERM`, and a write lock
//! by a reader `EDEADLK`.
//!
//! The write holder is the tid in the rw-semaphore's owner word, which a
//! writer sets after locking and clears before unlocking: a thread finds
//! its own tid there only while it write-holds the lock (`EDEADLK`,
//! `EPERM`).

use crate::reads::{self, Dropped};
use crate::stat::{self, Kind};
use crate::time::time_left;
use crate::{guarded, me, refused};
use core::ffi::c_int;
use klock::rwsem::{WriteGuard, OWNER_SHIFT, READER_OWNED};
use klock::RawRwSem;
use libc::{pthread_rwlock_t, pthread_rwlockattr_t, timespec};

const _: () = assert!(core::mem::size_of::<pthread_rwlock_t>() == 56);
// The rw-semaphore ends where glibc's `__flags` word begins: a static
// initializer's writer preference there is left alone.
const _: () = assert!(core::mem::size_of::<RawRwSem>() <= 48);
const _: () =
    assert!(core::mem::align_of::<RawRwSem>() <= core::mem::align_of::<pthread_rwlock_t>());

/// The rw-semaphore in `l`, or `EINVAL` for a null pointer.
///
/// # Safety
/// `l` is null or points to a live `pthread_rwlock_t`.
#[inline]
unsafe fn raw<'a>(l: *mut pthread_rwlock_t) -> Result<&'a RawRwSem, c_int> {
    if l.is_null() {
        return Err(libc::EINVAL);
    }
    // SAFETY: non-null and live (the caller's contract); size and
    // alignment fit; all-zero and everything the rw-semaphore writes are
    // valid, and it only changes through atomics and its UnsafeCell.
    Ok(unsafe { &*l.cast::<RawRwSem>() })
}

/// Whether the calling thread read-holds `r`.
fn read_by_me(r: &RawRwSem) -> bool {
    reads::with(|t| t.holds(addr_of(r)))
}

/// Take a read hold of `r` with `take` (the rw-semaphore's read lock, at
/// most once per thread): 0, `err` if `take` fails, `held` if the caller
/// write-holds `r` (`EDEADLK`, or `EBUSY` for the trylock). `take` is told
/// whether the read trylock below was just made and failed (a trylock
/// need not make it again).
///
/// A thread that read-holds `r` cannot write-hold it, so its table comes
/// first; then, unprofiled, the read trylock: a lock that readers may
/// enter now has no writer, so the caller is not its writer, and the
/// `EDEADLK` test (two loads of the lock's words and the tid, ahead of
/// the lock's atomic instruction) is only made when the lock is not free
/// for readers. With the unlock's table first too, a read lock+unlock
/// pair took 9.9-10.6 ns against 10.6-11.2 (six alternating rounds,
/// glibc's 8.4; 2-vCPU AMD guest, `docs/preload.md`, "The lean
/// path"). The profiled path keeps `take` first, so that the profile
/// counts every acquisition.
#[inline]
fn read_lock(r: &RawRwSem, take: impl FnOnce(bool) -> bool, err: c_int, held: c_int) -> c_int {
    let a = addr_of(r);
    let quick = !stat::on();
    reads::with(|t| {
        if let Some(rc) = t.bump(a) {
            return rc;
        }
        if !(quick && r.raw_try_lock_shared_as(me()).is_some()) {
            if written_by_me(r) {
                return held;
            }
            if !take(quick) {
                return err;
            }
        }
        t.record(a);
        0
    })
}

/// The rwlock's address: its row in the lock profile.
#[inline]
fn addr_of(r: &RawRwSem) -> usize {
    r as *const RawRwSem as usize
}

/// Whether the calling thread write-holds `r`.
#[inline]
fn written_by_me(r: &RawRwSem) -> bool {
    let o = r.owner_word();
    r.is_write_held() && o & READER_OWNED == 0 && (o >> OWNER_SHIFT) as u32 == me()
}

/// The guard of the calling thread's write hold: the C API has nowhere
/// to keep the one the lock returned, so it is rebuilt from the tid.
#[inline]
fn write_guard() -> WriteGuard {
    WriteGuard::rebuilt(me())
}

/// Run `f` on the rw-semaphore in `l`; `EINVAL` for null.
///
/// # Safety
/// `l` is null or a live rwlock.
unsafe fn with(l: *mut pthread_rwlock_t, f: impl FnOnce(&RawRwSem) -> c_int) -> c_int {
    // SAFETY: the caller's contract.
    guarded(|| match unsafe { raw(l) } {
        Ok(r) => f(r),
        Err(e) => e,
    })
}

/// Initialise `l`. A process-shared rwlock is `ENOTSUP`: the
/// rw-semaphore cannot be shared between processes, and glibc's own
/// could not be told apart from it in place.
///
/// # Safety
/// `l` is null or writable; `attr` is null or an initialised attribute.
#[no_mangle]
pub unsafe extern "C" fn pthread_rwlock_init(
    l: *mut pthread_rwlock_t,
    attr: *const pthread_rwlockattr_t,
) -> c_int {
    crate::forward_family!(Rwlock, pthread_rwlock_init: fn(*mut pthread_rwlock_t, *const pthread_rwlockattr_t) -> c_int, l, attr);
    guarded(|| {
        if l.is_null() {
            return libc::EINVAL;
        }
        if !attr.is_null() {
            let mut shared = 0;
            // SAFETY: an initialised attribute.
            if unsafe { libc::pthread_rwlockattr_getpshared(attr, &mut shared) } != 0 {
                return libc::EINVAL;
            }
            if shared == libc::PTHREAD_PROCESS_SHARED {
                return refused();
            }
        }
        // SAFETY: non-null, writable, unused by others; size and alignment
        // fit.
        unsafe { l.cast::<RawRwSem>().write(RawRwSem::new()) };
        0
    })
}

/// Destroy `l`: 0, or `EBUSY` if it is held.
///
/// # Safety
/// `l` is null or a live rwlock.
#[no_mangle]
pub unsafe extern "C" fn pthread_rwlock_destroy(l: *mut pthread_rwlock_t) -> c_int {
    crate::forward_family!(Rwlock, pthread_rwlock_destroy: fn(*mut pthread_rwlock_t) -> c_int, l);
    // SAFETY: the caller's contract.
    unsafe { with(l, |r| if r.is_held() { libc::EBUSY } else { 0 }) }
}

/// Read-lock `l`: 0, or `EDEADLK` if the caller write-holds it. A read
/// lock the caller already holds is counted and never waits.
///
/// # Safety
/// `l` is null or a live rwlock.
#[no_mangle]
pub unsafe extern "C" fn pthread_rwlock_rdlock(l: *mut pthread_rwlock_t) -> c_int {
    crate::forward_family!(Rwlock, pthread_rwlock_rdlock: fn(*mut pthread_rwlock_t) -> c_int, l);
    // SAFETY: the caller's contract.
    unsafe {
        with(l, |r| {
            read_lock(
                r,
                |_| {
                    if stat::on() {
                        stat::lock_shared(
                            addr_of(r),
                            || r.raw_try_lock_shared_as(me()).is_some(),
                            || {
                                let _ = r.raw_lock_shared_as(me());
                                true
                            },
                        )
                    } else {
                        let _ = r.raw_lock_shared_as(me());
                        true
                    }
                },
                0,
                libc::EDEADLK,
            )
        })
    }
}

/// Read-lock `l` without waiting: 0 or `EBUSY`.
///
/// # Safety
/// `l` is null or a live rwlock.
#[no_mangle]
pub unsafe extern "C" fn pthread_rwlock_tryrdlock(l: *mut pthread_rwlock_t) -> c_int {
    crate::forward_family!(Rwlock, pthread_rwlock_tryrdlock: fn(*mut pthread_rwlock_t) -> c_int, l);
    // SAFETY: the caller's contract.
    unsafe {
        with(l, |r| {
            read_lock(
                r,
                // Unprofiled, `read_lock` has just tried and failed.
                |tried| {
                    let got = !tried && r.raw_try_lock_shared_as(me()).is_some();
                    if got && stat::on() {
                        stat::acquired(addr_of(r), Kind::RwLock, false);
                    }
                    got
                },
                libc::EBUSY,
                libc::EBUSY,
            )
        })
    }
}

fn timedrd(r: &RawRwSem, clock: libc::clockid_t, ts: *const timespec) -> c_int {
    // SAFETY: `ts` is null or readable (the C caller's contract).
    let left = match unsafe { time_left(clock, ts) } {
        Ok(left) => left,
        Err(e) => return e,
    };
    read_lock(
        r,
        |_| {
            let deadline = klock::sys::deadline_after(left);
            let timed = || r.raw_try_lock_shared_until_ns_as(me(), deadline).is_some();
            if left.is_zero() {
                let got = r.raw_try_lock_shared_as(me()).is_some();
                if got && stat::on() {
                    stat::acquired(addr_of(r), Kind::RwLock, false);
                }
                got
            } else if stat::on() {
                stat::lock_shared(
                    addr_of(r),
                    || r.raw_try_lock_shared_as(me()).is_some(),
                    timed,
                )
            } else {
                timed()
            }
        },
        libc::ETIMEDOUT,
        libc::EDEADLK,
    )
}

fn timedwr(r: &RawRwSem, clock: libc::clockid_t, ts: *const timespec) -> c_int {
    // SAFETY: as in timedrd.
    let left = match unsafe { time_left(clock, ts) } {
        Ok(left) => left,
        Err(e) => return e,
    };
    if written_by_me(r) || read_by_me(r) {
        return libc::EDEADLK;
    }
    let deadline = klock::sys::deadline_after(left);
    let got = if left.is_zero() {
        let got = r.raw_try_lock_exclusive_as(me()).is_some();
        if got && stat::on() {
            stat::acquired(addr_of(r), Kind::RwLock, true);
        }
        got
    } else if stat::on() {
        stat::lock_exclusive(
            addr_of(r),
            Kind::RwLock,
            || r.raw_try_lock_exclusive_as(me()).is_some(),
            || {
                r.raw_try_lock_exclusive_until_ns_as(me(), deadline)
                    .is_some()
            },
        )
    } else {
        r.raw_try_lock_exclusive_until_ns_as(me(), deadline)
            .is_some()
    };
    if got {
        0
    } else {
        libc::ETIMEDOUT
    }
}

/// Read-lock `l` unless the absolute `CLOCK_REALTIME` deadline `ts`
/// passes first: 0, `ETIMEDOUT`, `EDEADLK`, `EINVAL` (bad `ts`).
///
/// # Safety
/// `l` is null or a live rwlock; `ts` is null or readable.
#[no_mangle]
pub unsafe extern "C" fn pthread_rwlock_timedrdlock(
    l: *mut pthread_rwlock_t,
    ts: *const timespec,
) -> c_int {
    crate::forward_family!(Rwlock, pthread_rwlock_timedrdlock: fn(*mut pthread_rwlock_t, *const timespec) -> c_int, l, ts);
    // SAFETY: the caller's contract.
    unsafe { with(l, |r| timedrd(r, libc::CLOCK_REALTIME, ts)) }
}

/// As `pthread_rwlock_timedrdlock`, the deadline on `clock`.
///
/// # Safety
/// As `pthread_rwlock_timedrdlock`.
#[no_mangle]
pub unsafe extern "C" fn pthread_rwlock_clockrdlock(
    l: *mut pthread_rwlock_t,
    clock: libc::clockid_t,
    ts: *const timespec,
) -> c_int {
    crate::forward_family!(Rwlock, pthread_rwlock_clockrdlock: fn(*mut pthread_rwlock_t, libc::clockid_t, *const timespec) -> c_int, l, clock, ts);
    // SAFETY: the caller's contract.
    unsafe { with(l, |r| timedrd(r, clock, ts)) }
}

/// Write-lock `l`: 0, or `EDEADLK` if the caller holds it (to read or
/// to write).
///
/// # Safety
/// `l` is null or a live rwlock.
#[no_mangle]
pub unsafe extern "C" fn pthread_rwlock_wrlock(l: *mut pthread_rwlock_t) -> c_int {
    crate::forward_family!(Rwlock, pthread_rwlock_wrlock: fn(*mut pthread_rwlock_t) -> c_int, l);
    // SAFETY: the caller's contract.
    unsafe {
        with(l, |r| {
            if written_by_me(r) || read_by_me(r) {
                return libc::EDEADLK;
            }
            if stat::on() {
                stat::lock_exclusive(
                    addr_of(r),
                    Kind::RwLock,
                    || r.raw_try_lock_exclusive_as(me()).is_some(),
                    || {
                        let _ = r.raw_lock_exclusive_as(me());
                        true
                    },
                );
            } else {
                let _ = r.raw_lock_exclusive_as(me());
            }
            0
        })
    }
}

/// Write-lock `l` if it is free: 0 or `EBUSY` (also if the caller holds
/// it).
///
/// # Safety
/// `l` is null or a live rwlock.
#[no_mangle]
pub unsafe extern "C" fn pthread_rwlock_trywrlock(l: *mut pthread_rwlock_t) -> c_int {
    crate::forward_family!(Rwlock, pthread_rwlock_trywrlock: fn(*mut pthread_rwlock_t) -> c_int, l);
    // SAFETY: the caller's contract.
    unsafe {
        with(l, |r| match r.raw_try_lock_exclusive_as(me()) {
            Some(_) => {
                if stat::on() {
                    stat::acquired(addr_of(r), Kind::RwLock, true);
                }
                0
            }
            None => libc::EBUSY,
        })
    }
}

/// Write-lock `l` unless the absolute `CLOCK_REALTIME` deadline `ts`
/// passes first: 0, `ETIMEDOUT`, `EDEADLK`, `EINVAL` (bad `ts`).
///
/// # Safety
/// `l` is null or a live rwlock; `ts` is null or readable.
#[no_mangle]
pub unsafe extern "C" fn pthread_rwlock_timedwrlock(
    l: *mut pthread_rwlock_t,
    ts: *const timespec,
) -> c_int {
    crate::forward_family!(Rwlock, pthread_rwlock_timedwrlock: fn(*mut pthread_rwlock_t, *const timespec) -> c_int, l, ts);
    // SAFETY: the caller's contract.
    unsafe { with(l, |r| timedwr(r, libc::CLOCK_REALTIME, ts)) }
}

/// As `pthread_rwlock_timedwrlock`, the deadline on `clock`.
///
/// # Safety
/// As `pthread_rwlock_timedwrlock`.
#[no_mangle]
pub unsafe extern "C" fn pthread_rwlock_clockwrlock(
    l: *mut pthread_rwlock_t,
    clock: libc::clockid_t,
    ts: *const timespec,
) -> c_int {
    crate::forward_family!(Rwlock, pthread_rwlock_clockwrlock: fn(*mut pthread_rwlock_t, libc::clockid_t, *const timespec) -> c_int, l, clock, ts);
    // SAFETY: the caller's contract.
    unsafe { with(l, |r| timedwr(r, clock, ts)) }
}

/// The unlock of [`pthread_rwlock_unlock`].
fn unlock(r: &RawRwSem) -> c_int {
    // The table first: a thread that read-holds `r` cannot write-hold it,
    // so a read unlock needs no look at the lock's words before its RMW
    // (see `read_lock`).
    let dropped = reads::with(|t| t.drop_hold(addr_of(r)));
    if matches!(dropped, Dropped::None | Dropped::Unknown) && written_by_me(r) {
        if stat::on() {
            stat::releasing_exclusive(addr_of(r), Kind::RwLock);
        }
        // SAFETY: we write-hold it; the guard is ours.
        unsafe { r.raw_unlock_exclusive(write_guard()) };
        return 0;
    }
    match dropped {
        Dropped::Counted => 0,
        Dropped::None => libc::EPERM,
        Dropped::Last => {
            // SAFETY: this thread took a read hold and recorded it.
            unsafe { r.raw_unlock_shared() };
            0
        }
        // No list to ask: trust the caller as far as the lock word allows.
        Dropped::Unknown if r.is_write_held() || !r.is_held() => libc::EPERM,
        Dropped::Unknown => {
            // SAFETY: readers hold it; by the caller's contract the caller
            // is one.
            unsafe { r.raw_unlock_shared() };
            0
        }
    }
}

/// Release the caller's hold of `l`, read or write: 0, or `EPERM` if the
/// caller holds none.
///
/// # Safety
/// `l` is null or a live rwlock.
#[no_mangle]
pub unsafe extern "C" fn pthread_rwlock_unlock(l: *mut pthread_rwlock_t) -> c_int {
    crate::forward_family!(Rwlock, pthread_rwlock_unlock: fn(*mut pthread_rwlock_t) -> c_int, l);
    // SAFETY: the caller's contract.
    unsafe { with(l, unlock) }
}
