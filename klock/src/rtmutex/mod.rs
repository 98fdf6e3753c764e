//! Priority-inheritance mutex with userspace top-waiter spinning (the 2016
//! "rtmutex: reduce top-waiter blocking" patch, docs/design.md, section 5).
//!
//! Real priority inheritance needs the kernel: only it can boost the
//! owner's scheduling priority while a higher-priority thread waits. The
//! lock word is therefore a **PI futex** word, and every contended path
//! that must wait goes through `FUTEX_LOCK_PI2` (the kernel queues waiters
//! by priority, boosts the owner, walks the PI chain, detects deadlocks
//! with `EDEADLK`, and spins for its own top waiter). Uncontended lock and
//! unlock stay in userspace, and so does the idea of the 2016 top-waiter spinning mail: a contender that
//! would be the **top waiter** first **spins on the running owner** instead
//! of blocking, and stops when
//!
//! 1. it should reschedule ([`OnCpu::should_yield`](crate::oncpu::OnCpu::should_yield)),
//! 2. the owner is not running ([`oncpu::oracle`](crate::oncpu::oracle); without an exact oracle:
//!    when the adaptive time budget is spent), or
//! 3. it is no longer the top waiter: somebody queued in the kernel
//!    (`FUTEX_WAITERS` appeared), or the owner handed the lock to a kernel
//!    waiter (the owner changed while `FUTEX_WAITERS` stayed set). A
//!    userspace waiter (below) sets the bit too; the spinner cannot tell
//!    the two apart and stops as well, then waits in userspace itself if
//!    it is not real-time.
//!
//! The kernel leaves `FUTEX_WAITERS` set after every hand-over, even when
//! nobody else is queued, so the bit alone cannot say whether a waiter is
//! queued. A contender that finds it set may still spin on *that* owner
//! (condition 3 ends the spin as soon as the lock goes to a kernel
//! waiter); if nobody is queued, the owner's `FUTEX_UNLOCK_PI` writes 0 and
//! the spinner takes the lock. Without this, once one waiter has queued,
//! every later acquisition goes through the kernel (a hand-over convoy).
//!
//! After [`SPIN_FAIL_STREAK`] consecutive failed spins a lock spins only on
//! one contended lock in [`SPIN_PROBE_EVERY`] until a spin succeeds again
//! (adaptive disabling, klock's addition: without an exact oracle a failed
//! spin costs a whole budget).
//!
//! # Non-real-time waiters wait in userspace
//!
//! `FUTEX_UNLOCK_PI` hands the lock straight to the kernel's top waiter,
//! which must then wake up and run: once contenders queue in the kernel,
//! every acquisition costs a wake-up (a hand-over convoy; measured: 60–210
//! kop/s at 4–16 threads for every PI lock, against 1.3–7 Mop/s for
//! [`crate::Mutex`]). Priority inheritance only matters for real-time
//! waiters: a `SCHED_OTHER` task's CPU share comes from its nice weight,
//! which a PI boost does not change. So a contender that is **not**
//! real-time (`SCHED_OTHER`/`BATCH`/`IDLE`), once its spin failed, **waits
//! in userspace** on a second futex ([`user_wait_ns`] at most), and the
//! lock keeps being taken from userspace like [`crate::Mutex`]:
//!
//! * It sets `WAITERS` in the word itself (a bit the kernel's ABI lets
//!   anyone set), so the owner's unlock takes the slow path, which after
//!   `FUTEX_UNLOCK_PI` (which writes 0 when the kernel has nobody queued)
//!   wakes one userspace waiter. The woken waiter takes the lock (keeping
//!   `WAITERS` set if others still wait) or sets `WAITERS` again and sleeps.
//! * Real-time contenders (`SCHED_FIFO`/`RR`/`DEADLINE`) never wait in
//!   userspace: they spin as top waiter or queue in the kernel, which boosts
//!   the owner and hands them the lock ahead of every userspace waiter
//!   (the word is never 0 while they are queued).
//! * After [`user_wait_ns`] (default [`USER_WAIT_NS`], 4 ms) a userspace
//!   waiter queues in the kernel: that
//!   bounds its wait (the kernel hands it the lock) and lets the kernel see
//!   an ABBA deadlock among non-real-time threads (reported that much
//!   late instead of at once).
//!
//! Switch: [`set_user_wait`] / `KLOCK_RT_USER_WAIT=0` (all non-RT waiters
//! queue in the kernel, that mail's literal design), or per type
//! [`RT_SPIN_KWAIT`]; [`NO_RT_SPIN`] neither spins nor waits in userspace.
//!
//! The spinner never steals: it takes the lock only when the word is 0,
//! and the word is never 0 while the kernel has waiters queued (the
//! kernel's unlock hands the lock straight to its top waiter, writing that
//! waiter's tid). At most one thread spins per lock (a spinner slot), as in
//! that mail ("at most only one spinner waiter upon contended lock").
//!
//! # The lock word (the kernel's PI-futex ABI)
//!
//! ```text
//!   31        30          29                                            0
//! +---------+------------+-----------------------------------------------+
//! | WAITERS | OWNER_DIED |          owner tid (0 = unlocked)             |
//! +---------+------------+-----------------------------------------------+
//! ```
//!
//! * **owner tid** (bits 0–29, [`TID_MASK`]): kernel thread id of the owner.
//! * [`WAITERS`] (bit 31, `FUTEX_WAITERS`): the kernel has (or may have)
//!   waiters queued; unlock must go through `FUTEX_UNLOCK_PI`. Set by the
//!   kernel only.
//! * [`OWNER_DIED`] (bit 30, `FUTEX_OWNER_DIED`): set by the kernel for a
//!   robust futex whose owner died. klock registers no robust list, so it
//!   is never set by klock's use; a word carrying it is left to the kernel.
//!
//! A second word, `spinner`, holds the tid of the one userspace spinner
//! (0: none); `parked` counts the threads waiting in userspace, and
//! `park_seq` is the futex they sleep on (bumped by every wake).
//!
//! # State transitions
//!
//! `(owner, WAITERS)`; `me`, `X`, `T` thread ids, `T` the kernel's top waiter.
//!
//! ```text
//! fast lock               (0, 0)   -> (me, 0)     CAS, acquire            userspace
//! fast unlock             (me, 0)  -> (0, 0)      CAS, release            userspace; fails on WAITERS
//! top-waiter spin         (X, w):  spin while X runs and we need not yield
//!   lock freed            (0, 0)   -> (me, 0)     CAS, acquire            userspace
//!   waiter queued         (X, 0)   -> (X, 1):     stop spinning, go to the kernel
//!   handed to a waiter    (X, 1)   -> (T, 1):     stop spinning, go to the kernel
//! user wait (non-RT)      (X, 0)   -> (X, 1)      CAS, then sleep on park_seq
//!                         (X, 1):  sleep on park_seq
//!   woken, lock free      (0, 0)   -> (me, p)     CAS, acquire; p = others still parked
//!   waited USER_WAIT_NS:  go to the kernel
//! kernel unlock, then     parked > 0: bump park_seq, wake one userspace waiter
//! kernel lock (LOCK_PI2)  (0, *)   -> (me, W)     kernel cmpxchg (W: more waiters)
//!                         (X, *)   -> (X, 1)      kernel: queue, boost X, sleep
//!                         (me, *)  -> EDEADLK     kernel: self-deadlock (or a PI-chain cycle)
//! kernel unlock (UNLOCK_PI)(me, 1) -> (T, 1)      kernel: hand over to the top waiter
//!                         (me, 1)  -> (0, 0)      kernel: no waiter left (e.g. it timed out)
//! ```
//!
//! # Memory ordering
//!
//! Userspace acquisitions are `Acquire` CASes, userspace releases `Release`
//! CASes. The kernel's writes to the word happen in the thread that makes
//! the call: before `FUTEX_UNLOCK_PI` we issue a `Release` fence, so the
//! kernel's hand-over write carries our critical section; after
//! `FUTEX_LOCK_PI2` returns we read the word with `Acquire` (checking that
//! it names us), which reads that write or a later kernel RMW on it
//! (`WAITERS` updates), continuing the release sequence.
//!
//! # Spin switch
//!
//! Like the kernel's `RT_MUTEX_SPIN_ON_OWNER`, spinning can be turned off:
//! globally ([`set_top_waiter_spin`], `KLOCK_RT_SPIN=0`) for
//! [`RawRtMutex`], or per type with [`RawRtMutexWith`]`<`[`RT_SPIN`]`>` /
//! `<`[`NO_RT_SPIN`]`>`, so one benchmark run can show both.
//!
//! # Errors
//!
//! A deadlock (`EDEADLK`: the caller already owns the lock, or the PI chain
//! closes a cycle) is returned as [`RtMutexError::Deadlock`] by the checked
//! methods ([`RawRtMutexWith::lock_checked`], [`RtMutexExt::lock_checked`])
//! and panics with a clear message on the `lock_api` path
//! ([`lock_api::Mutex::lock`]).

use crate::config::{RT_SPIN as GLOBAL_SPIN, RT_USER_WAIT as GLOBAL_USER_WAIT};
use crate::oncpu::SpinStats;
use crate::sync::AtomicU32;
use crate::sync::Ordering::{Acquire, Relaxed, Release};
use crate::sys;
use crate::thread;
use core::marker::PhantomData;
use core::sync::atomic::AtomicU8 as StdAtomicU8;
use std::time::Duration;

#[cfg(loom)]
mod loom_kernel;
#[cfg(loom)]
mod loom_probe;
mod slow;
#[cfg(all(test, not(loom)))]
mod tests;

#[cfg(loom)]
pub use loom_probe::Probe;

/// `FUTEX_WAITERS`: the kernel has waiters queued; unlock through the kernel.
pub const WAITERS: u32 = 0x8000_0000;
/// `FUTEX_OWNER_DIED`: a robust owner died (never set by klock's own use).
pub const OWNER_DIED: u32 = 0x4000_0000;
/// `FUTEX_TID_MASK`: the owner's tid.
pub const TID_MASK: u32 = 0x3fff_ffff;

/// Per-lock spin mode: follow the global switch ([`top_waiter_spin`]).
pub const RT_SPIN_GLOBAL: u8 = 0;
/// Per-lock spin mode: the top waiter always spins on a running owner.
pub const RT_SPIN: u8 = 1;
/// Per-lock spin mode: never spin in userspace; contended lockers go
/// straight to `FUTEX_LOCK_PI2`.
pub const NO_RT_SPIN: u8 = 2;

/// Per-lock mode: the top waiter spins, but every other contender queues
/// in the kernel, real-time or not (no userspace wait: the 2016 mail's literal
/// design, kept so that one benchmark run can show both).
pub const RT_SPIN_KWAIT: u8 = 3;

/// Default of [`user_wait_ns`]: 4 ms, as [`crate::mutex::DEFAULT_HANDOFF_NS`].
pub const USER_WAIT_NS: u64 = 4_000_000;

/// Longest a non-real-time contender waits in userspace.
static USER_WAIT_LIMIT: core::sync::atomic::AtomicU64 =
    core::sync::atomic::AtomicU64::new(USER_WAIT_NS);

/// Longest a non-real-time contender waits in userspace before it queues
/// in the kernel: it bounds the wait (the kernel hands the lock to its
/// queued waiters first) and lets the kernel see a deadlock cycle.
pub fn user_wait_ns() -> u64 {
    USER_WAIT_LIMIT.load(core::sync::atomic::Ordering::Relaxed)
}

/// Set [`user_wait_ns`] for all locks (at least 1 µs). Configuration, not
/// synchronisation: takes effect at the next userspace wait.
pub fn set_user_wait_ns(ns: u64) {
    USER_WAIT_LIMIT.store(ns.max(1_000), core::sync::atomic::Ordering::Relaxed);
}

/// When the oracle says the owner runs, the spinner spins without the
/// adaptive budget, but for at most this many budgets in all: two threads
/// spinning on each other (an ABBA deadlock in the making, which the
/// kernel reports only once they call it) must not spin forever.
pub const MAX_RUNNING_BUDGETS: u64 = 64;

/// Adaptive disabling: after this many consecutive failed spins (the
/// owner was preempted, the budget ran out, we should yield, or a queued
/// waiter got the lock) a lock stops spinning…
pub const SPIN_FAIL_STREAK: u32 = 4;
/// …except on one contended lock in this many (a probe); a successful
/// spin turns spinning fully back on. Without an exact oracle this keeps a
/// lock whose owners are usually preempted (pi_stress on one CPU) from
/// paying a spin budget on every contended lock.
pub const SPIN_PROBE_EVERY: u32 = 16;

/// Why a lock attempt failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RtMutexError {
    /// `EDEADLK`: the caller already owns the lock, or waiting would close
    /// a cycle of PI-lock owners (the kernel walked the chain).
    Deadlock,
    /// The deadline passed before the lock was acquired.
    TimedOut,
    /// Another error from the kernel (raw `errno`), e.g. `ESRCH`/`EINVAL`
    /// when the word names a thread that no longer exists.
    Kernel(i32),
}

impl core::fmt::Display for RtMutexError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::Deadlock => write!(
                f,
                "deadlock (EDEADLK): the thread already holds this RtMutex, or waiting would close a cycle of lock owners"
            ),
            Self::TimedOut => write!(f, "timed out"),
            Self::Kernel(e) => write!(
                f,
                "futex PI operation failed: {}",
                std::io::Error::from_raw_os_error(*e)
            ),
        }
    }
}

impl std::error::Error for RtMutexError {}

// Global settings. Plain std atomics: configuration, not synchronisation.
// The switches (`GLOBAL_SPIN`, `GLOBAL_USER_WAIT`) are kept by `config`.
/// 0: try FUTEX_LOCK_PI2; 1: the kernel said ENOSYS (or a test forced it):
/// use FUTEX_LOCK_PI with a CLOCK_REALTIME deadline.
static NO_LOCK_PI2: StdAtomicU8 = StdAtomicU8::new(0);

/// The global top-waiter spin switch, for locks of mode [`RT_SPIN_GLOBAL`]
/// (the default [`crate::RtMutex`]). On unless the environment says
/// `KLOCK_RT_SPIN=0` (read once) or [`set_top_waiter_spin`]`(false)` was
/// called.
#[inline]
pub fn top_waiter_spin() -> bool {
    GLOBAL_SPIN.get()
}

/// Turn userspace top-waiter spinning on or off for all locks of mode
/// [`RT_SPIN_GLOBAL`]. Takes effect at the next contended lock.
pub fn set_top_waiter_spin(on: bool) {
    GLOBAL_SPIN.set(on);
}

/// The global userspace-wait switch (see the [module docs](self)), for
/// locks of mode [`RT_SPIN_GLOBAL`] and [`RT_SPIN`]. On unless the
/// environment says `KLOCK_RT_USER_WAIT=0` (read once) or
/// [`set_user_wait`]`(false)` was called.
#[inline]
pub fn user_wait() -> bool {
    GLOBAL_USER_WAIT.get()
}

/// Let non-real-time contenders wait in userspace (`true`) or send them to
/// the kernel like real-time ones (`false`). Takes effect at the next
/// contended lock.
pub fn set_user_wait(on: bool) {
    GLOBAL_USER_WAIT.set(on);
}

/// Whether contended locks use `FUTEX_LOCK_PI2` (Linux ≥ 5.14); `false`
/// once the kernel answered `ENOSYS`, after which `FUTEX_LOCK_PI` is used.
pub fn uses_lock_pi2() -> bool {
    NO_LOCK_PI2.load(core::sync::atomic::Ordering::Relaxed) == 0
}

/// Tests only: behave as if the kernel lacked `FUTEX_LOCK_PI2` (`true`), or
/// try it again (`false`).
#[doc(hidden)]
pub fn force_lock_pi_fallback(on: bool) {
    NO_LOCK_PI2.store(on as u8, core::sync::atomic::Ordering::Relaxed);
}

/// Guard state of a held [`RawRtMutexWith`]: the owner tid the lock was
/// taken with. Not `Send`: a PI futex is owned by a thread, and only that
/// thread may unlock it (the kernel refuses others with `EPERM`).
#[derive(Debug)]
pub struct RtGuard {
    tid: u32,
    _not_send: PhantomData<*mut ()>,
}

// SAFETY: the guard carries no shared state; `Sync` only lets a `&Guard`
// be shared, as `GuardNoSend` does.
unsafe impl Sync for RtGuard {}

impl RtGuard {
    #[inline(always)]
    fn new(tid: u32) -> Self {
        Self {
            tid,
            _not_send: PhantomData,
        }
    }

    /// The owner's tid.
    pub fn owner_tid(&self) -> u32 {
        self.tid
    }
}

/// What a kernel PI operation reported (errno, decoded).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(loom, allow(dead_code))]
enum KErr {
    Deadlock,
    TimedOut,
    NoSys,
    /// EAGAIN (owner exiting) or EINTR: try again.
    Retry,
    Perm,
    Other(i32),
}

/// The PI mutex with userspace top-waiter spinning, with a per-type spin
/// mode `SPIN` ([`RT_SPIN_GLOBAL`], [`RT_SPIN`] or [`NO_RT_SPIN`]). Use it
/// through [`crate::RtMutex`] or [`crate::RtMutexWith`].
pub struct RawRtMutexWith<const SPIN: u8> {
    /// The PI futex word (see the [module docs](self)).
    word: AtomicU32,
    /// Tid of the one userspace spinner, 0 if none. Not synchronisation
    /// for the data: only who may spin.
    spinner: AtomicU32,
    /// Threads waiting in userspace (see [`Self::user_wait`]).
    parked: AtomicU32,
    /// The futex userspace waiters sleep on; every wake bumps it.
    park_seq: AtomicU32,
    /// Adaptive spin budget.
    spin: SpinStats,
    /// Consecutive failed spins (statistics: plain relaxed std atomics).
    fail_streak: core::sync::atomic::AtomicU32,
    /// Contended locks that skipped spinning (for the probe rhythm).
    skips: core::sync::atomic::AtomicU32,
    /// Loom only: the modelled kernel side of the PI futex.
    #[cfg(loom)]
    kernel: loom_kernel::PiFutex,
    /// Loom only: the modelled futex of `park_seq`.
    #[cfg(loom)]
    park: loom_kernel::ParkFutex,
    /// Loom only: the userspace wait limit (`u64::MAX`: none, the default).
    #[cfg(loom)]
    loom_user_wait_ns: core::sync::atomic::AtomicU64,
    /// Loom only: which rare paths an execution took.
    #[cfg(loom)]
    probe: Probe,
    /// Loom only: a deliberately broken unlock (see `set_loom_broken_unlock`).
    #[cfg(loom)]
    loom_broken_unlock: core::sync::atomic::AtomicBool,
    /// Loom only: a deliberately broken unlock that wakes no userspace waiter.
    #[cfg(loom)]
    loom_broken_wake: core::sync::atomic::AtomicBool,
}

/// The PI mutex following the global spin switch ([`crate::RtMutex`]'s raw lock).
pub type RawRtMutex = RawRtMutexWith<RT_SPIN_GLOBAL>;

impl<const SPIN: u8> RawRtMutexWith<SPIN> {
    /// An unlocked mutex.
    #[cfg(not(loom))]
    pub const fn new() -> Self {
        Self {
            word: AtomicU32::new(0),
            spinner: AtomicU32::new(0),
            parked: AtomicU32::new(0),
            park_seq: AtomicU32::new(0),
            spin: SpinStats::new(),
            fail_streak: core::sync::atomic::AtomicU32::new(0),
            skips: core::sync::atomic::AtomicU32::new(0),
        }
    }

    /// An unlocked mutex (loom atomics cannot be built in a `const fn`).
    #[cfg(loom)]
    pub fn new() -> Self {
        Self {
            word: AtomicU32::new(0),
            spinner: AtomicU32::new(0),
            parked: AtomicU32::new(0),
            park_seq: AtomicU32::new(0),
            spin: SpinStats::new(),
            fail_streak: core::sync::atomic::AtomicU32::new(0),
            skips: core::sync::atomic::AtomicU32::new(0),
            kernel: loom_kernel::PiFutex::new(),
            park: loom_kernel::ParkFutex::new(),
            loom_user_wait_ns: core::sync::atomic::AtomicU64::new(u64::MAX),
            probe: Probe::default(),
            loom_broken_unlock: core::sync::atomic::AtomicBool::new(false),
            loom_broken_wake: core::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Whether this lock's top waiter spins in userspace now (its mode, or
    /// the global switch).
    #[inline]
    pub fn spin_enabled(&self) -> bool {
        match SPIN {
            RT_SPIN | RT_SPIN_KWAIT => true,
            NO_RT_SPIN => false,
            _ => top_waiter_spin(),
        }
    }

    /// Whether this lock's non-real-time contenders wait in userspace (its
    /// mode, or the global switch [`user_wait`]).
    #[inline]
    pub fn user_wait_enabled(&self) -> bool {
        match SPIN {
            NO_RT_SPIN | RT_SPIN_KWAIT => false,
            _ => user_wait(),
        }
    }

    /// Acquire the lock; `Err(Deadlock)` if the caller already holds it or
    /// the PI chain would close a cycle.
    #[inline]
    pub fn lock_checked(&self) -> Result<RtGuard, RtMutexError> {
        self.lock_checked_as(thread::current_tid())
    }

    /// [`lock_checked`](Self::lock_checked) by a caller that has its tid at
    /// hand (each lookup of it is a thread-local access, a call in a
    /// shared library). `tid` must be the caller's
    /// ([`thread::current_tid`]): the lock word names the owner.
    #[inline]
    pub fn lock_checked_as(&self, tid: u32) -> Result<RtGuard, RtMutexError> {
        let me = tid;
        // (0, 0) -> (me, 0). Acquire pairs with the Release of the
        // previous owner's unlock (its CAS, or the fence before UNLOCK_PI).
        if self.word.compare_exchange(0, me, Acquire, Relaxed).is_err() {
            self.lock_slow(me, None)?;
        }
        Ok(RtGuard::new(me))
    }

    /// Acquire the lock unless `deadline_ns` ([`monotonic_ns`](crate::sys::monotonic_ns) time)
    /// passes first.
    #[inline]
    pub fn try_lock_until_ns_checked(&self, deadline_ns: u64) -> Result<RtGuard, RtMutexError> {
        let me = thread::current_tid();
        // Acquire: as in lock_checked.
        if self.word.compare_exchange(0, me, Acquire, Relaxed).is_err() {
            self.lock_slow(me, Some(deadline_ns))?;
        }
        Ok(RtGuard::new(me))
    }

    /// Acquire the lock unless `timeout` passes first.
    pub fn try_lock_for_checked(&self, timeout: Duration) -> Result<RtGuard, RtMutexError> {
        self.try_lock_until_ns_checked(sys::deadline_after(timeout))
    }

    /// Take the lock if it is free; never spins or sleeps.
    #[inline]
    pub fn raw_try_lock(&self) -> Option<RtGuard> {
        self.raw_try_lock_as(thread::current_tid())
    }

    /// [`raw_try_lock`](Self::raw_try_lock) by a caller that has its tid
    /// at hand (see [`lock_checked_as`](Self::lock_checked_as)).
    #[inline]
    pub fn raw_try_lock_as(&self, tid: u32) -> Option<RtGuard> {
        let me = tid;
        // Acquire: as in lock_checked.
        self.word
            .compare_exchange(0, me, Acquire, Relaxed)
            .ok()
            .map(|_| RtGuard::new(me))
    }

    /// Acquire the lock; panics on deadlock (the `lock_api` path).
    #[inline]
    pub fn raw_lock(&self) -> RtGuard {
        match self.lock_checked() {
            Ok(g) => g,
            Err(e) => lock_failed(e),
        }
    }

    /// Release the lock.
    ///
    /// # Safety
    /// `guard` must come from locking this mutex, on this thread, and the
    /// lock must still be held with it. Unlocking a lock the caller does
    /// not own panics (the kernel answers `EPERM`) when waiters exist.
    #[inline]
    pub unsafe fn raw_unlock(&self, guard: RtGuard) {
        #[cfg(loom)]
        if self
            .loom_broken_unlock
            .load(core::sync::atomic::Ordering::Relaxed)
        {
            // BROKEN (loom only): release without looking at WAITERS.
            self.word.store(0, Release);
            return;
        }
        // (me, 0) -> (0, 0); fails on WAITERS. Release pairs with the
        // Acquire CAS of whoever takes the lock next from userspace (or the
        // kernel's read in LOCK_PI2, in the next owner's thread).
        if self
            .word
            .compare_exchange(guard.tid, 0, Release, Relaxed)
            .is_err()
        {
            self.unlock_slow(guard.tid);
        }
    }

    /// Threads waiting for this lock in userspace (a snapshot; see the
    /// [module docs](self)).
    pub fn user_waiters(&self) -> u32 {
        self.parked.load(Relaxed)
    }

    /// Held by some thread (a snapshot).
    #[inline]
    pub fn is_held(&self) -> bool {
        self.word.load(Relaxed) & TID_MASK != 0
    }

    /// The owner's tid, if any (a snapshot).
    pub fn owner_tid(&self) -> Option<u32> {
        let o = self.word.load(Relaxed) & TID_MASK;
        (o != 0).then_some(o)
    }

    /// The raw futex word, for tests and debugging.
    #[doc(hidden)]
    #[inline]
    pub fn word(&self) -> u32 {
        self.word.load(Relaxed)
    }

    /// This lock's adaptive spin statistics.
    pub fn spin_stats(&self) -> &SpinStats {
        &self.spin
    }
}

#[cold]
#[inline(never)]
#[track_caller]
fn lock_failed(e: RtMutexError) -> ! {
    match e {
        RtMutexError::Deadlock => panic!(
            "klock::RtMutex: deadlock (EDEADLK): thread {} already holds this lock, or waiting for it would close a cycle of lock owners; use lock_checked() to get this as an error",
            thread::current_tid()
        ),
        e => panic!("klock::RtMutex: lock failed: {e}"),
    }
}

impl<const SPIN: u8> Default for RawRtMutexWith<SPIN> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const SPIN: u8> core::fmt::Debug for RawRtMutexWith<SPIN> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let w = self.word();
        f.debug_struct("RawRtMutex")
            .field("spin_mode", &SPIN)
            .field("owner_tid", &(w & TID_MASK))
            .field("waiters", &(w & WAITERS != 0))
            .field("owner_died", &(w & OWNER_DIED != 0))
            .field("spin_avg_ns", &self.spin.average_ns())
            .finish()
    }
}

// SAFETY: mutual exclusion by the PI futex protocol (the kernel's, plus
// userspace CASes from/to 0 only, checked by the loom model); acquire on
// every successful lock path, release on every unlock. The guard is !Send:
// the word names the locking thread.
#[cfg(not(loom))]
unsafe impl<const SPIN: u8> lock_api::RawMutex for RawRtMutexWith<SPIN> {
    #[allow(clippy::declare_interior_mutable_const)]
    const INIT: Self = Self::new();
    type Guard = RtGuard;

    /// Panics with a clear message on deadlock (`EDEADLK`).
    #[inline]
    fn lock(&self) -> RtGuard {
        self.raw_lock()
    }

    #[inline]
    fn try_lock(&self) -> Option<RtGuard> {
        self.raw_try_lock()
    }

    #[inline]
    unsafe fn unlock(&self, guard: RtGuard) {
        // SAFETY: forwarded contract.
        unsafe { self.raw_unlock(guard) }
    }

    #[inline]
    fn is_locked(&self) -> bool {
        self.is_held()
    }
}

// SAFETY: a timed-out attempt owns nothing; the kernel dequeued it.
#[cfg(not(loom))]
unsafe impl<const SPIN: u8> lock_api::RawMutexTimed for RawRtMutexWith<SPIN> {
    type Duration = Duration;
    type Instant = std::time::Instant;

    /// Panics on deadlock, like `lock`; `None` on timeout.
    fn try_lock_for(&self, timeout: Duration) -> Option<RtGuard> {
        match self.try_lock_for_checked(timeout) {
            Ok(g) => Some(g),
            Err(RtMutexError::TimedOut) => None,
            Err(e) => lock_failed(e),
        }
    }

    fn try_lock_until(&self, timeout: std::time::Instant) -> Option<RtGuard> {
        let left = timeout.saturating_duration_since(std::time::Instant::now());
        self.try_lock_for(left)
    }
}

/// Checked locking for [`crate::RtMutex`] / [`crate::RtMutexWith`]: a
/// deadlock is an error value instead of a panic.
///
/// ```
/// use klock::rtmutex::{RtMutexError, RtMutexExt};
/// let m = klock::RtMutex::new(1);
/// let g = m.lock_checked().unwrap();
/// assert_eq!(m.lock_checked().unwrap_err(), RtMutexError::Deadlock);
/// drop(g);
/// ```
#[cfg(not(loom))]
pub trait RtMutexExt<T: ?Sized> {
    /// The `lock_api` guard type.
    type Guard<'a>
    where
        Self: 'a;
    /// Lock; `Err(Deadlock)` instead of a panic on `EDEADLK`.
    fn lock_checked(&self) -> Result<Self::Guard<'_>, RtMutexError>;
    /// Lock within `timeout`; `Err(TimedOut)` or `Err(Deadlock)` otherwise.
    fn try_lock_for_checked(&self, timeout: Duration) -> Result<Self::Guard<'_>, RtMutexError>;
}

#[cfg(not(loom))]
impl<const SPIN: u8, T: ?Sized> RtMutexExt<T> for lock_api::Mutex<RawRtMutexWith<SPIN>, T> {
    type Guard<'a>
        = lock_api::MutexGuard<'a, RawRtMutexWith<SPIN>, T>
    where
        Self: 'a;

    fn lock_checked(&self) -> Result<Self::Guard<'_>, RtMutexError> {
        // SAFETY: the raw lock is only used to lock; the guard it returns
        // is turned into a MutexGuard at once, which unlocks it.
        let g = unsafe { self.raw() }.lock_checked()?;
        // SAFETY: `g` is a guard of an acquisition of this mutex's lock.
        Ok(unsafe { self.make_guard_unchecked(g) })
    }

    fn try_lock_for_checked(&self, timeout: Duration) -> Result<Self::Guard<'_>, RtMutexError> {
        // SAFETY: as in lock_checked.
        let g = unsafe { self.raw() }.try_lock_for_checked(timeout)?;
        // SAFETY: as in lock_checked.
        Ok(unsafe { self.make_guard_unchecked(g) })
    }
}
