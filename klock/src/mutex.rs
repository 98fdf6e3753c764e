//! Mutex with optimistic spinning on a running owner (the 2009 "adaptive
//! spinning" mutex, DESIGN §4.3).
//!
//! A contended locker first **spins** — but only while that makes sense:
//! while the owner is unchanged and running ([`oncpu`]
//! oracle; by default a calibrated, per-lock adaptive time budget) and the
//! spinner need not yield. Spinners queue in an [`Osq`] so that only one of
//! them spins on the lock word. When spinning stops making sense the
//! locker **sleeps** on its own futex word in a FIFO wait list (precise
//! wake-ups, no thundering herd). A waiter that has waited too long
//! ([`handoff_ns`]) makes the next unlock **hand the lock over** to it, so
//! spinners cannot starve sleepers.
//!
//! # The owner word
//!
//! ```text
//!  63 (or 31)                             4       3        2         1         0
//! +----------------------------------------+-------+--------+---------+---------+
//! |        owner tid (0 = unlocked)        | WOKEN | PICKUP | HANDOFF | WAITERS |
//! +----------------------------------------+-------+--------+---------+---------+
//! ```
//!
//! * **owner** (bits 4..): kernel tid of the owner, `tid << OWNER_SHIFT`;
//!   0 when unlocked. With `PICKUP` set it names the waiter the lock was
//!   handed to, which has not taken it yet.
//! * [`WAITERS`]: the wait list is non-empty; unlock must wake the first
//!   waiter (slow path) unless `WOKEN` says it is awake. Invariant:
//!   whenever a thread holds `wait_lock` and the list is non-empty,
//!   `WAITERS` is set.
//! * [`HANDOFF`]: the first waiter has waited longer than [`handoff_ns`];
//!   the next unlock must hand the lock to the first waiter instead of
//!   releasing it, and nobody but the first waiter may take a free lock.
//! * [`PICKUP`]: a hand-off is done; the named waiter must pick the lock
//!   up. Nobody else can take it (the owner field is not 0).
//! * [`WOKEN`] (a userspace addition): the first waiter has been woken and
//!   has not gone back to sleep, so an unlock needs to wake nobody: it
//!   releases with a CAS on the fast path and skips `wait_lock`. Set and
//!   cleared only under `wait_lock`; implies `WAITERS`. The kernel's
//!   unlock takes `wait_lock` and calls `wake_up_q` every time the waiters
//!   bit is set, which is cheap when the first waiter already runs. Here,
//!   with 8–16 threads on 2 CPUs the list is never empty and every unlock
//!   took `wait_lock`: skipping it made the `mutex` bench 6–10% faster,
//!   and handling `(_, WAITERS|WOKEN)` on the fast paths another ~4%.
//!
//! # State transitions
//!
//! Written `(owner, flags)`; `me`, `X`, `W` thread identities, `W` the first
//! waiter; `F` any flags.
//!
//! ```text
//! fast lock            (0, -)                 -> (me, -)          CAS, acquire; if it finds
//!                      (0, WW)                -> (me, WW)         a second CAS, acquire
//! fast unlock          (me, F)                -> (0, F)           fetch_sub(me), release; done
//!                                                                 if F is none or WW, else the
//!                                                                 slow path below
//! trylock (slow)       (0, F)                 -> (me, F&WW)       CAS, acquire; not if HANDOFF
//!                                                                 unless we are the first waiter
//! pick up              (me, PICKUP|F)         -> (me, F&WW)       CAS, acquire
//! first waiter queues  (X, F)                 -> (X, F|WAITERS)   fetch_or, under wait_lock
//! starving waiter      (X, F)                 -> (X, F|HANDOFF)   fetch_or, under wait_lock
//! unlock, W awake      (me, WAITERS|WOKEN)    -> (0, WAITERS|WOKEN)   the fast unlock above:
//!                                                                 nobody to wake
//! unlock, W asleep     (me, WAITERS)          -> (0, WAITERS)     the fast unlock; then under
//!                      (X, WAITERS)           -> (X, WAITERS|WOKEN)   wait_lock mark W woken
//!                                                                 (fetch_or) and wake it
//! W re-arms to sleep   (X, F)                 -> (X, F & !WOKEN)  fetch_and, under wait_lock,
//!                                                                 before its last trylock
//! hand-off unlock      (me, HANDOFF|WAITERS|F) -> (0, HANDOFF|WAITERS|F)  the fast unlock:
//!                                                                 free but reserved for W (only
//!                                                                 the first waiter's trylock
//!                                                                 takes a free HANDOFF lock);
//!                      (0, HANDOFF|WAITERS|F) -> (W, PICKUP|WAITERS|WOKEN)
//!                                                                 CAS under wait_lock (unless W
//!                                                                 took it meanwhile); wake W
//! unlock_fair          (me, WAITERS)          -> (W, PICKUP|WAITERS|WOKEN)   swap under
//!                                                                 wait_lock, release; wake W
//! first waiter leaves  (X, F)                 -> (X, F & !WOKEN)  fetch_and, under wait_lock
//! last waiter leaves   (X, F)                 -> (X, F & PICKUP)  fetch_and, under wait_lock
//!                                                                 (clears WAITERS, HANDOFF, WOKEN)
//! ```
//!
//! `WW` is `WAITERS|WOKEN`: a locker keeps both, since taking the lock
//! changes neither the list nor whether its first waiter is awake.
//!
//! # Slow path
//!
//! 1. `trylock`.
//! 2. **Optimistic spin** (if [`owner_spin`] is on for this lock and its
//!    adaptive test, [`crate::spinadapt`], has not found sleeping faster;
//!    more than one CPU is online, the thread has a slot, and fewer than CPUs − 1
//!    threads already spin on this lock — a userspace addition: in the
//!    kernel every spinner holds a CPU, so spinners never outnumber the
//!    CPUs left to the owner; with more threads than CPUs here, one more
//!    spinner could only spin on an owner waiting for a CPU): join the [`Osq`]
//!    (giving up when the budget is spent or we should yield); as OSQ head,
//!    spin while the owner is unchanged and not known to be sleeping,
//!    within the budget; when the owner changes, the new owner gets a fresh
//!    budget (total at most `MAX_OWNER_BUDGETS` budgets); when the lock is
//!    free, `trylock`. Leave the OSQ either way.
//! 3. **Sleep**: under `wait_lock` (a [`WaitLockRaw`], by default
//!    [`WaitLock`]), `trylock` once more, append a waiter record (on our
//!    stack) to the FIFO list, set `WAITERS` if first; then loop: re-arm our futex word, `trylock`, release
//!    `wait_lock`, sleep; when woken (only the first waiter is ever woken,
//!    and it stays first), `trylock` and spin on the owner without the OSQ.
//!    A waker marks the waiter woken under `wait_lock`, and a waiter
//!    unlinks itself only under `wait_lock`, so a waker never touches a
//!    dead stack frame. The `FUTEX_WAKE` itself is sent *after* releasing
//!    `wait_lock` (the kernel's `wake_q`; by address, harmless if the
//!    waiter has left, see [`sys::futex_wake_addr`]): woken at once, often
//!    preempting the waker on its CPU, the waiter would otherwise find
//!    `wait_lock` held and yield straight back. Measured on 2 CPUs pinned
//!    to one (`taskset -c 0 klock bench mutex --threads 2`): 78 kop/s with
//!    the wake under `wait_lock`, 1,940 kop/s after it (std: 1,671).
//! 4. A timed-out waiter (it times out only after a failed trylock under
//!    `wait_lock`, so the lock is held and its holder will wake the next
//!    first waiter) unlinks itself, clears `WAITERS`/`HANDOFF` if it was
//!    the last, and if it was first wakes the new first waiter anyway.
//!
//! # Memory ordering
//!
//! Acquiring transitions are `Acquire` CASes, releasing ones `Release`
//! RMWs; every write to the owner word is an RMW, so each release heads a
//! release sequence that later flag RMWs do not break. Flag updates are
//! `Relaxed`: they are ordered with the unlocker's CAS by the word's
//! modification order (the lost-wake-up argument needs nothing more), and
//! the list they describe is protected by `wait_lock`.

use crate::events::{self, Event};
use crate::oncpu::{self, SpinStats};
use crate::osq::Osq;
use crate::spin::cpu_relax;
#[cfg(not(loom))]
use crate::spinadapt::Decision;
use crate::spinadapt::{self, SpinAdapt};
use crate::switch::Switch;
use crate::sync::Ordering::{Acquire, Relaxed, Release};
use crate::sync::{AtomicU32, AtomicUsize, UnsafeCell};
use crate::sys::{self, monotonic_ns};
use crate::thread;
use crate::waitlist::{
    futex_addr, wake_later, wake_pending, AbortOnUnwind, Linked, Links, WaitList,
};
pub use crate::waitlock::{
    WaitLock, WaitLockRaw, YieldLock, YIELD_LOCK_SLEEP_NS, YIELD_LOCK_YIELDS,
};
use core::marker::PhantomData;
use core::sync::atomic::AtomicU64 as StdAtomicU64;
use std::time::Duration;

/// Owner word: the wait list is non-empty (unlock must wake).
pub const WAITERS: usize = 1 << 0;
/// Owner word: the first waiter is starving; unlock hands the lock to it.
pub const HANDOFF: usize = 1 << 1;
/// Owner word: handed off; the named waiter has yet to pick the lock up.
pub const PICKUP: usize = 1 << 2;
/// Owner word: the first waiter is awake (woken, not yet asleep again);
/// an unlock need not wake anyone. Implies [`WAITERS`].
pub const WOKEN: usize = 1 << 3;
/// All flag bits.
pub const FLAGS: usize = WAITERS | HANDOFF | PICKUP | WOKEN;
/// `WAITERS|WOKEN`: the flags a locker keeps when it takes the lock, and
/// with 0 the two words the fast paths handle (no waiters, or an awake
/// first waiter and nothing else).
const WW: usize = WAITERS | WOKEN;
/// The owner's tid sits above the flags.
pub const OWNER_SHIFT: u32 = 4;
/// Mask of the owner field.
pub const OWNER_MASK: usize = !FLAGS;

/// Per-lock spin mode: follow the global switch ([`owner_spin`]).
pub const OWNER_SPIN_GLOBAL: u8 = 0;
/// Per-lock spin mode: spin on a running owner (kernel `OWNER_SPIN`),
/// unless this lock's adaptive test ([`crate::spinadapt`]) finds that
/// sleeping is faster.
pub const OWNER_SPIN: u8 = 1;
/// Per-lock spin mode: never spin, go to sleep (kernel `NO_OWNER_SPIN`).
pub const NO_OWNER_SPIN: u8 = 2;
/// Per-lock spin mode: always spin on a running owner, never test whether
/// it pays (the kernel's `OWNER_SPIN` exactly, DESIGN §4.3).
pub const OWNER_SPIN_FIXED: u8 = 3;

pub use crate::oncpu::MAX_OWNER_BUDGETS;

/// Default for [`handoff_ns`]: 4 ms, the kernel's order of magnitude.
pub const DEFAULT_HANDOFF_NS: u64 = 4_000_000;

/// Polls of the owner word in [`RawMutexWith::quick_spin`] (~1 µs).
const QUICK_SPINS: u32 = 32;

/// Most threads that may spin on one mutex at once: CPUs - 1. The kernel
/// gets this for free (each spinner occupies a CPU and the owner must be
/// on another for spinning to make sense); in userspace, with more
/// runnable threads than CPUs, a further spinner could only be spinning
/// while the owner waits for a CPU. Unbounded under loom, so that models
/// can race several spinners.
#[inline]
fn spin_cap() -> u32 {
    if cfg!(loom) {
        u32::MAX
    } else {
        (sys::online_cpus().saturating_sub(1)).clamp(1, u32::MAX as usize) as u32
    }
}

// Global switches. Plain std atomics: configuration, not synchronisation.
static GLOBAL_SPIN: Switch = Switch::new("KLOCK_OWNER_SPIN");
static HANDOFF_AFTER: StdAtomicU64 = StdAtomicU64::new(DEFAULT_HANDOFF_NS);

/// The global `OWNER_SPIN` / `NO_OWNER_SPIN` switch, for locks of mode
/// [`OWNER_SPIN_GLOBAL`] (the default [`crate::Mutex`]). On unless the
/// environment says `KLOCK_OWNER_SPIN=0` (read once) or
/// [`set_owner_spin`]`(false)` was called.
#[inline]
pub fn owner_spin() -> bool {
    GLOBAL_SPIN.get()
}

/// Turn owner spinning on or off for all locks of mode
/// [`OWNER_SPIN_GLOBAL`] (the kernel's `echo NO_OWNER_SPIN >
/// /debug/sched_features`). Takes effect at the next slow-path lock.
pub fn set_owner_spin(on: bool) {
    GLOBAL_SPIN.set(on);
}

/// How long (ns) the first waiter waits before it demands a hand-off.
pub fn handoff_ns() -> u64 {
    HANDOFF_AFTER.load(core::sync::atomic::Ordering::Relaxed)
}

/// Set the hand-off bound (ns) for all mutexes. 0: the first waiter
/// demands a hand-off at once (strict FIFO among sleepers).
pub fn set_handoff_ns(ns: u64) {
    HANDOFF_AFTER.store(ns, core::sync::atomic::Ordering::Relaxed);
}

/// The identity the calling thread writes into the owner word.
#[inline(always)]
fn my_id() -> usize {
    (thread::current_tid() as usize) << OWNER_SHIFT
}

#[inline(always)]
fn tid_of(owner: usize) -> u32 {
    (owner >> OWNER_SHIFT) as u32
}

/// Guard state of a held [`RawMutexWith`]: the owner identity the lock
/// was taken with, so unlock needs no thread-local lookup. Not `Send`: the
/// mutex is owned by a thread and must be unlocked by it.
#[derive(Debug)]
pub struct OwnerGuard {
    id: usize,
    _not_send: PhantomData<*mut ()>,
}

// SAFETY: the guard carries no shared state; `Sync` only lets a `&Guard`
// (hence `&MutexGuard<T>` for `T: Sync`) be shared, as `GuardNoSend` does.
unsafe impl Sync for OwnerGuard {}

impl OwnerGuard {
    #[inline(always)]
    fn new(id: usize) -> Self {
        Self {
            id,
            _not_send: PhantomData,
        }
    }

    /// The owner's tid.
    pub fn owner_tid(&self) -> u32 {
        tid_of(self.id)
    }
}

// Waiter states (its futex word).
/// Running: about to re-check, or spinning as first waiter.
const W_WAITING: u32 = 0;
/// Asleep (or about to sleep) in `FUTEX_WAIT`.
const W_PARKED: u32 = 1;
/// Woken by an unlocker; the waiter must re-check.
const W_WOKEN: u32 = 2;

/// A sleeping locker, on its own stack, linked into the wait list. The
/// links are protected by `wait_lock`.
struct Waiter {
    /// Futex word: `W_WAITING`, `W_PARKED` or `W_WOKEN`.
    state: AtomicU32,
    links: Links<Waiter>,
    /// The waiter's owner identity (for hand-off).
    id: usize,
}

impl Linked for Waiter {
    fn links(&self) -> &Links<Self> {
        &self.links
    }
}

/// Why optimistic spinning stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SpinFail {
    OwnerSleeping,
    Budget,
    Yield,
}

/// The kernel's optimistic-spinning mutex, with a per-lock spin mode
/// `SPIN` ([`OWNER_SPIN_GLOBAL`], [`OWNER_SPIN`] or [`NO_OWNER_SPIN`]) and
/// the lock `W` guarding its wait list (default [`WaitLock`]).
/// Use it through [`crate::Mutex`] or [`crate::MutexWith`].
#[repr(C)] // `owner` and `adapt`'s counter first, on one cache line.
pub struct RawMutexWith<const SPIN: u8, W: WaitLockRaw = WaitLock> {
    /// Owner tid and flags (see the [module docs](self)).
    owner: AtomicUsize,
    /// Whether spinning pays on this lock (counts acquisitions).
    adapt: SpinAdapt,
    /// Queue of optimistic spinners.
    osq: Osq,
    /// Protects `list` (and the setting/clearing of WAITERS and HANDOFF).
    wait_lock: W,
    /// This lock's adaptive spin budget.
    spin: SpinStats,
    /// Threads spinning on this lock now (OSQ members and spinning first
    /// waiters); at most [`spin_cap`].
    spinners: AtomicU32,
    /// FIFO of sleeping waiters.
    list: UnsafeCell<WaitList<Waiter>>,
    /// Loom only: which rare paths an execution took.
    #[cfg(loom)]
    probe: Probe,
    /// Loom only: this lock's hand-off bound (`u64::MAX`: the global one),
    /// so models in one test binary can differ without racing on the
    /// global.
    #[cfg(loom)]
    loom_handoff_ns: core::sync::atomic::AtomicU64,
    /// Loom only: a deliberately broken unlock (see `set_loom_broken_unlock`).
    #[cfg(loom)]
    loom_broken_unlock: core::sync::atomic::AtomicBool,
    /// Loom only: a deliberately broken hand-off release (see
    /// `set_loom_broken_handoff_release`).
    #[cfg(loom)]
    loom_broken_handoff: core::sync::atomic::AtomicBool,
}

/// The mutex following the global spin switch: [`crate::Mutex`]'s raw lock.
pub type RawMutex = RawMutexWith<OWNER_SPIN_GLOBAL>;

// SAFETY: the raw pointers in the wait list point to waiters that stay
// alive while linked; the list is only accessed under `wait_lock`.
unsafe impl<const SPIN: u8, W: WaitLockRaw> Send for RawMutexWith<SPIN, W> {}
// SAFETY: as above; all other state is atomic.
unsafe impl<const SPIN: u8, W: WaitLockRaw> Sync for RawMutexWith<SPIN, W> {}

impl<const SPIN: u8, W: WaitLockRaw> RawMutexWith<SPIN, W> {
    /// An unlocked mutex.
    #[cfg(not(loom))]
    pub const fn new() -> Self {
        Self {
            owner: AtomicUsize::new(0),
            adapt: SpinAdapt::new(),
            osq: Osq::new(),
            wait_lock: W::INIT,
            spin: SpinStats::new(),
            spinners: AtomicU32::new(0),
            list: UnsafeCell::new(WaitList::new()),
        }
    }

    /// An unlocked mutex (loom atomics cannot be built in a `const fn`).
    #[cfg(loom)]
    pub fn new() -> Self {
        Self {
            owner: AtomicUsize::new(0),
            adapt: SpinAdapt::new(),
            osq: Osq::new(),
            wait_lock: W::new_unlocked(),
            spin: SpinStats::new(),
            spinners: AtomicU32::new(0),
            list: UnsafeCell::new(WaitList::new()),
            probe: Probe::default(),
            loom_handoff_ns: core::sync::atomic::AtomicU64::new(u64::MAX),
            loom_broken_unlock: core::sync::atomic::AtomicBool::new(false),
            loom_broken_handoff: core::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Whether this lock spins on a running owner now (its mode, or the
    /// global switch; and its adaptive test unless that is off).
    #[inline]
    pub fn owner_spin_enabled(&self) -> bool {
        match SPIN {
            OWNER_SPIN_FIXED => true,
            OWNER_SPIN => self.spin_pays(),
            NO_OWNER_SPIN => false,
            _ => owner_spin() && self.spin_pays(),
        }
    }

    /// Whether a contender may spin now: this lock's mode and test allow
    /// it and another CPU could run the owner. Asked again at every
    /// attempt, since the test's verdict changes while threads wait.
    #[inline]
    fn may_spin(&self) -> bool {
        self.owner_spin_enabled() && oncpu::spinning_useful()
    }

    /// The adaptive test's verdict ([`crate::spinadapt`]), or `true` when
    /// the test is switched off.
    #[inline]
    fn spin_pays(&self) -> bool {
        self.adapt.spin() || !spinadapt::enabled()
    }

    /// Whether this lock's mode runs the adaptive test.
    const ADAPTS: bool = SPIN == OWNER_SPIN || SPIN == OWNER_SPIN_GLOBAL;

    /// This lock's adaptive test of whether spinning pays.
    pub fn spin_adapt(&self) -> &SpinAdapt {
        &self.adapt
    }

    /// Count an acquisition for the adaptive test; the caller holds the
    /// lock. Not under loom (it reads the clock; it only steers spinning).
    #[inline(always)]
    fn count_acquisition(&self) {
        #[cfg(not(loom))]
        if Self::ADAPTS {
            if let Some(d) = self.adapt.on_unlock() {
                events::inc(match d {
                    Decision::Spin => Event::MutexAdaptSpin,
                    Decision::NoSpin => Event::MutexAdaptNoSpin,
                });
            }
        }
    }

    /// Acquire the lock.
    #[inline]
    pub fn raw_lock(&self) -> OwnerGuard {
        let me = my_id();
        // (0, -) -> (me, -). Acquire pairs with the Release of the previous
        // owner's unlock.
        match self.owner.compare_exchange(0, me, Acquire, Relaxed) {
            Ok(_) => OwnerGuard::new(me),
            // Free, with an awake first waiter: (0, WW) -> (me, WW), the
            // common case of many threads on few CPUs. Acquire: as above.
            Err(WW)
                if self
                    .owner
                    .compare_exchange(WW, me | WW, Acquire, Relaxed)
                    .is_ok() =>
            {
                OwnerGuard::new(me)
            }
            Err(_) => {
                self.lock_slow(me, None);
                OwnerGuard::new(me)
            }
        }
    }

    /// Take the lock if it is free (and not reserved for a starving
    /// waiter); never spins or sleeps.
    #[inline]
    pub fn raw_try_lock(&self) -> Option<OwnerGuard> {
        let me = my_id();
        // Acquire: as in raw_lock.
        let got = self.owner.compare_exchange(0, me, Acquire, Relaxed).is_ok()
            || self.try_lock_slow(me, false);
        got.then(|| OwnerGuard::new(me))
    }

    /// Acquire the lock unless `deadline_ns` ([`sys::monotonic_ns`] time)
    /// passes first. A timed-out attempt leaves the OSQ and the wait list
    /// and wakes the next waiter if it may have taken a wake-up.
    pub fn raw_try_lock_until_ns(&self, deadline_ns: u64) -> Option<OwnerGuard> {
        let me = my_id();
        // Acquire: as in raw_lock.
        let got = self.owner.compare_exchange(0, me, Acquire, Relaxed).is_ok()
            || self.lock_slow(me, Some(deadline_ns));
        got.then(|| OwnerGuard::new(me))
    }

    /// Release the lock.
    ///
    /// # Safety
    /// `guard` must come from locking this mutex, on this thread, and the
    /// lock must still be held with it. Debug builds panic when the lock is
    /// not held by the guard's owner.
    #[inline(always)]
    pub unsafe fn raw_unlock(&self, guard: OwnerGuard) {
        #[cfg(loom)]
        if self
            .loom_broken_unlock
            .load(core::sync::atomic::Ordering::Relaxed)
        {
            // BROKEN (loom only): release without looking at WAITERS.
            self.owner.store(0, Release);
            return;
        }
        self.count_acquisition();
        let me = guard.id;
        if cfg!(debug_assertions) {
            self.assert_owner(me, self.owner.load(Relaxed));
        }
        // (me, F) -> (0, F): one unconditional RMW (`lock xadd`), ~1.3 ns
        // cheaper uncontended than the compare-exchange it replaces, since
        // the owner field is known to be `me`. Release pairs with the
        // Acquire CAS of whoever takes the lock next. The flags stay:
        // with none, or with `WAITERS|WOKEN` (the first waiter is awake),
        // nobody needs waking and this is all.
        #[cfg(loom)]
        let me = if self
            .loom_broken_handoff
            .load(core::sync::atomic::Ordering::Relaxed)
        {
            // BROKEN (loom only): the release also drops HANDOFF, so the
            // free lock is no longer reserved for the first waiter.
            me | (self.owner.load(Relaxed) & HANDOFF)
        } else {
            me
        };
        let flags = self.owner.fetch_sub(me, Release) - me;
        if flags != 0 && flags != WW {
            self.unlock_released_slow(flags);
        }
        #[cfg(loom)]
        if flags == WW {
            Probe::hit(&self.probe.woken_skips);
        }
    }

    /// Release the lock, handing it directly to the first waiter if there
    /// is one (no stealing by spinners or new lockers).
    ///
    /// # Safety
    /// As [`raw_unlock`](Self::raw_unlock).
    #[inline]
    pub unsafe fn raw_unlock_fair(&self, guard: OwnerGuard) {
        self.count_acquisition();
        // (me, -) -> (0, -). Release: as in raw_unlock.
        if let Err(w) = self.owner.compare_exchange(guard.id, 0, Release, Relaxed) {
            self.unlock_fair_slow(guard.id, w);
        }
    }

    /// Held by some thread, or handed to a waiter that has not picked it
    /// up yet. A snapshot.
    #[inline]
    pub fn is_held(&self) -> bool {
        self.owner.load(Relaxed) & OWNER_MASK != 0
    }

    /// The tid of the owner (or of the waiter the lock was handed to), if
    /// any. A snapshot.
    pub fn owner_tid(&self) -> Option<u32> {
        let o = self.owner.load(Relaxed) & OWNER_MASK;
        (o != 0).then(|| tid_of(o))
    }

    /// The raw owner word, for tests and debugging.
    #[doc(hidden)]
    #[inline]
    pub fn word(&self) -> usize {
        self.owner.load(Relaxed)
    }

    /// This lock's adaptive spin statistics.
    pub fn spin_stats(&self) -> &SpinStats {
        &self.spin
    }

    /// The slow-path trylock: `(0, F) -> (me, F & WW)` unless a hand-off
    /// reserves a free lock for the first waiter (`first` says we are it),
    /// or pick up a lock handed to us, `(me, PICKUP|F) -> (me, F & WW)`.
    /// Clears `HANDOFF` and `PICKUP` on success.
    #[inline]
    fn try_lock_slow(&self, me: usize, first: bool) -> bool {
        let mut w = self.owner.load(Relaxed);
        loop {
            let owner = w & OWNER_MASK;
            if owner != 0 {
                if owner != me || w & PICKUP == 0 {
                    return false;
                }
            } else if w & HANDOFF != 0 && !first {
                return false;
            }
            // Acquire pairs with the Release of the previous owner's unlock
            // (fast or slow CAS) or hand-off swap. The word only ever
            // changes by RMWs, so flag RMWs in between do not break the
            // release sequence.
            match self
                .owner
                .compare_exchange_weak(w, me | (w & WW), Acquire, Relaxed)
            {
                Ok(_) => {
                    #[cfg(loom)]
                    if owner == me {
                        Probe::hit(&self.probe.pickups);
                    }
                    return true;
                }
                Err(now) => w = now,
            }
        }
    }

    /// Contended lock: trylock, optimistic spin, sleep. `false` only when
    /// `deadline` passed.
    #[cold]
    #[inline(never)]
    fn lock_slow(&self, me: usize, deadline: Option<u64>) -> bool {
        if cfg!(debug_assertions) && deadline.is_none() {
            let w = self.owner.load(Relaxed);
            assert!(
                w & OWNER_MASK != me || w & PICKUP != 0,
                "klock::Mutex: thread {} locks a mutex it already holds (deadlock)",
                tid_of(me)
            );
        }
        if self.try_lock_slow(me, false) {
            return true;
        }
        // With the test switched off nothing is counted (a lock that was
        // counting stops at the end of its current run).
        if Self::ADAPTS && spinadapt::enabled() {
            self.adapt.contended();
        }
        if self.may_spin() {
            if self.quick_spin(me) {
                return true;
            }
            if self.optimistic_spin(me, false, deadline) {
                return true;
            }
        }
        self.lock_sleep(me, deadline)
    }

    /// A few read-only polls of the owner word before the full optimistic
    /// spin: most contended critical sections end within them, and then
    /// the lock is taken with one CAS — no spinner seat, OSQ, clock or
    /// oracle, each of which writes the lock's cache line or costs tens of
    /// ns. Only for new lockers; not while the first waiter sleeps
    /// (`WAITERS` without `WOKEN`: the queue decides then) or a hand-off
    /// is due, and only while the owner word stays the same (a hand-over
    /// to another thread means real contention). With `WAITERS|WOKEN` the
    /// first waiter is awake and polling too; a new locker competing with
    /// it is what the OSQ spin would do anyway (the kernel's spinners
    /// ignore the waiters bit), only cheaper, and `HANDOFF` still bounds
    /// the first waiter's wait.
    #[inline]
    fn quick_spin(&self, me: usize) -> bool {
        let first = self.owner.load(Relaxed);
        if first & FLAGS != 0 && first & FLAGS != WW {
            return false;
        }
        for _ in 0..QUICK_SPINS {
            cpu_relax();
            let w = self.owner.load(Relaxed);
            if w & OWNER_MASK == 0 {
                // (0, F) -> (me, F), F being none or WAITERS|WOKEN (else
                // the CAS fails). Acquire: as in raw_lock.
                let flags = first & FLAGS;
                if self
                    .owner
                    .compare_exchange(flags, me | flags, Acquire, Relaxed)
                    .is_ok()
                {
                    events::inc(Event::MutexSpinQuick);
                    return true;
                }
                return false;
            }
            if w != first {
                return false;
            }
        }
        false
    }

    /// Optimistic spinning. As a new locker (`waiter == false`) through the
    /// OSQ; as the first waiter (`waiter == true`) directly, allowed to take
    /// a lock reserved by `HANDOFF`. Returns whether we got the lock.
    #[inline(never)]
    fn optimistic_spin(&self, me: usize, waiter: bool, deadline: Option<u64>) -> bool {
        let oracle = oncpu::oracle();
        // Do not even queue if the owner is known to be off CPU.
        let owner = self.owner.load(Relaxed) & OWNER_MASK;
        if owner != 0 && owner != me && oracle.owner_running(tid_of(owner)) == Some(false) {
            events::inc(Event::MutexSpinFailOwnerSleeping);
            return false;
        }
        let slot = if waiter {
            None
        } else {
            match thread::current() {
                Some(s) => Some(s),
                None => return false,
            }
        };
        // Take a spinner seat. Read first: a full lock costs no RMW.
        let cap = spin_cap();
        let crowded = self.spinners.load(Relaxed) >= cap || {
            let full = self.spinners.fetch_add(1, Relaxed) >= cap;
            if full {
                // Lost the race for the last seat: give ours back.
                self.spinners.fetch_sub(1, Relaxed);
            }
            full
        };
        if crowded {
            events::inc(Event::MutexSpinFailCrowded);
            return false;
        }
        let result = self.spin_seated(me, waiter, slot, deadline);
        // Leave the seat. Relaxed: the count only limits spinning; nothing
        // is published through it.
        self.spinners.fetch_sub(1, Relaxed);
        result
    }

    /// The spin proper, holding a spinner seat.
    #[inline(never)]
    fn spin_seated(
        &self,
        me: usize,
        waiter: bool,
        slot: Option<&'static thread::ThreadSlot>,
        deadline: Option<u64>,
    ) -> bool {
        let oracle = oncpu::oracle();

        let budget = self.spin.budget_ns();
        oracle.spin_begin();
        let start = monotonic_ns();
        let total_end = start.saturating_add(budget.saturating_mul(MAX_OWNER_BUDGETS));
        let mut owner_end = start.saturating_add(budget);
        let past_deadline = |now: u64| deadline.is_some_and(|d| now >= d);

        // Join the OSQ; give up while queued if the budget runs out or we
        // should yield.
        if let Some(slot) = slot {
            let mut fail = SpinFail::Budget;
            let mut n = 0u32;
            let head = self.osq.lock_with(slot, || {
                n = n.wrapping_add(1);
                if !crate::spin::clock_due(n) {
                    return false;
                }
                if oracle.should_yield() {
                    fail = SpinFail::Yield;
                    return true;
                }
                let now = monotonic_ns();
                now >= owner_end || past_deadline(now)
            });
            if !head {
                events::inc(Event::MutexOsqUnqueue);
                #[cfg(loom)]
                Probe::hit(&self.probe.osq_unqueues);
                count_spin_fail(fail);
                return false;
            }
        }

        // Spin on the owner.
        let mut last_owner = usize::MAX;
        let mut running = None;
        let mut i = 0u32;
        let result = loop {
            let w = self.owner.load(Relaxed);
            let owner = w & OWNER_MASK;
            if owner == 0 || owner == me {
                // Free (or handed to us): try to take it. May fail when a
                // hand-off reserves it or another thread was quicker.
                if self.try_lock_slow(me, waiter) {
                    break Ok(());
                }
            } else if owner != last_owner {
                if last_owner != usize::MAX {
                    // The lock moved on: give the new owner a fresh budget.
                    owner_end = monotonic_ns().saturating_add(budget).min(total_end);
                }
                last_owner = owner;
                running = oracle.owner_running(tid_of(owner));
                if running == Some(false) {
                    break Err(SpinFail::OwnerSleeping);
                }
            }
            i = i.wrapping_add(1);
            if crate::spin::clock_due(i) {
                if oracle.should_yield() {
                    break Err(SpinFail::Yield);
                }
                if owner != 0 && owner != me {
                    running = oracle.owner_running(tid_of(owner));
                    if running == Some(false) {
                        break Err(SpinFail::OwnerSleeping);
                    }
                }
                let now = monotonic_ns();
                if past_deadline(now) {
                    break Err(SpinFail::Budget);
                }
                // An owner known to run may be spun on without a budget
                // (the kernel's rule); otherwise the budget decides.
                if running != Some(true) && now >= owner_end {
                    break Err(SpinFail::Budget);
                }
            }
            cpu_relax();
        };
        if let Some(slot) = slot {
            self.osq.unlock_with(slot);
        }
        match result {
            Ok(()) => {
                self.spin
                    .record_success(monotonic_ns().saturating_sub(start));
                events::inc(Event::MutexSpinSuccess);
                #[cfg(loom)]
                Probe::hit(&self.probe.spin_successes);
                true
            }
            Err(f) => {
                count_spin_fail(f);
                false
            }
        }
    }

    /// Sleep in the wait list until we own the lock (`true`) or `deadline`
    /// passes (`false`).
    #[inline(never)]
    fn lock_sleep(&self, me: usize, deadline: Option<u64>) -> bool {
        let waiter = Waiter {
            state: AtomicU32::new(W_WAITING),
            links: Links::new(),
            id: me,
        };
        let wp: *const Waiter = &waiter;

        self.wait_lock.lock();
        // One more try now that we hold wait_lock: unlockers with WAITERS
        // clear wait for it, so the lock may have been freed meanwhile.
        if self.try_lock_slow(me, false) {
            // SAFETY: we hold wait_lock.
            unsafe { self.wait_lock.unlock() };
            return true;
        }
        // SAFETY (list accesses below): we hold wait_lock whenever we touch
        // the list, and `waiter` outlives its membership (it is unlinked
        // before this function returns; unwinding aborts).
        let bomb = AbortOnUnwind("Mutex");
        if unsafe { self.list_push(wp) } {
            // (X, F) -> (X, F|WAITERS). Relaxed: the unlocker's release CAS
            // and this RMW are ordered in the word's modification order: if
            // the CAS comes later it sees WAITERS and wakes the first
            // waiter (taking wait_lock, which orders the list); if earlier,
            // the trylock below reads the word at or after this RMW and
            // finds the lock free or owned by a thread that will see
            // WAITERS when it unlocks.
            self.owner.fetch_or(WAITERS, Relaxed);
        }
        let start = monotonic_ns();
        let handoff_after = self.handoff_bound();
        let mut first = false;
        let mut handoff_set = false;

        let acquired = loop {
            // Holding wait_lock here.
            if !first {
                first = unsafe { self.list_head() } == wp;
            }
            if cfg!(any(debug_assertions, loom)) {
                assert!(
                    self.owner.load(Relaxed) & WAITERS != 0,
                    "klock::Mutex: waiter queued but WAITERS clear"
                );
            }
            if first && !handoff_set && monotonic_ns().saturating_sub(start) >= handoff_after {
                // (X, F) -> (X, F|HANDOFF). Relaxed: the unlocker reads it
                // with its RMW and then serialises with us on wait_lock.
                self.owner.fetch_or(HANDOFF, Relaxed);
                handoff_set = true;
                #[cfg(loom)]
                Probe::hit(&self.probe.handoff_requests);
            }
            // Re-arm before the trylock: an unlock after the trylock will
            // find WAITERS without WOKEN and set W_WOKEN (under wait_lock,
            // so after this). (X, F) -> (X, F & !WOKEN). Relaxed: the
            // trylock below reads the word at or after this RMW, so an
            // unlock that still saw WOKEN is one we see as released.
            if first && self.owner.load(Relaxed) & WOKEN != 0 {
                self.owner.fetch_and(!WOKEN, Relaxed);
            }
            waiter.state.store(W_WAITING, Relaxed);
            if self.try_lock_slow(me, first) {
                break true;
            }
            if deadline.is_some_and(|d| monotonic_ns() >= d) {
                break false;
            }
            // SAFETY: we hold wait_lock.
            unsafe { self.wait_lock.unlock() };

            if park(&waiter, deadline) {
                #[cfg(loom)]
                Probe::hit(&self.probe.sleeps);
            }

            // Only the first waiter is ever woken, and it stays first
            // (waiters ahead of it can only leave).
            if !first && waiter.state.load(Relaxed) == W_WOKEN {
                first = true;
            }
            if first
                && (self.try_lock_slow(me, true)
                    || (self.may_spin() && self.optimistic_spin(me, true, deadline)))
            {
                self.wait_lock.lock();
                break true;
            }
            self.wait_lock.lock();
        };

        // Holding wait_lock: unlink ourselves.
        let mut woke = false;
        let was_first = unsafe { self.list_head() } == wp;
        if unsafe { self.list_remove(wp) } {
            // Last waiter gone: (X, F) -> (X, F & PICKUP), clearing WAITERS,
            // HANDOFF and WOKEN. Relaxed: all are only set under wait_lock.
            self.owner.fetch_and(!(WAITERS | HANDOFF | WOKEN), Relaxed);
        } else if was_first && acquired {
            // The new first waiter sleeps: (X, F) -> (X, F & !WOKEN), so
            // the next unlock wakes it. Relaxed: as above.
            self.owner.fetch_and(!WOKEN, Relaxed);
        } else if was_first {
            // Timed out as first waiter: pass the role on with a wake-up.
            // Not required by the protocol as it stands (we time out only
            // after clearing WOKEN and a failed trylock under wait_lock, so
            // the lock is held and its holder's unlock will wake the new
            // first waiter; loom passes without it), but cheap insurance on
            // a rare path against ever stranding a sleeper.
            #[cfg(loom)]
            Probe::hit(&self.probe.wake_next_on_leave);
            woke = self.mark_woken(unsafe { self.list_head() });
        }
        #[cfg(loom)]
        if !acquired {
            Probe::hit(&self.probe.timeouts);
        }
        // SAFETY: we hold wait_lock.
        unsafe { self.wait_lock.unlock() };
        if woke {
            wake_pending();
        }
        core::mem::forget(bomb);
        acquired
    }

    /// The hand-off bound for this lock.
    #[inline]
    fn handoff_bound(&self) -> u64 {
        #[cfg(loom)]
        return crate::sync::loom_tunable(&self.loom_handoff_ns, handoff_ns);
        #[cfg(not(loom))]
        handoff_ns()
    }

    /// Debug check: the lock is held by `me` (not merely handed to it).
    #[inline(never)]
    fn assert_owner(&self, me: usize, w: usize) {
        assert!(
            w & OWNER_MASK == me && w & PICKUP == 0 && (w & WOKEN == 0 || w & WAITERS != 0),
            "klock::Mutex: unlock by thread {} which does not own the lock (owner word {:#x}: owner tid {}{})",
            tid_of(me),
            w,
            tid_of(w & OWNER_MASK),
            if w & PICKUP != 0 { ", handed off" } else { "" }
        );
    }

    /// After the fast unlock released `(me, flags) -> (0, flags)` with
    /// flags other than none or `WAITERS|WOKEN`: wake the sleeping first
    /// waiter, or, if it demanded a hand-off, hand it the lock.
    #[cold]
    #[inline(never)]
    fn unlock_released_slow(&self, flags: usize) {
        // Here WAITERS without WOKEN (the first waiter sleeps), or HANDOFF.
        // WOKEN implies WAITERS and the owner held the lock, so PICKUP is
        // clear: WOKEN without HANDOFF was WW, handled by the caller.
        debug_assert!(flags & WAITERS != 0 && flags & PICKUP == 0);
        debug_assert!(flags & HANDOFF != 0 || flags & WOKEN == 0);
        self.wait_lock.lock();
        // SAFETY: we hold wait_lock.
        let head = unsafe { self.list_head() };
        let mut woke = false;
        if !head.is_null() {
            if flags & HANDOFF != 0 {
                self.hand_over_released(head);
            }
            woke = self.mark_woken(head);
        }
        // SAFETY: we hold wait_lock.
        unsafe { self.wait_lock.unlock() };
        if woke {
            wake_pending();
        }
    }

    /// The lock was released with `HANDOFF` set, `(0, HANDOFF|WAITERS|F)`:
    /// a free lock that only the first waiter `head` may take (every
    /// other trylock refuses it, and the fast paths' CASes expect other
    /// words). Complete the hand-off, `(0, HANDOFF|F) -> (W,
    /// PICKUP|WAITERS|WOKEN)`, unless `head` took it meanwhile. Caller
    /// holds wait_lock (so `head` stays first and linked).
    fn hand_over_released(&self, head: *const Waiter) {
        // SAFETY: linked waiters are alive (caller holds wait_lock).
        let id = unsafe { (*head).id };
        let mut w = self.owner.load(Relaxed);
        // Only `head` can have taken it (and then cleared HANDOFF), so the
        // loop ends once the owner field is set or HANDOFF is gone.
        while w & OWNER_MASK == 0 && w & HANDOFF != 0 {
            // Relaxed: the release that publishes the critical section is
            // the fast unlock's RMW; this RMW continues its release
            // sequence, so the waiter's Acquire pick-up CAS still pairs
            // with it.
            match self.owner.compare_exchange_weak(
                w,
                id | PICKUP | WAITERS | WOKEN,
                Relaxed,
                Relaxed,
            ) {
                Ok(_) => {
                    events::inc(Event::MutexHandoff);
                    #[cfg(loom)]
                    Probe::hit(&self.probe.handoffs);
                    return;
                }
                Err(now) => w = now,
            }
        }
    }

    /// Contended `unlock_fair`: flags are set (or the caller is not the
    /// owner). Hands the lock to the first waiter if there is one.
    #[cold]
    #[inline(never)]
    fn unlock_fair_slow(&self, me: usize, mut w: usize) {
        loop {
            if cfg!(debug_assertions) {
                self.assert_owner(me, w);
            }
            if w & WAITERS != 0 {
                return self.unlock_handoff(me);
            }
            // (me, F) -> (0, F & WW). Release: as in raw_unlock.
            match self
                .owner
                .compare_exchange_weak(w, w & WW, Release, Relaxed)
            {
                Ok(_) => return,
                Err(now) => w = now,
            }
        }
    }

    /// Hand the lock to the first waiter: `(me, F) -> (W, PICKUP|WAITERS)`,
    /// or release it if the list has emptied meanwhile.
    fn unlock_handoff(&self, me: usize) {
        self.wait_lock.lock();
        // SAFETY: we hold wait_lock.
        let head = unsafe { self.list_head() };
        let new = if head.is_null() {
            0
        } else {
            // SAFETY: linked waiters are alive. WOKEN: marked just below.
            unsafe { (*head).id | PICKUP | WAITERS | WOKEN }
        };
        // A swap is enough: while we own the lock and hold wait_lock nobody
        // else writes the word (flags change under wait_lock; lockers only
        // write a free word or one handed to them). Release pairs with the
        // Acquire pick-up CAS of the waiter (or the next owner's CAS when
        // the list emptied).
        let old = self.owner.swap(new, Release);
        debug_assert_eq!(old & OWNER_MASK, me);
        let _ = old;
        let mut woke = false;
        if !head.is_null() {
            events::inc(Event::MutexHandoff);
            #[cfg(loom)]
            Probe::hit(&self.probe.handoffs);
            woke = self.mark_woken(head);
        }
        // SAFETY: we hold wait_lock.
        unsafe { self.wait_lock.unlock() };
        if woke {
            wake_pending();
        }
    }

    /// Mark the first waiter `w` woken (under wait_lock, so it cannot
    /// unlink and vanish meanwhile), with `WOKEN` in the word; if it
    /// sleeps, queue its `FUTEX_WAKE` for [`wake_pending`] after wait_lock
    /// is released, and say so (`true`).
    #[must_use]
    fn mark_woken(&self, w: *const Waiter) -> bool {
        // SAFETY: called under wait_lock with a linked (alive) waiter.
        let w = unsafe { &*w };
        // (X, F) -> (X, F|WOKEN). Relaxed: later unlockers that see it
        // skip the wake-up, which is right from now on: the waiter re-checks
        // the lock (clearing WOKEN under wait_lock first) before sleeping.
        if self.owner.load(Relaxed) & WOKEN == 0 {
            self.owner.fetch_or(WOKEN, Relaxed);
        }
        // Release pairs with the waiter's Acquire load of its state in park.
        if w.state.swap(W_WOKEN, Release) == W_PARKED {
            // Counted only when the waiter sleeps (a FUTEX_WAKE is due); a
            // waiter that is still running just finds W_WOKEN.
            events::inc(Event::MutexWake);
            #[cfg(loom)]
            Probe::hit(&self.probe.wakes_of_sleepers);
            wake_later(futex_addr(&w.state));
            true
        } else {
            false
        }
    }

    /// First waiter, or null. Caller holds wait_lock.
    #[inline]
    unsafe fn list_head(&self) -> *const Waiter {
        self.list.with(|l| unsafe { (*l).head() })
    }

    /// Append `w`; returns whether the list was empty. Caller holds
    /// wait_lock; `w` stays alive while linked.
    unsafe fn list_push(&self, w: *const Waiter) -> bool {
        // SAFETY: caller's contract.
        self.list.with_mut(|l| unsafe { (*l).push(w) })
    }

    /// Unlink `w`; returns whether the list is now empty. Caller holds
    /// wait_lock; `w` is linked.
    unsafe fn list_remove(&self, w: *const Waiter) -> bool {
        // SAFETY: caller's contract.
        self.list.with_mut(|l| unsafe { (*l).remove(w) })
    }
}

/// Sleep on our futex word until woken or `deadline` passes. Returns
/// whether we slept at all (false: already woken).
fn park(w: &Waiter, deadline: Option<u64>) -> bool {
    // W_WAITING -> W_PARKED; fails if an unlocker already woke us.
    // Relaxed: what we need from the waker is re-read under wait_lock.
    if w.state
        .compare_exchange(W_WAITING, W_PARKED, Relaxed, Relaxed)
        .is_err()
    {
        return false;
    }
    events::inc(Event::MutexSleep);
    loop {
        // Acquire pairs with the waker's Release swap to W_WOKEN.
        if w.state.load(Acquire) != W_PARKED {
            return true;
        }
        let timeout = match deadline {
            None => None,
            Some(d) => {
                let now = monotonic_ns();
                if now >= d {
                    return true;
                }
                Some(Duration::from_nanos(d - now))
            }
        };
        // Spurious returns are fine: we re-check the state.
        sys::futex_wait(&w.state, W_PARKED, timeout);
    }
}

fn count_spin_fail(f: SpinFail) {
    events::inc(match f {
        SpinFail::OwnerSleeping => Event::MutexSpinFailOwnerSleeping,
        SpinFail::Budget => Event::MutexSpinFailBudget,
        SpinFail::Yield => Event::MutexSpinFailYield,
    });
}

impl<const SPIN: u8, W: WaitLockRaw> Default for RawMutexWith<SPIN, W> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const SPIN: u8, W: WaitLockRaw> core::fmt::Debug for RawMutexWith<SPIN, W> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let w = self.word();
        f.debug_struct("RawMutex")
            .field("spin_mode", &SPIN)
            .field("owner_tid", &tid_of(w & OWNER_MASK))
            .field("waiters", &(w & WAITERS != 0))
            .field("handoff", &(w & HANDOFF != 0))
            .field("pickup", &(w & PICKUP != 0))
            .field("woken", &(w & WOKEN != 0))
            .field("spin_avg_ns", &self.spin.average_ns())
            .finish()
    }
}

// SAFETY: mutual exclusion as argued in the module docs (and checked by the
// loom model); acquire on every successful lock path, release on every
// unlock. The guard is !Send: the owner word names the locking thread.
#[cfg(not(loom))]
unsafe impl<const SPIN: u8, W: WaitLockRaw> lock_api::RawMutex for RawMutexWith<SPIN, W> {
    #[allow(clippy::declare_interior_mutable_const)]
    const INIT: Self = Self::new();
    type Guard = OwnerGuard;

    #[inline]
    fn lock(&self) -> OwnerGuard {
        self.raw_lock()
    }

    #[inline]
    fn try_lock(&self) -> Option<OwnerGuard> {
        self.raw_try_lock()
    }

    #[inline(always)]
    unsafe fn unlock(&self, guard: OwnerGuard) {
        // SAFETY: forwarded contract.
        unsafe { self.raw_unlock(guard) }
    }

    #[inline]
    fn is_locked(&self) -> bool {
        self.is_held()
    }
}

// SAFETY: unlock_fair hands the lock to the first waiter under the same
// protocol as the anti-starvation hand-off.
#[cfg(not(loom))]
unsafe impl<const SPIN: u8, W: WaitLockRaw> lock_api::RawMutexFair for RawMutexWith<SPIN, W> {
    #[inline]
    unsafe fn unlock_fair(&self, guard: OwnerGuard) {
        // SAFETY: forwarded contract.
        unsafe { self.raw_unlock_fair(guard) }
    }
}

// SAFETY: a timed-out attempt owns nothing and has left every queue.
#[cfg(not(loom))]
unsafe impl<const SPIN: u8, W: WaitLockRaw> lock_api::RawMutexTimed for RawMutexWith<SPIN, W> {
    type Duration = Duration;
    type Instant = std::time::Instant;

    fn try_lock_for(&self, timeout: Duration) -> Option<OwnerGuard> {
        self.raw_try_lock_until_ns(sys::deadline_after(timeout))
    }

    fn try_lock_until(&self, timeout: std::time::Instant) -> Option<OwnerGuard> {
        let left = timeout.saturating_duration_since(std::time::Instant::now());
        self.raw_try_lock_until_ns(sys::deadline_after(left))
    }
}

/// Loom-only record of the rare paths one model execution took. Plain std
/// atomics: bookkeeping outside the model.
#[cfg(loom)]
#[derive(Debug, Default)]
#[doc(hidden)]
pub struct Probe {
    /// Optimistic spins that took the lock.
    pub spin_successes: std::sync::atomic::AtomicU32,
    /// Spinners that left the OSQ before reaching its head.
    pub osq_unqueues: std::sync::atomic::AtomicU32,
    /// First waiters that set HANDOFF.
    pub handoff_requests: std::sync::atomic::AtomicU32,
    /// Unlocks that handed the lock over (PICKUP).
    pub handoffs: std::sync::atomic::AtomicU32,
    /// Hand-offs picked up.
    pub pickups: std::sync::atomic::AtomicU32,
    /// Waiters that timed out.
    pub timeouts: std::sync::atomic::AtomicU32,
    /// Waiters that went to sleep (set W_PARKED).
    pub sleeps: std::sync::atomic::AtomicU32,
    /// Wake-ups of a parked waiter.
    pub wakes_of_sleepers: std::sync::atomic::AtomicU32,
    /// Leaving (timed-out) first waiters that woke the next one.
    pub wake_next_on_leave: std::sync::atomic::AtomicU32,
    /// Unlocks with waiters that skipped `wait_lock` because `WOKEN` said
    /// the first waiter was awake.
    pub woken_skips: std::sync::atomic::AtomicU32,
}

#[cfg(loom)]
impl Probe {
    fn hit(c: &std::sync::atomic::AtomicU32) {
        c.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}

#[cfg(loom)]
impl<const SPIN: u8, W: WaitLockRaw> RawMutexWith<SPIN, W> {
    /// Loom only: paths this lock's execution went through.
    #[doc(hidden)]
    pub fn probe(&self) -> &Probe {
        &self.probe
    }

    /// Loom only: set this lock's hand-off bound (see [`set_handoff_ns`]).
    #[doc(hidden)]
    pub fn set_loom_handoff_ns(&self, ns: u64) {
        self.loom_handoff_ns
            .store(ns, core::sync::atomic::Ordering::Relaxed);
    }

    /// Loom only: make `raw_unlock` deliberately wrong — a plain store of 0
    /// that ignores `WAITERS` (no wake-up) — so a model can show that it
    /// catches a lost wake-up.
    #[doc(hidden)]
    pub fn set_loom_broken_unlock(&self) {
        self.loom_broken_unlock
            .store(true, core::sync::atomic::Ordering::Relaxed);
    }

    /// Loom only: make the fast unlock deliberately wrong — it releases a
    /// lock whose first waiter demanded a hand-off *without* keeping it
    /// reserved (clears `HANDOFF` with the owner) — so a model can show
    /// that it catches a stolen hand-off.
    #[doc(hidden)]
    pub fn set_loom_broken_handoff_release(&self) {
        self.loom_broken_handoff
            .store(true, core::sync::atomic::Ordering::Relaxed);
    }

    /// Loom only: whether the wait list is empty (takes wait_lock).
    #[doc(hidden)]
    pub fn wait_list_is_empty(&self) -> bool {
        self.wait_lock.lock();
        // SAFETY: we hold wait_lock.
        let empty = unsafe { self.list_head() }.is_null();
        // SAFETY: we hold wait_lock.
        unsafe { self.wait_lock.unlock() };
        empty
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use lock_api::{RawMutex as _, RawMutexFair as _, RawMutexTimed as _};
    use std::time::Instant;

    #[test]
    fn word_layout() {
        assert_eq!(FLAGS, 0b1111);
        assert_eq!(OWNER_MASK & FLAGS, 0);
        assert_eq!(1usize << OWNER_SHIFT, WOKEN << 1);
        // The largest Linux tid (pid_max ≤ 2^22) fits.
        assert_eq!(tid_of(((1usize << 22) - 1) << OWNER_SHIFT), (1 << 22) - 1);
    }

    #[test]
    fn lock_try_unlock() {
        let m = RawMutex::INIT;
        assert!(!m.is_locked());
        let g = m.lock();
        assert!(m.is_locked());
        assert_eq!(m.word(), my_id());
        assert_eq!(m.owner_tid(), Some(thread::current_tid()));
        assert_eq!(g.owner_tid(), thread::current_tid());
        unsafe { m.unlock(g) };
        assert_eq!(m.word(), 0);
        let g = m.try_lock().unwrap();
        unsafe { m.unlock_fair(g) };
        assert_eq!(m.word(), 0);
        let g = m.try_lock_for(Duration::from_millis(1)).unwrap();
        assert!(format!("{m:?}").contains("waiters: false"));
        unsafe { m.unlock(g) };
    }

    #[test]
    fn try_lock_fails_when_held_elsewhere() {
        let m = RawMutex::new();
        let g = m.lock();
        std::thread::scope(|s| {
            s.spawn(|| assert!(m.try_lock().is_none()));
        });
        unsafe { m.unlock(g) };
    }

    #[test]
    fn handoff_reserved_lock_refuses_strangers() {
        let m = RawMutex::new();
        m.owner.store(HANDOFF | WAITERS, Relaxed);
        assert!(m.try_lock().is_none(), "HANDOFF reserves a free lock");
        m.owner
            .store(((77usize) << OWNER_SHIFT) | PICKUP | WAITERS, Relaxed);
        assert!(m.try_lock().is_none(), "PICKUP names another thread");
        m.owner.store(my_id() | PICKUP | WAITERS, Relaxed);
        assert!(m.try_lock_slow(my_id(), true));
        assert_eq!(m.word(), my_id() | WAITERS);
        m.owner.store(0, Relaxed);
    }

    #[test]
    fn timed_lock_times_out() {
        let m = RawMutexWith::<NO_OWNER_SPIN>::new();
        let g = m.lock();
        std::thread::scope(|s| {
            s.spawn(|| {
                let t0 = Instant::now();
                assert!(m.try_lock_for(Duration::from_millis(20)).is_none());
                assert!(t0.elapsed() >= Duration::from_millis(20));
            });
        });
        assert_eq!(m.word(), my_id(), "the timed-out waiter left no flags");
        unsafe { m.unlock(g) };
    }

    #[test]
    fn global_switch() {
        // Read (and cache) the environment, then flip and restore.
        let was = owner_spin();
        set_owner_spin(!was);
        assert_eq!(owner_spin(), !was);
        assert_eq!(RawMutex::new().owner_spin_enabled(), !was);
        assert!(RawMutexWith::<OWNER_SPIN>::new().owner_spin_enabled());
        assert!(!RawMutexWith::<NO_OWNER_SPIN>::new().owner_spin_enabled());
        set_owner_spin(was);
    }

    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "does not own the lock")]
    fn unlock_by_non_owner_panics() {
        let m = RawMutex::new();
        let other = RawMutex::new();
        std::thread::scope(|s| {
            // The raw guard has no destructor: dropping it keeps the lock held.
            s.spawn(|| {
                let _held = m.lock();
            });
        });
        let g = other.lock();
        // A guard from `other`, used on `m` held by another thread.
        unsafe { m.unlock(g) };
    }
}
