//! Mutex with optimistic spinning on a running owner (the 2009 "adaptive
//! spinning" mutex, docs/design.md, section 3).
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
//! # Layout
//!
//! The owner word is the last field, and the spin test's per-acquisition
//! counter sits right before it (`#[repr(C)]`, the counter last in
//! [`SpinAdapt`]): in a [`Mutex<T>`](crate::Mutex) the protected data
//! comes right after the raw lock, so the cache line an acquirer takes
//! for the owner word holds the counter and the start of the data too,
//! at six of the eight 8-byte offsets the lock can sit at in a line. With
//! the owner word first, 96 bytes of lock kept it off the data's line.
//!
//! # Memory ordering
//!
//! Acquiring transitions are `Acquire` CASes, releasing ones `Release`
//! RMWs; every write to the owner word is an RMW, so each release heads a
//! release sequence that later flag RMWs do not break. Flag updates are
//! `Relaxed`: they are ordered with the unlocker's CAS by the word's
//! modification order (the lost-wake-up argument needs nothing more), and
//! the list they describe is protected by `wait_lock`.

use crate::config::{MUTEX_FUTILE_SKIP, MUTEX_LAZY, OWNER_SPIN as GLOBAL_SPIN};
#[cfg(not(loom))]
use crate::events::{self, Event};
use crate::oncpu::{self, SpinStats};
use crate::osq::Osq;
#[cfg(not(loom))]
use crate::spinadapt::Decision;
use crate::spinadapt::{self, SpinAdapt};
use crate::sync::Ordering::{Acquire, Relaxed, Release};
use crate::sync::{AtomicU32, AtomicUsize, UnsafeCell};
#[cfg(not(loom))]
use crate::sys;
use crate::thread;
use crate::waitlist::{Linked, Links, WaitList};
pub use crate::waitlock::{
    WaitLock, WaitLockRaw, YieldLock, YIELD_LOCK_SLEEP_NS, YIELD_LOCK_YIELDS,
};
use core::marker::PhantomData;
use core::sync::atomic::AtomicU64 as StdAtomicU64;
#[cfg(not(loom))]
use std::time::Duration;

mod compact;
#[cfg(loom)]
mod loom_probe;
mod slow;
#[cfg(all(test, not(loom)))]
mod tests;

pub use compact::RawMutexCompact;
pub use compact::C_WAITERS;
#[cfg(loom)]
pub use compact::{CompactBroken, CompactProbe, C_HANDOFF};
#[cfg(loom)]
pub use loom_probe::Probe;

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
/// it pays (the kernel's `OWNER_SPIN` exactly, docs/design.md, section 3).
pub const OWNER_SPIN_FIXED: u8 = 3;

pub use crate::oncpu::MAX_OWNER_BUDGETS;

/// Default for [`handoff_ns`]: 4 ms, the kernel's order of magnitude.
pub const DEFAULT_HANDOFF_NS: u64 = 4_000_000;

// Global settings. Plain std atomics: configuration, not synchronisation.
// The owner-spin switch (`GLOBAL_SPIN`) is kept by `config`.
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

/// Whether a mutex whose recent spins mostly ran out of their budget
/// skips spinning for a while (the default; a userspace addition to the
/// kernel's design, in [`RawMutexCompact`] and in the modes of
/// [`RawMutexWith`] that run the adaptive test, [`OWNER_SPIN`] and
/// [`OWNER_SPIN_GLOBAL`]; [`OWNER_SPIN_FIXED`] spins as the kernel does). On
/// unless the environment says `KLOCK_MUTEX_FUTILE_SKIP=0` (read once) or
/// [`set_futile_skip`]`(false)` was called.
///
/// Under the time-budget oracle ([`crate::oncpu`]) a spinner cannot see
/// that the owner is off its CPU; it learns only when its budget runs
/// out, and then it has spent the budget (10–20 µs on a virtual machine
/// whose futex wake-up is slow) for nothing. A program whose critical
/// sections sleep or yield (sysbench's `threads` test yields inside every
/// one) makes nearly every spin end that way: 93–99% of them in its
/// 4-thread cell, which then ran at 0.96x glibc. So each lock keeps a
/// score in its [`SpinStats`]: a spin that runs
/// out of its budget adds one, a successful one takes two away; at
/// [`FUTILE_LIMIT`](crate::oncpu::FUTILE_LIMIT) the lock skips its next
/// [`FUTILE_SKIPS`](crate::oncpu::FUTILE_SKIPS) spins (the lockers sleep
/// at once, counted as `spin_skip_futile`), then one spin probes again. A
/// lock whose spins succeed at least a third of the time never skips:
/// the `mutex` suite's spins fail a few dozen times a run against
/// hundreds of thousands of quick successes. An owner that the exact
/// oracle knows to be off its CPU ends a spin at once, not on the budget,
/// so the score stays low there.
#[inline]
pub fn futile_skip() -> bool {
    MUTEX_FUTILE_SKIP.get()
}

/// Turn the skipping of futile spins ([`futile_skip`]) on or off for all
/// mutexes (the full and the compact one). Takes effect at the next
/// slow-path lock.
pub fn set_futile_skip(on: bool) {
    MUTEX_FUTILE_SKIP.set(on);
}

/// How long a lazy first waiter sleeps per round before it tries the
/// lock again (see [`lazy_wait`]).
pub const LAZY_WAIT_NS: u64 = 20_000;
/// Lazy rounds after each wake-up that lost the lock (see [`lazy_wait`]).
pub const LAZY_WAIT_ROUNDS: u32 = 2;

/// Whether mutex first waiters wait lazily (the default; a userspace
/// addition to the kernel's design, in both [`RawMutex`] and
/// [`RawMutexCompact`]). On unless the environment says
/// `KLOCK_MUTEX_LAZY=0` (read once) or [`set_lazy_wait`]`(false)` was
/// called.
///
/// A first waiter that an unlock woke (`WOKEN`) and that then finds the
/// lock taken again (a running thread re-took it: barging) would, in the
/// kernel's design, clear `WOKEN` and sleep until the next unlock wakes
/// it, and that unlock comes at once: the running thread releases the
/// lock again a few nanoseconds later. So the running thread pays a
/// `FUTEX_WAKE` that really wakes a thread (an inter-processor
/// interrupt; on a virtual machine an exit to the hypervisor) each time
/// the waiter goes back to sleep, tens of thousands of times a second on
/// a hot lock. Lazily, the waiter keeps `WOKEN` set, so unlocks stay on
/// their fast path, and sleeps [`LAZY_WAIT_NS`] on a timer, then tries
/// again, up to [`LAZY_WAIT_ROUNDS`] times; after that it clears `WOKEN`
/// and sleeps until woken, as the kernel's waiter does. Keeping `WOKEN`
/// set while asleep is safe only because the sleep is timed: the waiter
/// re-checks the lock on its own (an untimed sleep with `WOKEN` set is
/// the lost wake-up that the loom models reject). A hand-off demand
/// (`HANDOFF`) still makes the unlock wake it. The cost: a lock freed
/// while its first waiter sleeps a lazy round is taken up to
/// [`LAZY_WAIT_NS`] late, unless someone else takes it first.
#[inline]
pub fn lazy_wait() -> bool {
    MUTEX_LAZY.get()
}

/// Turn the first waiters' lazy wait ([`lazy_wait`]) on or off for all
/// mutexes (the full and the compact one). Takes effect at the next
/// wake-up.
pub fn set_lazy_wait(on: bool) {
    MUTEX_LAZY.set(on);
}

/// One first waiter's lazy rounds (see [`lazy_wait`]).
#[derive(Debug)]
pub(crate) struct LazyWait {
    rounds: u32,
    ns: u64,
}

impl LazyWait {
    /// Lazy rounds of `ns` each (0: never lazy).
    pub(crate) fn new(ns: u64) -> Self {
        Self { rounds: 0, ns }
    }

    /// The setting in force: [`LAZY_WAIT_NS`] if [`lazy_wait`], else off.
    #[cfg(not(loom))]
    pub(crate) fn from_config() -> Self {
        Self::new(if lazy_wait() { LAZY_WAIT_NS } else { 0 })
    }

    /// Whether this round is lazy: the first waiter keeps `WOKEN` and
    /// sleeps on a timer.
    #[inline]
    pub(crate) fn active(&self) -> bool {
        self.rounds > 0
    }

    /// The deadline of this round's sleep: the caller's, or the end of a
    /// lazy round if that is sooner.
    pub(crate) fn park_deadline(&self, deadline: Option<u64>) -> Option<u64> {
        if !self.active() {
            return deadline;
        }
        let end = crate::sys::monotonic_ns().saturating_add(self.ns);
        Some(deadline.map_or(end, |d| d.min(end)))
    }

    /// The first waiter slept and then failed to take the lock; `woken`:
    /// an unlock had woken it. Starts the lazy rounds after a wake-up,
    /// else counts one down; returns whether a new series started.
    pub(crate) fn lost(&mut self, woken: bool) -> bool {
        if self.ns == 0 {
            return false;
        }
        if woken {
            self.rounds = LAZY_WAIT_ROUNDS;
            true
        } else {
            self.rounds = self.rounds.saturating_sub(1);
            false
        }
    }
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

/// The identity thread `tid` writes into the owner word.
#[inline(always)]
fn id_of(tid: u32) -> usize {
    (tid as usize) << OWNER_SHIFT
}

/// The identity the calling thread writes into the owner word.
#[inline(always)]
fn my_id() -> usize {
    id_of(thread::current_tid())
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

// Waiter states (its futex word): running (about to re-check, or
// spinning as first waiter), asleep, or woken by an unlocker (it must
// re-check).
use crate::waitlist::{W_PARKED, W_WAITING, W_WOKEN};

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

/// The kernel's optimistic-spinning mutex, with a per-lock spin mode
/// `SPIN` ([`OWNER_SPIN_GLOBAL`], [`OWNER_SPIN`] or [`NO_OWNER_SPIN`]) and
/// the lock `W` guarding its wait list (default [`WaitLock`]).
/// Use it through [`crate::Mutex`] or [`crate::MutexWith`].
#[repr(C)] // The hot words last, next to the data: see "Layout" in the module docs.
pub struct RawMutexWith<const SPIN: u8, W: WaitLockRaw = WaitLock> {
    /// Queue of optimistic spinners.
    osq: Osq,
    /// Protects `list` (and the setting/clearing of WAITERS and HANDOFF).
    wait_lock: W,
    /// This lock's adaptive spin budget.
    spin: SpinStats,
    /// Threads spinning on this lock now (OSQ members and spinning first
    /// waiters); at most [`spin_cap`](slow::spin_cap).
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
    /// Loom only: this lock's lazy round in ns (0, the default in models:
    /// no lazy wait; see [`LazyWait`]).
    #[cfg(loom)]
    loom_lazy_ns: core::sync::atomic::AtomicU64,
    /// Loom only: a deliberately broken unlock (see `set_loom_broken_unlock`).
    #[cfg(loom)]
    loom_broken_unlock: core::sync::atomic::AtomicBool,
    /// Loom only: a deliberately broken hand-off release (see
    /// `set_loom_broken_handoff_release`).
    #[cfg(loom)]
    loom_broken_handoff: core::sync::atomic::AtomicBool,
    /// Whether spinning pays on this lock (counts acquisitions; its
    /// per-acquisition fields are its last).
    adapt: SpinAdapt,
    /// Owner tid and flags (see the [module docs](self)).
    owner: AtomicUsize,
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
            loom_lazy_ns: core::sync::atomic::AtomicU64::new(0),
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
        self.raw_lock_as(thread::current_tid())
    }

    /// [`raw_lock`](Self::raw_lock) by a caller that has its tid at hand
    /// (each lookup of it is a thread-local access, a call in a shared
    /// library). `tid` must be the caller's ([`thread::current_tid`]): the
    /// owner word and the guard name it.
    #[inline]
    pub fn raw_lock_as(&self, tid: u32) -> OwnerGuard {
        let me = id_of(tid);
        // (0, -) -> (me, -). Acquire pairs with the Release of the previous
        // owner's unlock.
        if let Err(w) = self.owner.compare_exchange(0, me, Acquire, Relaxed) {
            self.lock_contended(me, w);
        }
        OwnerGuard::new(me)
    }

    /// [`raw_lock_as`](Self::raw_lock_as) for an error-checking caller
    /// (the C API): `None`, without waiting, if the caller already holds
    /// the lock. The check reads only the word the failed CAS returned: a
    /// lock that the CAS takes was nobody's, so the uncontended path
    /// checks nothing (a separate load of the owner before the CAS cost
    /// the C API's pair about a nanosecond). Exact: the owner field names
    /// the caller only while it holds the lock or while the lock is handed
    /// to it as a waiter, marked `PICKUP` until it takes it, and a caller
    /// here is no waiter.
    #[doc(hidden)]
    #[inline]
    pub fn raw_lock_unless_held_as(&self, tid: u32) -> Option<OwnerGuard> {
        let me = id_of(tid);
        // Acquire: as in raw_lock_as.
        if let Err(w) = self.owner.compare_exchange(0, me, Acquire, Relaxed) {
            if w & OWNER_MASK == me && w & PICKUP == 0 {
                return None;
            }
            self.lock_contended(me, w);
        }
        Some(OwnerGuard::new(me))
    }

    /// The lock after the fast path's CAS found `w`.
    #[inline(always)]
    fn lock_contended(&self, me: usize, w: usize) {
        // Free, with an awake first waiter: (0, WW) -> (me, WW), the
        // common case of many threads on few CPUs. Acquire: as in
        // raw_lock_as.
        if w == WW
            && self
                .owner
                .compare_exchange(WW, me | WW, Acquire, Relaxed)
                .is_ok()
        {
            return;
        }
        self.lock_slow(me, None);
    }

    /// Take the lock if it is free (and not reserved for a starving
    /// waiter); never spins or sleeps.
    #[inline]
    pub fn raw_try_lock(&self) -> Option<OwnerGuard> {
        self.raw_try_lock_as(thread::current_tid())
    }

    /// [`raw_try_lock`](Self::raw_try_lock) by a caller that has its tid
    /// at hand (see [`raw_lock_as`](Self::raw_lock_as)).
    #[inline]
    pub fn raw_try_lock_as(&self, tid: u32) -> Option<OwnerGuard> {
        let me = id_of(tid);
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
        if self.loom_broken_unlock() {
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
        let me = self.loom_release_value(me);
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
