//! # klock: the Linux kernel's locks in userspace
//!
//! Linux only. Five lock families of the kernel, behind the `lock_api`
//! traits (the API of `parking_lot`: guards, `try_lock`, timed locks):
//!
//! | type | the kernel's | use it for |
//! |---|---|---|
//! | [`Mutex`] (+ [`Condvar`]) | `struct mutex`, optimistic spinning ([`mutex`]) | a general mutex, also when threads outnumber CPUs |
//! | [`RwSem`] | `struct rw_semaphore` ([`rwsem`]) | read-mostly data, long or sleeping read sections; downgrade |
//! | [`SpinLock`] | queued spinlock with the paravirt slow path ([`qspinlock`]) | tiny critical sections |
//! | [`RwLock`] | queued rwlock ([`qrwlock`]) | a reader-writer spinlock, threads ≤ CPUs |
//! | [`RtMutex`] | rt-mutex on the PI futex ([`rtmutex`], helpers in [`rt`]) | real-time threads of different priorities |
//!
//! ```
//! let counter = klock::Mutex::new(0u64);
//! *counter.lock() += 1;
//! assert_eq!(*counter.lock(), 1);
//! ```
//!
//! Around them: [`config`] (process-wide settings in code; the `KLOCK_*`
//! environment variables as defaults), [`lockstat`] (per-class contention
//! and hold-time statistics for any `lock_api` lock), [`events`] (per-lock
//! type event counters, feature `events`), [`oncpu`] (whether a lock's
//! owner is running: a time budget, or with feature `bpf` an eBPF
//! `sched_switch` program, `oncpu_bpf`) and [`spinadapt`] (the per-lock
//! test of whether spinning pays).
//!
//! The modules sit in layers, each naming only its own layer or those
//! below: the platform (`sys`, `thread`, `sync`, `spin`); the oracle and
//! the instruments ([`oncpu`], [`events`], [`spinadapt`], [`config`]); the
//! locks; and this crate root, which re-exports them (`docs/design.md`,
//! "Layers").
//!
//! The design, the benchmarks that measure these locks against `std`,
//! `parking_lot` and glibc, and their results are described in the
//! repository's `README.md` and `docs/`.

#![warn(missing_docs)]

#[cfg(not(loom))]
pub mod condvar;
pub mod config;
pub mod events;
#[cfg(all(
    target_arch = "x86_64",
    target_os = "linux",
    target_env = "gnu",
    not(loom)
))]
mod glibc_tid;
#[cfg(not(loom))]
pub mod lockstat;
pub mod mutex;
pub mod oncpu;
#[cfg(all(feature = "bpf", not(loom)))]
pub mod oncpu_bpf;
#[doc(hidden)]
pub mod osq;
mod ownerspin;
pub mod qrwlock;
pub mod qspinlock;
#[cfg(not(loom))]
pub mod rt;
pub mod rtmutex;

pub mod rwsem;
#[doc(hidden)]
pub mod spin;
pub mod spinadapt;
#[doc(hidden)]
pub mod sync;
#[doc(hidden)]
pub mod sys;
#[doc(hidden)]
pub mod thread;
mod waitlist;
mod waitlock;

#[cfg(not(loom))]
pub use condvar::{RawCondvar, RawCondvarWith};
pub use mutex::{RawMutex, RawMutexWith};
pub use qrwlock::RawQRwLock;
pub use qspinlock::{RawQSpinLock, RawQSpinLock32, RawQSpinLockNative, RawQSpinLockWith};

/// Call in a just-forked child, on the thread that forked (a
/// `pthread_atfork` child handler), before it takes a klock lock (the
/// preload library does). klock learns the thread's new tid and starts a
/// new [`thread::fork_generation`], by which the mutexes, rw-semaphores
/// and the preload's condition variables forget the waiters that stayed
/// in the parent; then the queue tail and the pending bit of every queued
/// spinlock those threads were waiting for are cleared
/// ([`qspinlock::forget_parent_waiters`]).
#[cfg(not(loom))]
pub fn after_fork_in_child() {
    for s in thread::after_fork_in_child() {
        qspinlock::forget_parent_waiters(s);
    }
}
pub use rtmutex::{RawRtMutex, RawRtMutexWith, RtMutexError};

pub use rwsem::{RawRwSem, RawRwSemWith};

/// A spinlock-protected value: the kernel's queued spinlock
/// ([`RawQSpinLock`]) behind `lock_api`'s `Mutex` API, with the kernel's
/// paravirt slow path: waiters spin only while it pays, then sleep, and a
/// newcomer may take a free lock past a sleeping queue (see [`qspinlock`]).
/// For short critical sections; safe with more threads than CPUs.
/// [`qspinlock::RawQSpinLockNative`] is the pure spinning, strict FIFO
/// original. The lock is 8 bytes on x86-64 (the kernel's 32-bit word with
/// the locked byte alone in 4 bytes: [`qspinlock::Word64`]) and 4
/// elsewhere; [`RawQSpinLock32`] is the same lock in 4 bytes everywhere.
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
    lock_api::Mutex<RawQSpinLockWith<PENDING_LOOPS, true, qspinlock::DefaultWord>, T>;

/// A mutex with optimistic spinning on a running owner ([`RawMutex`]):
/// the kernel's `struct mutex` behind `lock_api`'s `Mutex` API. Spins or
/// not according to the global switch ([`mutex::set_owner_spin`],
/// `KLOCK_OWNER_SPIN=0`).
///
/// ```
/// let counter = klock::Mutex::new(0u64);
/// *counter.lock() += 1;
/// assert_eq!(*counter.lock(), 1);
/// ```
#[cfg(not(loom))]
pub type Mutex<T> = lock_api::Mutex<RawMutex, T>;

/// Guard of a [`Mutex`].
#[cfg(not(loom))]
pub type MutexGuard<'a, T> = lock_api::MutexGuard<'a, RawMutex, T>;

/// A mapped guard of a [`Mutex`].
#[cfg(not(loom))]
pub type MappedMutexGuard<'a, T> = lock_api::MappedMutexGuard<'a, RawMutex, T>;

/// A [`Mutex`] with a fixed spin mode: [`mutex::OWNER_SPIN`],
/// [`mutex::OWNER_SPIN_FIXED`], [`mutex::NO_OWNER_SPIN`] or
/// [`mutex::OWNER_SPIN_GLOBAL`]. All can be used side by side in one
/// process.
#[cfg(not(loom))]
pub type MutexWith<const SPIN: u8, T> = lock_api::Mutex<RawMutexWith<SPIN>, T>;

/// Guard of a [`MutexWith`].
#[cfg(not(loom))]
pub type MutexWithGuard<'a, const SPIN: u8, T> = lock_api::MutexGuard<'a, RawMutexWith<SPIN>, T>;

/// A [`Mutex`] that spins on a running owner (kernel `OWNER_SPIN`) whatever
/// the global switch says, unless its adaptive test ([`spinadapt`]) finds
/// sleeping faster.
#[cfg(not(loom))]
pub type OwnerSpinMutex<T> = MutexWith<{ mutex::OWNER_SPIN }, T>;

/// A [`Mutex`] that never spins (kernel `NO_OWNER_SPIN`): contended
/// lockers go straight to sleep.
#[cfg(not(loom))]
pub type NoOwnerSpinMutex<T> = MutexWith<{ mutex::NO_OWNER_SPIN }, T>;

/// Condition variable for [`Mutex`] (futex on a sequence number).
///
/// ```
/// let pair = std::sync::Arc::new((klock::Mutex::new(false), klock::Condvar::new()));
/// let p2 = pair.clone();
/// let t = std::thread::spawn(move || {
///     *p2.0.lock() = true;
///     p2.1.notify_one();
/// });
/// let mut ready = pair.0.lock();
/// pair.1.wait_while(&mut ready, |r| !*r);
/// drop(ready);
/// t.join().unwrap();
/// ```
#[cfg(not(loom))]
pub type Condvar = lock_api::Condvar<RawCondvar>;

/// Condition variable for a [`MutexWith`] of the same spin mode.
#[cfg(not(loom))]
pub type CondvarWith<const SPIN: u8> = lock_api::Condvar<RawCondvarWith<SPIN>>;

/// A reader/writer spinlock: the kernel's queued rwlock ([`RawQRwLock`])
/// behind `lock_api`'s `RwLock` API. Readers share; contended lockers queue
/// FIFO on a qspinlock; a queued writer blocks new readers.
///
/// For read-mostly data with short critical sections and threads ≤ CPUs.
///
/// ```
/// let index = klock::RwLock::new(vec![1, 2, 3]);
/// assert_eq!(index.read().len(), 3);
/// index.write().push(4);
/// assert_eq!(*index.read().last().unwrap(), 4);
/// ```
#[cfg(not(loom))]
pub type RwLock<T> = lock_api::RwLock<RawQRwLock, T>;

/// Shared guard of a [`RwLock`].
#[cfg(not(loom))]
pub type RwLockReadGuard<'a, T> = lock_api::RwLockReadGuard<'a, RawQRwLock, T>;

/// Exclusive guard of a [`RwLock`].
#[cfg(not(loom))]
pub type RwLockWriteGuard<'a, T> = lock_api::RwLockWriteGuard<'a, RawQRwLock, T>;

/// A priority-inheritance mutex ([`RawRtMutex`]): the kernel's PI futex
/// (`FUTEX_LOCK_PI2` / `FUTEX_UNLOCK_PI`) with userspace fast paths and
/// top-waiter spinning on a running owner, behind `lock_api`'s `Mutex`
/// API. For real-time threads of different priorities sharing data: the
/// kernel boosts the owner while a higher-priority thread waits. Spins or
/// not according to the global switch ([`rtmutex::set_top_waiter_spin`],
/// `KLOCK_RT_SPIN=0`); non-real-time contenders wait in userspace (no
/// hand-over convoy) unless [`rtmutex::set_user_wait`]`(false)` /
/// `KLOCK_RT_USER_WAIT=0`. `lock()` panics on deadlock (`EDEADLK`); use
/// [`rtmutex::RtMutexExt::lock_checked`] to get it as an error.
///
/// ```
/// let counter = klock::RtMutex::new(0u64);
/// *counter.lock() += 1;
/// assert_eq!(*counter.lock(), 1);
/// ```
#[cfg(not(loom))]
pub type RtMutex<T> = lock_api::Mutex<RawRtMutex, T>;

/// Guard of an [`RtMutex`].
#[cfg(not(loom))]
pub type RtMutexGuard<'a, T> = lock_api::MutexGuard<'a, RawRtMutex, T>;

/// An [`RtMutex`] with a fixed mode: [`rtmutex::RT_SPIN`],
/// [`rtmutex::RT_SPIN_KWAIT`] (every non-spinning waiter in the kernel),
/// [`rtmutex::NO_RT_SPIN`] or [`rtmutex::RT_SPIN_GLOBAL`].
#[cfg(not(loom))]
pub type RtMutexWith<const SPIN: u8, T> = lock_api::Mutex<RawRtMutexWith<SPIN>, T>;

/// A read-write semaphore with reader optimistic spinning and its
/// adaptive disabling ([`RawRwSem`]): the kernel's `struct rw_semaphore`
/// behind `lock_api`'s `RwLock` API (read, write, downgrade, timed locks).
/// Follows the global switches [`rwsem::set_reader_spin`]
/// (`KLOCK_RWSEM_RSPIN=0`) and [`rwsem::set_adaptive`]
/// (`KLOCK_RWSEM_ADAPTIVE=0`).
///
/// ```
/// let map = klock::RwSem::new(vec![1, 2, 3]);
/// assert_eq!(map.read()[1], 2);
/// map.write().push(4);
/// let w = map.write();
/// let r = klock::RwSemWriteGuard::downgrade(w);
/// assert_eq!(r.len(), 4);
/// ```
#[cfg(not(loom))]
pub type RwSem<T> = lock_api::RwLock<RawRwSem, T>;

/// Read guard of a [`RwSem`].
#[cfg(not(loom))]
pub type RwSemReadGuard<'a, T> = lock_api::RwLockReadGuard<'a, RawRwSem, T>;

/// Write guard of a [`RwSem`].
#[cfg(not(loom))]
pub type RwSemWriteGuard<'a, T> = lock_api::RwLockWriteGuard<'a, RawRwSem, T>;

/// A [`RwSem`] with fixed switches: `RSPIN` (reader spinning) and
/// `ADAPTIVE` (adaptive disabling), each [`rwsem::ON`], [`rwsem::OFF`] or
/// [`rwsem::GLOBAL`]. Different settings can be used side by side.
#[cfg(not(loom))]
pub type RwSemWith<const RSPIN: u8, const ADAPTIVE: u8, T> =
    lock_api::RwLock<RawRwSemWith<RSPIN, ADAPTIVE>, T>;

/// Read guard of a [`RwSemWith`].
#[cfg(not(loom))]
pub type RwSemWithReadGuard<'a, const RSPIN: u8, const ADAPTIVE: u8, T> =
    lock_api::RwLockReadGuard<'a, RawRwSemWith<RSPIN, ADAPTIVE>, T>;

/// Write guard of a [`RwSemWith`].
#[cfg(not(loom))]
pub type RwSemWithWriteGuard<'a, const RSPIN: u8, const ADAPTIVE: u8, T> =
    lock_api::RwLockWriteGuard<'a, RawRwSemWith<RSPIN, ADAPTIVE>, T>;
