//! # klock's C API
//!
//! `libklock.so` / `libklock.a` and `include/klock.h`: every klock lock
//! family behind POSIX-style C functions. Each C lock type is an opaque,
//! fixed-size, 8-byte aligned struct that holds the Rust lock in place (no
//! heap allocation, no side table). **The sizes are part of the ABI**: they
//! only grow with a new major version.
//!
//! | C type | bytes | Rust lock | for |
//! |---|---|---|---|
//! | `klock_mutex_t` | 128 | [`klock::RawMutex`] | a general mutex (optimistic spinning, then sleeping) |
//! | `klock_rwsem_t` | 96 | [`klock::RawRwSem`] | read-mostly data, long or sleeping read sections |
//! | `klock_spinlock_t` | 32 | [`klock::RawQSpinLock`] | tiny critical sections |
//! | `klock_rwlock_t` | 32 | [`klock::RawQRwLock`] | a reader-writer spinlock, threads ≤ CPUs |
//! | `klock_rtmutex_t` | 64 | [`klock::RawRtMutex`] | real-time threads: priority inheritance |
//! | `klock_cond_t` | 32 | [`klock::RawCondvar`] | waiting for a predicate under a `klock_mutex_t` |
//!
//! Every function returns 0 or an `errno` value and never unwinds into C:
//! a null pointer is `EINVAL`, and an internal panic (a bug) is reported as
//! `ENOTRECOVERABLE`. All-zero bytes (the `KLOCK_*_INITIALIZER` macros)
//! are an unlocked lock, so static locks need no init call.
//!
//! Timed functions take an absolute deadline on `CLOCK_MONOTONIC`; the
//! `*clock*` variants take the clock (`CLOCK_MONOTONIC` or
//! `CLOCK_REALTIME`). A `CLOCK_REALTIME` deadline becomes a relative
//! timeout when the call starts: clock changes during the wait are not
//! followed. `tv_nsec` outside `0..1e9` or another clock is `EINVAL`; a
//! deadline already passed tries once, then returns `ETIMEDOUT`.

#![allow(non_camel_case_types)]

use core::ffi::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};

mod cond;
mod mutex;
mod rtmutex;
mod rw;
mod rwlock;
mod rwsem;
mod spin;
mod time;

pub use cond::*;
pub use mutex::*;
pub use rtmutex::*;
pub use rwlock::*;
pub use rwsem::*;
pub use spin::*;

/// Run an API body: its errno result, or `ENOTRECOVERABLE` if it panicked
/// (a bug; nothing unwinds into C).
#[inline(always)]
fn guarded(f: impl FnOnce() -> c_int) -> c_int {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(libc::ENOTRECOVERABLE)
}

/// `&T` for a C lock pointer, or `EINVAL` if it is null. `Impl` is the
/// in-place layout of the opaque C type `C`.
///
/// # Safety
/// `p` is null or points to a live `C` that is only used through this API.
unsafe fn get<'a, C, Impl>(p: *mut C) -> Result<&'a Impl, c_int> {
    const { assert!(core::mem::size_of::<Impl>() <= core::mem::size_of::<C>()) };
    const { assert!(core::mem::align_of::<Impl>() <= core::mem::align_of::<C>()) };
    if p.is_null() {
        return Err(libc::EINVAL);
    }
    // SAFETY: non-null, and by the caller's contract a live `C`, whose
    // size and alignment fit `Impl` (checked above at compile time); every
    // byte pattern the API leaves there, all-zero included, is a valid
    // `Impl`, and `Impl` is only mutated through atomics and `UnsafeCell`.
    Ok(unsafe { &*p.cast::<Impl>() })
}

/// Turn a `Result` into the C return value.
fn errno(r: Result<(), c_int>) -> c_int {
    match r {
        Ok(()) => 0,
        Err(e) => e,
    }
}

// The calling thread's tid, `me()`: from glibc's thread descriptor where
// that is checked to work, else klock's cached copy (see the macro).
klock::glibc_tid_reader!(fn me);

#[cfg(test)]
mod tests;
