//! The lock guarding a sleeping lock's wait list (`wait_lock`), shared by
//! [`crate::mutex`], [`crate::rwsem`] and [`crate::condvar`]: the
//! [`WaitLockRaw`] trait the locks take as a type parameter, its
//! implementation for klock's queued spinlock, and the default
//! [`WaitLock`], the yielding test-and-set [`YieldLock`].

use crate::qspinlock::RawQSpinLockWith;
use crate::spin::cpu_relax;
use crate::sync::AtomicU32;
use crate::sync::Ordering::{Acquire, Relaxed, Release};

/// The lock protecting a mutex's wait list (`wait_lock`): a small raw
/// spinlock. The mutex takes it as a type parameter, so one process can
/// compare choices; [`WaitLock`] is the default.
///
/// Its critical sections are a few list operations (wake-ups are sent
/// after it is released). Under oversubscription the choice matters: with a queued
/// lock ([`RawQSpinLock`](crate::qspinlock::RawQSpinLock)) a preempted queued waiter stalls everyone
/// behind it, while a test-and-set lock that yields ([`YieldLock`]) lets
/// the scheduler run the holder (see [`WaitLock`]).
pub trait WaitLockRaw: Sized + Send + Sync {
    /// An unlocked lock.
    #[cfg(not(loom))]
    #[allow(clippy::declare_interior_mutable_const)]
    const INIT: Self;
    /// An unlocked lock (loom atomics cannot be built in a constant).
    #[cfg(loom)]
    fn new_unlocked() -> Self;
    /// Whether a waiter that keeps failing eventually sleeps (`false`: it
    /// spins forever, as a queued spinlock does). Only a sleeping wait lock
    /// is safe for `SCHED_FIFO` threads of different priorities on one CPU,
    /// where a spinning or yielding waiter never lets a lower-priority
    /// holder run.
    const SLEEPS: bool;
    /// Acquire (spinning; may yield the CPU).
    fn lock(&self);
    /// Acquire, leaving `tag` (never 0) in the lock while it is held;
    /// a holder that left another tag is one that will never release it
    /// (a thread of the parent, in a forked child): the lock is taken
    /// over from it, and the result says so (`true`), so that the caller
    /// can repair what it left half done. A lock that cannot carry a tag
    /// (the queued spinlock) waits as [`lock`](Self::lock) does and never
    /// reports a take-over.
    fn lock_tagged(&self, tag: u32) -> bool {
        let _ = tag;
        self.lock();
        false
    }
    /// Release.
    ///
    /// # Safety
    /// The lock is held by the caller.
    unsafe fn unlock(&self);
}

impl<const PENDING_LOOPS: u32, const PARAVIRT: bool, W: crate::qspinlock::LockWord> WaitLockRaw
    for RawQSpinLockWith<PENDING_LOOPS, PARAVIRT, W>
{
    const SLEEPS: bool = false;
    #[cfg(not(loom))]
    const INIT: Self = Self::new();
    #[cfg(loom)]
    fn new_unlocked() -> Self {
        Self::new()
    }
    #[inline]
    fn lock(&self) {
        self.raw_lock();
    }
    #[inline]
    unsafe fn unlock(&self) {
        // SAFETY: forwarded contract.
        unsafe { self.raw_unlock() }
    }
}

/// A test-and-test-and-set lock that spins briefly and then yields the
/// CPU (`sched_yield`) while the lock stays taken, and after
/// [`YIELD_LOCK_YIELDS`] yields sleeps [`YIELD_LOCK_SLEEP_NS`] at a time.
/// Not fair, not queued: under oversubscription no waiter can stall the
/// others, and a yielding waiter gives a preempted holder its CPU back.
/// The sleep is for real-time threads: `sched_yield` only lets threads of
/// the same priority run, so a `SCHED_FIFO` waiter would yield forever to
/// a lower-priority holder preempted on its CPU. The sleep is timed (no
/// wake-up to send), so `unlock` stays one store.
#[derive(Debug)]
pub struct YieldLock {
    word: AtomicU32,
}

/// Spins (re-reads) between yields in [`YieldLock`].
const YIELD_LOCK_SPINS: u32 = 64;
/// Yields before a [`YieldLock`] waiter starts sleeping.
pub const YIELD_LOCK_YIELDS: u32 = 16;
/// How long a [`YieldLock`] waiter sleeps per round once yielding did not
/// help (50 µs: long enough for a preempted holder to finish, short
/// against the scheduler's time slice).
pub const YIELD_LOCK_SLEEP_NS: u64 = 50_000;

impl YieldLock {
    /// An unlocked lock.
    #[cfg(not(loom))]
    pub const fn new() -> Self {
        Self {
            word: AtomicU32::new(0),
        }
    }

    /// An unlocked lock.
    #[cfg(loom)]
    pub fn new() -> Self {
        Self {
            word: AtomicU32::new(0),
        }
    }

    /// Acquire, leaving `tag` (non-zero) in the word while held. A word
    /// that holds another non-zero value was locked by a holder that will
    /// never release it (the compact mutex and the rw-semaphore tag their
    /// wait-list locks with the fork generation,
    /// [`crate::thread::fork_tag`]: a holder tagged with an older one is a
    /// thread left behind in the parent of a fork); the lock is taken over
    /// from it, and the result says so (`true`), so the caller can repair
    /// what that holder left half done. A plain `lock` is the tag 1, which
    /// a locker with another tag would take over: every acquisition of one
    /// lock must use the same form (a plain `lock` everywhere, or the fork
    /// tag everywhere, which is 1 until the process is a forked child).
    #[inline]
    pub fn lock_tagged(&self, tag: u32) -> bool {
        debug_assert!(tag != 0);
        // 0 -> tag. Acquire pairs with the Release store of the last unlock.
        match self.word.compare_exchange(0, tag, Acquire, Relaxed) {
            Ok(_) => false,
            Err(_) => self.lock_contended(tag),
        }
    }

    #[cold]
    #[inline(never)]
    fn lock_contended(&self, tag: u32) -> bool {
        let mut yields = 0u32;
        loop {
            let mut n = 0;
            loop {
                let held = self.word.load(Relaxed);
                if held == 0 {
                    break;
                }
                // Acquire: a holder that stays away published nothing
                // since it stopped; this orders us after the CAS of
                // anyone else who took it over and let it go.
                if held != tag
                    && self
                        .word
                        .compare_exchange(held, tag, Acquire, Relaxed)
                        .is_ok()
                {
                    return true;
                }
                n += 1;
                if n >= YIELD_LOCK_SPINS {
                    if yields < YIELD_LOCK_YIELDS {
                        yields += 1;
                        #[cfg(not(loom))]
                        std::thread::yield_now();
                    } else {
                        // Timed: the holder sends no wake-up.
                        let _ = crate::sys::futex_wait(
                            &self.word,
                            held,
                            Some(core::time::Duration::from_nanos(YIELD_LOCK_SLEEP_NS)),
                        );
                    }
                    n = 0;
                }
                cpu_relax();
            }
            // Acquire pairs with the Release store of the last unlock.
            if self
                .word
                .compare_exchange_weak(0, tag, Acquire, Relaxed)
                .is_ok()
            {
                return false;
            }
        }
    }
}

impl Default for YieldLock {
    fn default() -> Self {
        Self::new()
    }
}

impl WaitLockRaw for YieldLock {
    const SLEEPS: bool = true;
    #[cfg(not(loom))]
    const INIT: Self = Self::new();
    #[cfg(loom)]
    fn new_unlocked() -> Self {
        Self::new()
    }
    #[inline]
    fn lock(&self) {
        // Tag 1: taken over only by a locker with another tag.
        let _ = YieldLock::lock_tagged(self, 1);
    }
    #[inline]
    fn lock_tagged(&self, tag: u32) -> bool {
        YieldLock::lock_tagged(self, tag)
    }
    #[inline]
    unsafe fn unlock(&self) {
        // 1 -> 0. Release pairs with the Acquire CAS of the next locker.
        self.word.store(0, Release);
    }
}

/// The default `wait_lock`: [`YieldLock`].
///
/// Measured, as the design asks of the wait-list lock: 8 threads × 4,000 lock/unlock pairs on
/// one mutex (a yield inside every 64th critical section), 2 CPUs, release
/// build — with [`YieldLock`]: 54 ms owner-spin, 9 ms no-owner-spin; with
/// klock's queued spinlock ([`RawQSpinLock`](crate::qspinlock::RawQSpinLock)):
/// 42 s and 20 s. Queued waiters spin while the waiter the MCS baton was
/// passed to is preempted, so every wait-list operation can cost a
/// scheduler time slice. `RawMutexWith<SPIN, RawQSpinLock>` keeps the
/// queued variant available for measurement.
pub type WaitLock = YieldLock;
