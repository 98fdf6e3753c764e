//! # klock — the Linux kernel's locking playbook in userspace
//!
//! Platform layer: [`sync`] (atomics shim, std or loom), [`sys`] (futex,
//! tid, cpu, clock), [`thread`] (thread index and per-thread queue nodes),
//! [`spin`] (relax and time-bounded spin budgets).
//!
//! Locks: [`qspinlock`] (the queued spinlock, [`SpinLock`]).
//!
//! Instruments: [`events`] (per-lock-type event counters, feature `events`).

pub mod events;
pub mod qspinlock;
pub mod spin;
pub mod sync;
pub mod sys;
pub mod thread;

pub use qspinlock::{RawQSpinLock, RawQSpinLockWith};

/// A spinlock-protected value: the kernel's queued spinlock
/// ([`RawQSpinLock`]) behind `lock_api`'s `Mutex` API.
///
/// ```
/// let counter = klock::SpinLock::new(0u64);
/// *counter.lock() += 1;
/// assert_eq!(*counter.lock(), 1);
/// ```
#[cfg(not(loom))]
pub type SpinLock<T> = lock_api::Mutex<RawQSpinLock, T>;

/// Guard of a [`SpinLock`].
#[cfg(not(loom))]
pub type SpinLockGuard<'a, T> = lock_api::MutexGuard<'a, RawQSpinLock, T>;

/// A [`SpinLock`] with a chosen pending hand-over wait
/// (see [`RawQSpinLockWith`]); `SpinLockWith<0, T>` skips the wait.
#[cfg(not(loom))]
pub type SpinLockWith<const PENDING_LOOPS: u32, T> =
    lock_api::Mutex<RawQSpinLockWith<PENDING_LOOPS>, T>;
