//! Read-write semaphore with reader optimistic spinning and its adaptive
//! disabling (the 2019 rwsem series, docs/design.md, section 4).
//!
//! Both writers and readers **spin** (under the [`Osq`]) while a running
//! writer holds the lock; a writer also spins for a short, bounded time
//! on a **reader-owned** lock ([`rspin_threshold_ns`]: `10 + readers/2`
//! µs, at most 25 µs). When that time runs out the writer marks the lock
//! **nonspinnable** — and, with *adaptive disabling*, reader spinning on
//! this lock stays off (the reader-nonspinnable bit is carried from owner
//! to owner) until a writer takes the lock in its fast path. Reader
//! spinning helps short read sections; long or crowded ones starve
//! writers, and this is how the lock notices.
//!
//! When spinning does not make sense, lockers **sleep** in one FIFO wait
//! list: writers each on their own futex word, readers on one word of the
//! lock that a grant bumps, so that one `FUTEX_WAKE` wakes the readers it
//! granted. One wake-up per reader was slower: each woken reader could
//! preempt its waker before the rest were woken (inferred: involuntary
//! context switches fell from about 53 k to 11 k per run at 32 threads
//! in `rwsem-pagefault` when the group wake-up replaced them).
//! A wake-up of readers takes all
//! queued readers (skipping writers, at most [`MAX_READERS_WAKEUP`]) and
//! unlinks them. If the first of them has waited [`reader_grant_ns`]
//! (default: the hand-off bound, 4 ms) or asked for a hand-off, it
//! *grants* them the lock (adds their reader counts on their behalf, the
//! kernel's `rwsem_mark_wake`): a woken reader returns owning it. Before
//! that it only wakes them to **compete** for it: each probes the lock
//! (past `WAITERS`, never past a writer or a hand-off) and, beaten by a
//! writer, queues again with its first queueing time. A granted reader
//! owns the lock from the grant until the scheduler has run it; with more
//! threads than CPUs that took about 30 µs a reader in `rwsem-pagefault`
//! at 16 threads on 2 CPUs, during which the lock was held by threads
//! that were not running and every other locker queued behind them (see
//! `docs/locks/rwsem.md`). Writers
//! are woken one at a time, in queue order, and take the lock themselves.
//! A first waiter that has waited longer than [`wait_timeout_ns`] sets
//! `HANDOFF`: from then on only it may take the lock.
//!
//! **Grant at write unlock.** A write unlock that finds `WAITERS` and a
//! reader at the front (the `front_reader` hint) goes under `wait_lock`
//! while still holding the lock: its release and the readers' grant are
//! one CAS, so the lock never falls free and no writer can slip in before
//! them. With a writer at the front it releases, then wakes that writer.
//! Writers may steal the lock from a *writer* at the front; readers queued
//! behind it wait for its hand-off (the kernel's policy) unless the
//! optional reader wait bound ([`reader_wait_ns`], off by default) lets the
//! next write unlock grant them past it.
//!
//! **Reader lock stealing** (`RSPIN = `[`STEAL`]; mainline's later design,
//! which replaced reader spinning): readers never spin. A reader whose
//! fast path failed takes the lock anyway if neither a writer nor another
//! reader holds it and no hand-off is pending (the `read steal` line
//! below), even with waiters queued; the first reader of the phase then
//! grants the readers at the front of the queue. It does not steal into a
//! read phase, so a stream of readers cannot starve a queued writer.
//! Otherwise it queues as above. Writers are unchanged.
//!
//! # The count word (64 bits)
//!
//! ```text
//!  63          62 ..................... 8   7 .. 4    3            2         1         0
//! +-------------+--------------------------+-------+--------------+---------+---------+---------------+
//! | READ_FAILED |   reader count           |   0   | WRITER_WOKEN | HANDOFF | WAITERS | WRITER_LOCKED |
//! +-------------+--------------------------+-------+--------------+---------+---------+---------------+
//! ```
//!
//! * [`WRITER_LOCKED`]: a writer holds the lock.
//! * [`WAITERS`]: the wait list is non-empty (unlock must look at it).
//!   Invariant: whenever a thread holds `wait_lock` and the list is
//!   non-empty, `WAITERS` is set.
//! * [`HANDOFF`]: the first waiter has waited too long; nobody but it (a
//!   writer) or a grant to it (readers) may take the lock.
//! * [`WRITER_WOKEN`]: the writer at the front was woken and has not yet
//!   looked at the lock again; unlocks leave it alone instead of taking
//!   `wait_lock` to wake it a second time (it drops the bit with an RMW
//!   before its trylock, so an unlock after that wakes it). With many
//!   threads, readers backing out of a failed fast path each took
//!   `wait_lock` to wake that writer again: about a quarter of
//!   `rwsem-rate`'s samples at 16 threads.
//! * reader count, in units of [`READER_BIAS`]: readers holding the lock,
//!   plus readers briefly probing it (a probe that fails backs out).
//! * [`READ_FAILED`]: the reader count overflowed into the top bit; read
//!   attempts that see it fail (a guard, never reached in practice).
//!
//! # The owner word (a hint)
//!
//! ```text
//!  63 (or 31)                          3         2                 1                0
//! +------------------------------------+-----------------+-----------------+--------------+
//! |  tid of the owning writer, or of a | WR_NONSPINNABLE | RD_NONSPINNABLE | READER_OWNED |
//! |  recent reader (0 = none)          |                 |                 |              |
//! +------------------------------------+-----------------+-----------------+--------------+
//! ```
//!
//! Spinners read it to find the writer to watch and whether they may
//! spin; the lock itself is the count word alone. A reader tid stays
//! there after the reader left (a stale hint, as in the kernel).
//!
//! # State transitions of `count`
//!
//! `(readers, WRITER_LOCKED, flags)`; `F` any flags, `W` = `WAITERS`.
//!
//! ```text
//! read fast       (r, 0, -)        -> (r+1, 0, -)        fetch_add, acquire; fails (backs out)
//!                                                        on WRITER_LOCKED|WAITERS|HANDOFF|READ_FAILED
//! read probe      (r, 0, F)        -> (r+1, 0, F)        fetch_add, acquire (spinners, phase join,
//!                                                        empty list); fails on WRITER_LOCKED|HANDOFF
//! read steal      (0, 0, F-HANDOFF) -> (1, 0, F)         STEAL mode: a probe tried only when the
//!                                                        count showed no readers; fails (backs
//!                                                        out) on WRITER_LOCKED|HANDOFF|READ_FAILED
//!                                                        or other readers; if W, grant the
//!                                                        front readers (under wait_lock)
//! read grant      (r, 0, F)        -> (r+n, 0, F-HANDOFF[-W if list empties])
//!                                                        CAS under wait_lock, acquire, for n queued readers
//!                                                        that waited reader_grant_ns (or HANDOFF)
//! read wake       (r, 0, F)        -> (r, 0, F[-W if list empties])
//!                                                        under wait_lock, relaxed: n younger readers
//!                                                        unlinked and woken; each then probes
//! read unlock     (r, 0, F)        -> (r-1, 0, F)        fetch_sub, release; (0,0,W) without
//!                                                        WRITER_WOKEN: wake front
//! write fast      (0, 0, -)        -> (0, 1, -)          CAS, acquire
//! write try       (0, 0, F)        -> (0, 1, F-HANDOFF)  CAS, acquire; not if HANDOFF unless we are
//!                                                        the first waiter
//! write unlock    (0, 1, F-W)      -> (0, 0, F)          CAS, release (only while W is clear)
//! write unlock    (0, 1, F|W)      -> (n, 0, F-HANDOFF[-W if list empties])
//!   + grant                                              under wait_lock, one CAS, release: readers
//!                                                        at the front, or behind a front writer
//!                                                        after reader_wait_ns (no HANDOFF set)
//! write unlock    (0, 1, F|W)      -> (0, 0, F[-W if list empties])
//!   + wake                                               as the grant, for readers at the front
//!                                                        that have not waited reader_grant_ns
//! write unlock    (0, 1, F|W)      -> (0, 0, F|W)        fetch_sub, release; a writer at the
//!   + wake                                               front: wake it (under wait_lock) if free
//! downgrade       (0, 1, F)        -> (1, 0, F)          fetch_add, release; W: grant front readers
//! queue / leave   (.., F)          -> (.., F|W) / (.., F-W-HANDOFF-WOKEN)   under wait_lock, relaxed
//! wake writer     (.., F|W)        -> (.., F|W|WOKEN)    under wait_lock, relaxed; the woken
//!                                                        writer clears it (RMW) before its trylock
//! hand-off req.   (.., F)          -> (.., F|HANDOFF)    under wait_lock, relaxed
//! ```
//!
//! # The nonspinnable bits (owner word)
//!
//! * **Set** (both bits, one CAS) by a writer whose time-based spin on a
//!   reader-owned lock ran out — only while the owner word says
//!   `READER_OWNED` and the count shows readers and no writer.
//! * `WR_NONSPINNABLE`: writers do not spin. Lives for one read phase:
//!   every new owner value drops it (readers keep only `RD_NONSPINNABLE`).
//! * `RD_NONSPINNABLE`: readers do not spin (they queue; writers become
//!   preferred). With **adaptive disabling** on:
//!   - a writer that saw `WR_NONSPINNABLE` after failing to spin sets
//!     `RD_NONSPINNABLE` once it gets the lock (slow path);
//!   - a reader that saw `RD_NONSPINNABLE` at slow-path entry sets it
//!     again when it gets the lock through the wake-up path (grant);
//!   - the bit is **cleared** only when a writer takes the lock in its fast
//!     path (or `try_lock`), or when a slow-path locker (a writer, or the
//!     first reader of a granted group) did not see it. Readers taking the
//!     lock any other way, and write unlocks, keep it.
//!
//!   With adaptive disabling off the bits still stop spinning for the
//!   read phase that set them, but no locker carries `RD_NONSPINNABLE`
//!   over to the next owner (the 2019 mail's "before patch" column).
//!
//! # Slow paths
//!
//! *Read*: note the owner word (reader hint, `RD_NONSPINNABLE`). If reader
//! spinning is on for this lock and the bit is clear: spin (OSQ) while a
//! running writer holds it, take it when it turns reader-owned or free;
//! after taking it, grant the queued readers at the front so they join
//! this read phase. If spinning failed: **phase-fair join** — if another
//! reader took the lock since we arrived (the reader hint changed) and it
//! is still reader-owned, probe it. Else queue: under `wait_lock`, take
//! it at once if the list is empty and no writer holds it; else append,
//! set `WAITERS` if first, wake the front if no writer holds the lock, and
//! sleep until granted.
//!
//! *Write*: trylock; spin (OSQ) on a running writer or, time-bounded, on
//! readers; else queue like the mutex: under `wait_lock` re-arm, trylock
//! (the first waiter may take a `HANDOFF`-reserved lock), sleep; the
//! first waiter sets `HANDOFF` after [`wait_timeout_ns`] and, once woken,
//! spins on a writer owner without the OSQ.
//!
//! # Memory ordering
//!
//! The count word is the lock: acquiring RMWs are `Acquire`, releasing
//! ones `Release` (the write unlock's release-and-grant CAS is `Release`:
//! the unlocking writer already synchronised with every earlier holder), and **every write to it is an RMW**, so each release
//! heads a release sequence that later flag RMWs and reader probes do not
//! break (an acquirer synchronises with every earlier releaser). Flag
//! RMWs and probe back-outs are `Relaxed`: they are ordered with unlocks
//! by the word's modification order, and the list they describe is
//! protected by `wait_lock`. A granted reader synchronises with its
//! granter through its state word (`Release` swap / `Acquire` load); the
//! granter's `Acquire` grant CAS synchronised with the last writer. The
//! owner word is a hint: all `Relaxed`.

use crate::config::Switch;
use crate::events::{self, Event};
use crate::oncpu::{self, SpinStats};
use crate::osq::Osq;
use crate::spin::cpu_relax;
use crate::sync::Ordering::{Acquire, Relaxed, Release};
use crate::sync::{fence, AtomicBool, AtomicU32, AtomicU64, AtomicUsize, UnsafeCell};
use crate::sys::{self, monotonic_ns};
use crate::thread;
use crate::waitlist::{
    futex_addr, wake_later, wake_later_n, wake_pending, AbortOnUnwind, Linked, Links, WaitList,
};
use crate::waitlock::{WaitLock, WaitLockRaw};
use core::marker::PhantomData;
use core::sync::atomic::AtomicU64 as StdAtomicU64;
use std::time::Duration;

// ---- count word ----
/// Count word: a writer holds the lock.
pub const WRITER_LOCKED: u64 = 1 << 0;
/// Count word: the wait list is non-empty.
pub const WAITERS: u64 = 1 << 1;
/// Count word: the first waiter demands the lock.
pub const HANDOFF: u64 = 1 << 2;
/// Count word: the writer at the front of the queue has been woken and
/// has not yet looked at the lock again, so unlocks need not wake it
/// (set by its waker and cleared by that writer, under `wait_lock`).
pub const WRITER_WOKEN: u64 = 1 << 3;
/// An unlock leaving the count at exactly `WAITERS` under this mask wakes
/// the front waiter.
const WAKE_MASK: u64 = READER_MASK | WRITER_LOCKED | WAITERS | WRITER_WOKEN;
/// Position of the reader count.
pub const READER_SHIFT: u32 = 8;
/// One reader.
pub const READER_BIAS: u64 = 1 << READER_SHIFT;
/// Count word: reader count overflow guard.
pub const READ_FAILED: u64 = 1 << 63;
/// Mask of the reader count (bits 8..=62).
pub const READER_MASK: u64 = !(READER_BIAS - 1) & !READ_FAILED;
/// A read fast path fails if any of these was set.
pub const READ_FAILED_MASK: u64 = WRITER_LOCKED | WAITERS | HANDOFF | READ_FAILED;

// ---- owner word ----
/// Owner word: the lock is (or was last) owned by readers; the tid is a
/// hint naming one of them.
pub const READER_OWNED: usize = 1 << 0;
/// Owner word: readers must not spin.
pub const RD_NONSPINNABLE: usize = 1 << 1;
/// Owner word: writers must not spin.
pub const WR_NONSPINNABLE: usize = 1 << 2;
/// Both nonspinnable bits.
pub const NONSPINNABLE: usize = RD_NONSPINNABLE | WR_NONSPINNABLE;
/// All owner flag bits.
pub const OWNER_FLAGS: usize = READER_OWNED | NONSPINNABLE;
/// The tid sits above the flags.
pub const OWNER_SHIFT: u32 = 3;
/// Mask of the tid field.
pub const OWNER_MASK: usize = !OWNER_FLAGS;

/// At most this many readers are granted the lock by one wake-up.
pub const MAX_READERS_WAKEUP: u64 = 256;
/// Reader-owned spin threshold: base.
pub const RSPIN_BASE_NS: u64 = 10_000;
/// Reader-owned spin threshold: per reader holding the lock.
pub const RSPIN_PER_READER_NS: u64 = 500;
/// Reader-owned spin threshold: cap.
pub const RSPIN_MAX_NS: u64 = 25_000;
/// Default for [`wait_timeout_ns`]: 4 ms (the kernel's `RWSEM_WAIT_TIMEOUT`
/// order of magnitude).
pub const DEFAULT_WAIT_TIMEOUT_NS: u64 = 4_000_000;
/// Default for [`reader_wait_ns`]: no bound (`u64::MAX`), the kernel's
/// policy: readers queued behind a writer wait for that writer, whose own
/// hand-off bounds the wait. A finite bound makes the rwsem fairer to
/// readers at a large cost in throughput (see `docs/locks/rwsem.md`).
pub const DEFAULT_READER_WAIT_NS: u64 = u64::MAX;
/// Default for [`reader_grant_ns`]: readers at the front of the queue are
/// woken to compete for the lock until they have waited the hand-off bound
/// ([`DEFAULT_WAIT_TIMEOUT_NS`]); then they are granted it. Under loom, 0
/// (always grant: the models of the grant keep their meaning; the models
/// of the competing wake-up set their lock's bound).
pub const DEFAULT_READER_GRANT_NS: u64 = if cfg!(loom) {
    0
} else {
    DEFAULT_WAIT_TIMEOUT_NS
};
pub use crate::oncpu::MAX_OWNER_BUDGETS;

/// Per-lock switch value: follow the global switch.
pub const GLOBAL: u8 = 0;
/// Per-lock switch value: on.
pub const ON: u8 = 1;
/// Per-lock switch value: off.
pub const OFF: u8 = 2;
/// Per-lock `RSPIN` value only: readers do not spin; they steal the lock
/// when no writer and no other reader holds it (module docs, "Reader lock
/// stealing"). The global switch has no such setting.
pub const STEAL: u8 = 3;

/// How long a writer may spin on a lock held by `readers` readers before
/// it marks the lock nonspinnable: `(10 + readers/2)` µs, at most 25 µs.
/// (Under loom: 3 µs, i.e. three clock readings.)
#[inline]
pub fn rspin_threshold_ns(readers: u64) -> u64 {
    if cfg!(loom) {
        3_000
    } else {
        RSPIN_BASE_NS
            .saturating_add(readers.saturating_mul(RSPIN_PER_READER_NS))
            .min(RSPIN_MAX_NS)
    }
}

// ---- global switches (configuration, not synchronisation: std atomics) ----
static GLOBAL_RSPIN: Switch = Switch::new("KLOCK_RWSEM_RSPIN");
static GLOBAL_ADAPTIVE: Switch = Switch::new("KLOCK_RWSEM_ADAPTIVE");
static WAIT_TIMEOUT: StdAtomicU64 = StdAtomicU64::new(DEFAULT_WAIT_TIMEOUT_NS);
static READER_WAIT: StdAtomicU64 = StdAtomicU64::new(DEFAULT_READER_WAIT_NS);
static READER_WAIT_ENV: std::sync::Once = std::sync::Once::new();
static READER_GRANT: StdAtomicU64 = StdAtomicU64::new(DEFAULT_READER_GRANT_NS);

/// The global reader-spinning switch, for locks whose `RSPIN` is
/// [`GLOBAL`] (the default [`crate::RwSem`]). On unless
/// `KLOCK_RWSEM_RSPIN=0` (read once) or [`set_reader_spin`]`(false)`.
#[inline]
pub fn reader_spin() -> bool {
    GLOBAL_RSPIN.get()
}

/// Turn reader optimistic spinning on or off for locks following the
/// global switch. Takes effect at the next slow-path read lock.
pub fn set_reader_spin(on: bool) {
    GLOBAL_RSPIN.set(on);
}

/// The global adaptive-disabling switch, for locks whose `ADAPTIVE` is
/// [`GLOBAL`]. On unless `KLOCK_RWSEM_ADAPTIVE=0` (read once) or
/// [`set_adaptive`]`(false)`.
#[inline]
pub fn adaptive() -> bool {
    GLOBAL_ADAPTIVE.get()
}

/// Turn adaptive disabling of reader spinning on or off for locks
/// following the global switch.
pub fn set_adaptive(on: bool) {
    GLOBAL_ADAPTIVE.set(on);
}

/// How long (ns) a first waiter waits before it demands a hand-off.
pub fn wait_timeout_ns() -> u64 {
    WAIT_TIMEOUT.load(core::sync::atomic::Ordering::Relaxed)
}

/// Set the hand-off bound (ns) for all rw-semaphores. 0: every first
/// waiter demands the lock at once.
pub fn set_wait_timeout_ns(ns: u64) {
    WAIT_TIMEOUT.store(ns, core::sync::atomic::Ordering::Relaxed);
}

/// The reader wait bound (ns): readers queued behind a writer at the
/// front of the wait list that have waited this long (or
/// [`wait_timeout_ns`], if shorter) are granted the lock by the next write
/// unlock, past that writer. Writers stealing the lock from the front
/// writer cannot starve them longer.
///
/// Default [`DEFAULT_READER_WAIT_NS`], or `KLOCK_RWSEM_READER_WAIT_NS`
/// (read once, at the first call; `max` = no bound) unless
/// [`set_reader_wait_ns`] was called first.
pub fn reader_wait_ns() -> u64 {
    READER_WAIT_ENV.call_once(|| {
        if let Some(ns) = crate::config::env_ns("KLOCK_RWSEM_READER_WAIT_NS") {
            READER_WAIT.store(ns, core::sync::atomic::Ordering::Relaxed);
        }
    });
    READER_WAIT.load(core::sync::atomic::Ordering::Relaxed)
}

/// Set the reader wait bound (ns) for all rw-semaphores: smaller is fairer
/// to readers and costs writer throughput (each grant starts a read phase
/// that writers wait out); `u64::MAX` leaves readers behind a writer to
/// that writer's own hand-off ([`wait_timeout_ns`]).
pub fn set_reader_wait_ns(ns: u64) {
    READER_WAIT_ENV.call_once(|| {});
    READER_WAIT.store(ns, core::sync::atomic::Ordering::Relaxed);
}

/// The reader grant bound (ns): a wake-up of readers at the front of the
/// queue *grants* them the lock (they return owning it, the kernel's
/// `rwsem_mark_wake`) once the first of them has waited this long, or has
/// requested a hand-off; before that it only wakes them (unlinked) to
/// compete for it. A granted reader owns the lock from the grant until it
/// has run and unlocked, however long the scheduler takes to run it; with
/// more threads than CPUs that wait dominated (see `docs/locks/rwsem.md`). `0`: always
/// grant (the kernel's policy); `u64::MAX`: grant only on a hand-off.
pub fn reader_grant_ns() -> u64 {
    READER_GRANT.load(core::sync::atomic::Ordering::Relaxed)
}

/// Set the reader grant bound (ns) for all rw-semaphores (see
/// [`reader_grant_ns`]).
pub fn set_reader_grant_ns(ns: u64) {
    READER_GRANT.store(ns, core::sync::atomic::Ordering::Relaxed);
}

#[inline(always)]
fn my_id() -> usize {
    (thread::current_tid() as usize) << OWNER_SHIFT
}

#[inline(always)]
fn tid_of(owner: usize) -> u32 {
    (owner >> OWNER_SHIFT) as u32
}

#[inline(always)]
fn readers_of(count: u64) -> u64 {
    (count & READER_MASK) >> READER_SHIFT
}

/// Guard state of a write-locked [`RawRwSemWith`]: the writer identity
/// (so unlock needs no thread-local lookup). Not `Send`.
#[derive(Debug)]
pub struct WriteGuard {
    id: usize,
    _not_send: PhantomData<*mut ()>,
}

// SAFETY: no shared state; `Sync` only lets `&Guard` be shared, as
// `GuardNoSend` does.
unsafe impl Sync for WriteGuard {}

impl WriteGuard {
    #[inline(always)]
    fn new(id: usize) -> Self {
        Self {
            id,
            _not_send: PhantomData,
        }
    }

    /// The writer's tid.
    pub fn owner_tid(&self) -> u32 {
        tid_of(self.id)
    }
}

/// Guard state of a read-locked [`RawRwSemWith`] (nothing). Not `Send`.
pub type ReadGuard = lock_api::GuardNoSend;

// Waiter states (its futex word).
/// Running, or about to re-check.
const W_WAITING: u32 = 0;
/// Asleep (or about to sleep) in `FUTEX_WAIT`.
const W_PARKED: u32 = 1;
/// A writer woken to retry.
const W_WOKEN: u32 = 2;
/// A reader granted the lock (and unlinked) by a waker.
const W_GRANTED: u32 = 3;
/// A reader unlinked and woken by a waker to compete for the lock (not
/// granted it: see [`reader_grant_ns`]).
const W_RETRY: u32 = 4;

/// What a queued reader's wait ended with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ReadWait {
    /// Granted: it owns the lock.
    Granted,
    /// Woken (and unlinked) to compete for the lock.
    Retry,
    /// Its deadline passed (it left the queue).
    TimedOut,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    Reader,
    Writer,
}

/// A sleeping locker, on its own stack, linked into the wait list. Links
/// are protected by `wait_lock`.
struct Waiter {
    state: AtomicU32,
    links: Links<Waiter>,
    id: usize,
    role: Role,
    /// Reader: it saw `RD_NONSPINNABLE` at slow-path entry.
    saw_rd: bool,
    /// When it queued (reader hand-off requests).
    since: u64,
    /// Loom only: the waiter's thread, unparked by wakers (see `park`).
    #[cfg(loom)]
    thread: loom::thread::Thread,
}

impl Linked for Waiter {
    fn links(&self) -> &Links<Self> {
        &self.links
    }
}

/// Why optimistic spinning stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SpinFail {
    /// A nonspinnable bit for our role, a hand-off, or the owner is off CPU.
    NotSpinnable,
    /// Budget, deadline, or we should yield.
    Budget,
    /// A writer's time on a reader-owned lock ran out (bits set).
    ReaderTimeout,
}

/// The kernel's rw-semaphore with reader optimistic spinning. `RSPIN`:
/// reader spinning ([`GLOBAL`], [`ON`], [`OFF`]); `ADAPTIVE`: adaptive
/// disabling of reader spinning (same values); `W`: the lock guarding the
/// wait list. Use it through [`crate::RwSem`] or [`crate::RwSemWith`].
pub struct RawRwSemWith<const RSPIN: u8, const ADAPTIVE: u8, W: WaitLockRaw = WaitLock> {
    /// The lock (see the [module docs](self)).
    count: AtomicU64,
    /// Owner hint and nonspinnable bits.
    owner: AtomicUsize,
    /// Queue of optimistic spinners.
    osq: Osq,
    /// Protects `list`, and the setting/clearing of WAITERS and HANDOFF.
    wait_lock: W,
    /// Adaptive budget for spinning on a writer.
    spin: SpinStats,
    /// FIFO of sleeping waiters.
    list: UnsafeCell<WaitList<Waiter>>,
    /// Hint for write unlocks: a reader is at the front of `list`, so the
    /// unlock must grant it through wait_lock. Written under wait_lock
    /// (before the `WAITERS` RMW when a reader queues first), read by the
    /// unlocker after it saw `WAITERS`; a stale answer only costs fairness.
    front_reader: AtomicBool,
    /// Sleeping readers' futex word: a grant that found one of its readers
    /// asleep bumps it after marking them all, so one `FUTEX_WAKE` wakes
    /// the whole group (writers sleep on their own words).
    rgate: AtomicU32,
    #[cfg(loom)]
    probe: Probe,
    #[cfg(loom)]
    loom_wait_timeout_ns: core::sync::atomic::AtomicU64,
    #[cfg(loom)]
    loom_reader_wait_ns: core::sync::atomic::AtomicU64,
    #[cfg(loom)]
    loom_reader_grant_ns: core::sync::atomic::AtomicU64,
    #[cfg(loom)]
    loom_broken: core::sync::atomic::AtomicU8,
}

/// The rw-semaphore following the global switches: [`crate::RwSem`]'s raw lock.
pub type RawRwSem = RawRwSemWith<GLOBAL, GLOBAL>;

// SAFETY: list pointers name waiters that stay alive while linked; the
// list is only accessed under wait_lock.
unsafe impl<const R: u8, const A: u8, W: WaitLockRaw> Send for RawRwSemWith<R, A, W> {}
// SAFETY: as above; everything else is atomic.
unsafe impl<const R: u8, const A: u8, W: WaitLockRaw> Sync for RawRwSemWith<R, A, W> {}

/// Loom only: deliberately broken variants, each rejected by a model
/// (set with `set_loom_broken`; never active outside loom).
#[doc(hidden)]
pub mod broken {
    /// The read fast path ignores `WRITER_LOCKED`.
    pub const READ_IGNORES_WRITER: u8 = 1;
    /// A reader wake-up grants only the first queued reader.
    pub const GRANT_ONE_READER: u8 = 2;
    /// Write trylocks ignore `HANDOFF`.
    pub const IGNORE_HANDOFF: u8 = 3;
    /// A write unlock with readers queued at the front releases the lock
    /// first and grants them afterwards (wakes them to a free lock): a
    /// barging writer can take it in between.
    pub const WAKE_WITHOUT_GRANT: u8 = 4;
    /// A write unlock never grants readers queued behind a writer at the
    /// front, however long they waited.
    pub const NO_READER_BOUND: u8 = 5;
    /// A stealing reader (`STEAL` mode) ignores `HANDOFF`.
    pub const STEAL_IGNORES_HANDOFF: u8 = 6;
    /// A wake-up of readers to compete unlinks them but neither marks nor
    /// wakes them (a lost wake-up: they wait off the list for ever).
    pub const COMPETE_NO_WAKE: u8 = 7;
    /// A reader woken to compete takes the lock without looking at it
    /// (as if it had been granted).
    pub const COMPETE_AS_GRANT: u8 = 8;
    /// A woken writer never clears `WRITER_WOKEN`: once woken, unlocks
    /// stop waking it (a lost wake-up).
    pub const WOKEN_NEVER_CLEARED: u8 = 9;
}

impl<const RSPIN: u8, const ADAPTIVE: u8, W: WaitLockRaw> RawRwSemWith<RSPIN, ADAPTIVE, W> {
    /// An unlocked rw-semaphore.
    #[cfg(not(loom))]
    pub const fn new() -> Self {
        Self {
            count: AtomicU64::new(0),
            owner: AtomicUsize::new(0),
            osq: Osq::new(),
            wait_lock: W::INIT,
            spin: SpinStats::new(),
            list: UnsafeCell::new(WaitList::new()),
            front_reader: AtomicBool::new(false),
            rgate: AtomicU32::new(0),
        }
    }

    /// An unlocked rw-semaphore (loom atomics cannot be built in a `const fn`).
    #[cfg(loom)]
    pub fn new() -> Self {
        Self {
            count: AtomicU64::new(0),
            owner: AtomicUsize::new(0),
            osq: Osq::new(),
            wait_lock: W::new_unlocked(),
            spin: SpinStats::new(),
            list: UnsafeCell::new(WaitList::new()),
            front_reader: AtomicBool::new(false),
            rgate: AtomicU32::new(0),
            probe: Probe::default(),
            loom_wait_timeout_ns: core::sync::atomic::AtomicU64::new(u64::MAX),
            loom_reader_wait_ns: core::sync::atomic::AtomicU64::new(u64::MAX),
            loom_reader_grant_ns: core::sync::atomic::AtomicU64::new(u64::MAX),
            loom_broken: core::sync::atomic::AtomicU8::new(0),
        }
    }

    /// Whether readers of this lock spin now (its mode, or the global switch).
    #[inline]
    pub fn reader_spin_enabled(&self) -> bool {
        match RSPIN {
            ON => true,
            OFF | STEAL => false,
            _ => reader_spin(),
        }
    }

    /// Whether readers of this lock steal it instead of spinning
    /// (`RSPIN == STEAL`).
    #[inline]
    pub const fn reader_steal_enabled(&self) -> bool {
        RSPIN == STEAL
    }

    /// Whether adaptive disabling is on for this lock now.
    #[inline]
    pub fn adaptive_enabled(&self) -> bool {
        match ADAPTIVE {
            ON => true,
            OFF => false,
            _ => adaptive(),
        }
    }

    #[cfg(loom)]
    #[inline]
    fn is_broken(&self, mode: u8) -> bool {
        self.loom_broken.load(core::sync::atomic::Ordering::Relaxed) == mode
    }

    #[cfg(not(loom))]
    #[inline(always)]
    fn is_broken(&self, _mode: u8) -> bool {
        false
    }

    // ------------------------------------------------------------------
    // Read side.
    // ------------------------------------------------------------------

    /// Acquire a read lock.
    #[inline]
    pub fn raw_lock_shared(&self) -> ReadGuard {
        if !self.read_fast() {
            self.read_slow(None);
        }
        ReadGuard::new()
    }

    /// Take a read lock if that needs no waiting (no writer holds or waits).
    #[inline]
    pub fn raw_try_lock_shared(&self) -> Option<ReadGuard> {
        let mut c = self.count.load(Relaxed);
        while c & READ_FAILED_MASK == 0 {
            // Acquire pairs with the Release of the last write unlock.
            match self
                .count
                .compare_exchange_weak(c, c + READER_BIAS, Acquire, Relaxed)
            {
                Ok(_) => {
                    self.set_reader_owned(my_id());
                    return Some(ReadGuard::new());
                }
                Err(now) => c = now,
            }
        }
        None
    }

    /// Acquire a read lock unless `deadline_ns` ([`sys::monotonic_ns`]
    /// time) passes first.
    pub fn raw_try_lock_shared_until_ns(&self, deadline_ns: u64) -> Option<ReadGuard> {
        (self.read_fast() || self.read_slow(Some(deadline_ns))).then(ReadGuard::new)
    }

    /// Release a read lock.
    ///
    /// # Safety
    /// The caller holds a read lock of this rw-semaphore.
    #[inline]
    pub unsafe fn raw_unlock_shared(&self) {
        // (r, 0, F) -> (r-1, 0, F). Release pairs with the Acquire of the
        // next writer (or of a grant made for readers after it).
        let old = self.count.fetch_sub(READER_BIAS, Release);
        if cfg!(debug_assertions) {
            assert!(
                old & READER_MASK != 0,
                "klock::RwSem: read unlock of a lock with no readers (count {old:#x})"
            );
        }
        if (old - READER_BIAS) & WAKE_MASK == WAITERS {
            self.unlock_wake();
        }
    }

    /// The read fast path: `fetch_add(READER_BIAS)`; back out on failure.
    #[inline(always)]
    fn read_fast(&self) -> bool {
        // Acquire pairs with the Release of the last write unlock.
        let old = self.count.fetch_add(READER_BIAS, Acquire);
        let mask = if self.is_broken(broken::READ_IGNORES_WRITER) {
            READ_FAILED_MASK & !WRITER_LOCKED
        } else {
            READ_FAILED_MASK
        };
        if old & mask == 0 {
            self.set_reader_owned(my_id());
            true
        } else {
            self.read_back_out();
            false
        }
    }

    /// Undo a failed reader probe. It acts as a read unlock: our bias may
    /// have made a queued writer's trylock fail, so if we were the last
    /// "reader" we wake the front waiter.
    #[inline]
    fn read_back_out(&self) {
        // Relaxed: we acquired nothing; release sequences are unbroken
        // (an RMW), so acquirers still synchronise with earlier releases.
        let old = self.count.fetch_sub(READER_BIAS, Relaxed);
        if (old - READER_BIAS) & WAKE_MASK == WAITERS {
            self.unlock_wake();
        }
    }

    /// Reader probe used off the fast path (spinners, phase join): ignores
    /// `WAITERS`, fails on a writer or a hand-off.
    #[inline]
    fn try_read_unqueued(&self, me: usize) -> bool {
        self.try_read_if(me, |old| old & (WRITER_LOCKED | HANDOFF | READ_FAILED) == 0)
            .is_some()
    }

    /// Add a reader and keep it if `ok(count before the add)`, else back
    /// out. Returns that earlier count on success.
    #[inline(always)]
    fn try_read_if(&self, me: usize, ok: impl FnOnce(u64) -> bool) -> Option<u64> {
        // Acquire pairs with the Release of the last write unlock.
        let old = self.count.fetch_add(READER_BIAS, Acquire);
        if ok(old) {
            self.set_reader_owned(me);
            Some(old)
        } else {
            self.read_back_out();
            None
        }
    }

    /// Record a reader as owner hint: `me | READER_OWNED`, keeping
    /// `RD_NONSPINNABLE` and dropping `WR_NONSPINNABLE`. Skips the store
    /// when nothing changes (one reader re-locking).
    #[inline(always)]
    fn set_reader_owned(&self, me: usize) {
        let o = self.owner.load(Relaxed);
        let v = me | READER_OWNED | (o & RD_NONSPINNABLE);
        if o != v {
            self.owner.store(v, Relaxed);
        }
    }

    /// Contended read lock. `false` only when `deadline` passed.
    #[cold]
    #[inline(never)]
    fn read_slow(&self, deadline: Option<u64>) -> bool {
        let me = my_id();
        let entry = self.owner.load(Relaxed);
        let saw_rd = entry & RD_NONSPINNABLE != 0;
        let last_reader = if entry & READER_OWNED != 0 {
            entry & OWNER_MASK
        } else {
            0
        };
        if self.reader_steal_enabled() && self.steal_read(me) {
            return true;
        }
        if self.reader_spin_enabled() && oncpu::spinning_useful() {
            if saw_rd {
                events::inc(Event::RwsemNorspin);
                #[cfg(loom)]
                Probe::hit(&self.probe.norspins);
            } else if self.can_spin(Role::Reader) {
                if self.optimistic_spin(me, Role::Reader, false, deadline) {
                    // Let the readers queued at the front join this phase.
                    if self.count.load(Relaxed) & WAITERS != 0 {
                        self.grant_front_readers();
                    }
                    return true;
                }
                if self.join_read_phase(me, last_reader) {
                    return true;
                }
            }
        }
        let since = monotonic_ns();
        loop {
            match self.read_sleep(me, saw_rd, since, deadline) {
                ReadWait::Granted => return true,
                ReadWait::TimedOut => return false,
                ReadWait::Retry => {
                    // Woken to a lock no writer held: compete for it as
                    // the queued reader we were (past `WAITERS`, never past
                    // a writer or a hand-off). A writer that got in first
                    // sends us back to the queue, with our first queueing
                    // time, so the grant bound still counts from there.
                    let won = if self.is_broken(broken::COMPETE_AS_GRANT) {
                        self.count.fetch_add(READER_BIAS, Acquire);
                        true
                    } else {
                        self.try_read_unqueued(me)
                    };
                    if won {
                        events::inc(Event::RwsemRlockWoken);
                        #[cfg(loom)]
                        Probe::hit(&self.probe.woken_wins);
                        return true;
                    }
                    events::inc(Event::RwsemRlockRequeue);
                    #[cfg(loom)]
                    Probe::hit(&self.probe.requeues);
                }
            }
        }
    }

    /// A reader that started a read phase (or a writer that downgraded)
    /// lets the readers queued at the front join it: under `wait_lock`,
    /// grant them if the front waiter is a reader (never wakes a writer).
    fn grant_front_readers(&self) {
        self.wait_lock.lock();
        // SAFETY: we hold wait_lock.
        unsafe { self.wake_front(false) };
        // SAFETY: we hold wait_lock.
        unsafe { self.wl_unlock() };
    }

    /// Reader lock stealing (`STEAL` mode): take the lock if the count
    /// shows no writer, no other reader and no hand-off, waiters or not;
    /// then, as the first reader of the phase, grant the readers at the
    /// front.
    #[inline(never)]
    fn steal_read(&self, me: usize) -> bool {
        let c = self.count.load(Relaxed);
        let blocked = if self.is_broken(broken::STEAL_IGNORES_HANDOFF) {
            WRITER_LOCKED | READ_FAILED
        } else {
            WRITER_LOCKED | HANDOFF | READ_FAILED
        };
        // Not into a read phase: a stream of stealing readers could then
        // starve a queued writer forever. Checked before the add (no RMW
        // on a lock we would not take) and on the add's result (a reader
        // that got in since the load started a read phase).
        let free = |c: u64| c & blocked == 0 && readers_of(c) == 0;
        if !free(c) {
            return false;
        }
        let Some(old) = self.try_read_if(me, free) else {
            return false;
        };
        events::inc(Event::RwsemRlockSteal);
        #[cfg(loom)]
        Probe::hit(&self.probe.steals);
        if old & WAITERS != 0 {
            self.grant_front_readers();
        }
        true
    }

    /// Phase-fair readers: after quitting spinning, join the read phase of
    /// another reader that took the lock since we arrived, if the lock is
    /// still reader-owned.
    fn join_read_phase(&self, me: usize, last_reader: usize) -> bool {
        let o = self.owner.load(Relaxed);
        let hint = o & OWNER_MASK;
        if o & READER_OWNED == 0 || hint == 0 || hint == last_reader || hint == me {
            return false;
        }
        let c = self.count.load(Relaxed);
        if c & (WRITER_LOCKED | HANDOFF) != 0 || c & READER_MASK == 0 {
            return false;
        }
        if self.try_read_unqueued(me) {
            events::inc(Event::RwsemRlockRejoin);
            #[cfg(loom)]
            Probe::hit(&self.probe.rejoins);
            true
        } else {
            false
        }
    }

    /// Queue as a reader (first queued at `since`) and sleep until granted,
    /// woken to compete, or `deadline` passes.
    #[inline(never)]
    fn read_sleep(&self, me: usize, saw_rd: bool, since: u64, deadline: Option<u64>) -> ReadWait {
        let waiter = Waiter {
            state: AtomicU32::new(W_WAITING),
            links: Links::new(),
            id: me,
            role: Role::Reader,
            saw_rd,
            since,
            #[cfg(loom)]
            thread: loom::thread::current(),
        };
        let wp: *const Waiter = &waiter;

        self.wait_lock.lock();
        // SAFETY: we hold wait_lock.
        if unsafe { self.list_head() }.is_null() {
            // Nobody queued: take it now unless a writer holds or a
            // hand-off reserves it. Acquire: as try_read_unqueued.
            let mut c = self.count.load(Relaxed);
            while c & (WRITER_LOCKED | HANDOFF | READ_FAILED) == 0 {
                match self
                    .count
                    .compare_exchange_weak(c, c + READER_BIAS, Acquire, Relaxed)
                {
                    Ok(_) => {
                        // SAFETY: we hold wait_lock.
                        unsafe { self.wl_unlock() };
                        self.set_reader_owned(me);
                        events::inc(Event::RwsemRlockFast);
                        #[cfg(loom)]
                        Probe::hit(&self.probe.rlock_fast);
                        return ReadWait::Granted;
                    }
                    Err(now) => c = now,
                }
            }
        }
        // SAFETY (list accesses below): under wait_lock; `waiter` outlives
        // its membership (unlinked — by us or a granter — before we
        // return; unwinding aborts).
        let bomb = AbortOnUnwind("RwSem");
        if unsafe { self.list_push(wp) } {
            // First in the queue: tell write unlocks to grant us.
            self.front_reader.store(true, Relaxed);
            // Ordered with unlocks by the word's modification order (see
            // lock_sleep in mutex.rs: an unlock after this RMW sees WAITERS
            // and wakes; one before it is seen by the check below).
            // Release: publishes `front_reader` to the unlocker's fence.
            self.count.fetch_or(WAITERS, Release);
        }
        if self.count.load(Relaxed) & WRITER_LOCKED == 0 {
            // No writer: the front (maybe us) may go now.
            // SAFETY: we hold wait_lock.
            unsafe { self.wake_front(true) };
        }

        let woke = loop {
            // Holding wait_lock. Acquire pairs with the granter's Release swap.
            let st = waiter.state.load(Acquire);
            if st == W_GRANTED || st == W_RETRY {
                // SAFETY: we hold wait_lock.
                unsafe { self.wl_unlock() };
                break st;
            }
            if cfg!(any(debug_assertions, loom)) {
                assert!(
                    self.count.load(Relaxed) & WAITERS != 0,
                    "klock::RwSem: reader queued but WAITERS clear"
                );
            }
            if deadline.is_some_and(|d| monotonic_ns() >= d) {
                // SAFETY: we hold wait_lock and are linked.
                unsafe { self.leave(wp) };
                // SAFETY: we hold wait_lock.
                unsafe { self.wl_unlock() };
                core::mem::forget(bomb);
                return ReadWait::TimedOut;
            }
            // Re-arm (only granters change a reader's state, under wait_lock).
            waiter.state.store(W_WAITING, Relaxed);
            // SAFETY: we hold wait_lock.
            unsafe { self.wl_unlock() };
            self.park_counted(&waiter, deadline, Event::RwsemSleepReader);
            // Acquire: as above.
            let st = waiter.state.load(Acquire);
            if st == W_GRANTED || st == W_RETRY {
                // The granter touches our state word only under wait_lock
                // (it marks us there, after unlinking us) and wakes us
                // through the lock's `rgate`, so we may return at once.
                break st;
            }
            self.wait_lock.lock();
        };
        core::mem::forget(bomb);
        if woke == W_RETRY {
            return ReadWait::Retry;
        }
        events::inc(Event::RwsemRlock);
        ReadWait::Granted
    }

    // ------------------------------------------------------------------
    // Write side.
    // ------------------------------------------------------------------

    /// Acquire the write lock.
    #[inline]
    pub fn raw_lock_exclusive(&self) -> WriteGuard {
        let me = my_id();
        // (0,0,-) -> (0,1,-). Acquire pairs with the Release of the last unlock.
        if self
            .count
            .compare_exchange(0, WRITER_LOCKED, Acquire, Relaxed)
            .is_ok()
        {
            // Fast path: clears both nonspinnable bits.
            self.owner.store(me, Relaxed);
        } else {
            self.write_slow(me, None);
        }
        WriteGuard::new(me)
    }

    /// Take the write lock if it is free (and not reserved by a hand-off).
    #[inline]
    pub fn raw_try_lock_exclusive(&self) -> Option<WriteGuard> {
        let me = my_id();
        if self.try_write(false) {
            // Like the fast path: clears both nonspinnable bits.
            self.owner.store(me, Relaxed);
            Some(WriteGuard::new(me))
        } else {
            None
        }
    }

    /// Acquire the write lock unless `deadline_ns` passes first.
    pub fn raw_try_lock_exclusive_until_ns(&self, deadline_ns: u64) -> Option<WriteGuard> {
        let me = my_id();
        if self
            .count
            .compare_exchange(0, WRITER_LOCKED, Acquire, Relaxed)
            .is_ok()
        {
            self.owner.store(me, Relaxed);
            return Some(WriteGuard::new(me));
        }
        self.write_slow(me, Some(deadline_ns))
            .then(|| WriteGuard::new(me))
    }

    /// Release the write lock.
    ///
    /// # Safety
    /// `guard` comes from write-locking this lock, which is still held
    /// with it (debug builds check that a writer holds it).
    #[inline]
    pub unsafe fn raw_unlock_exclusive(&self, guard: WriteGuard) {
        let _ = guard;
        // Owner: drop the tid (and WR_NONSPINNABLE), keep RD_NONSPINNABLE.
        // We hold the lock, so only our own stores race with nothing.
        let o = self.owner.load(Relaxed);
        if o != o & RD_NONSPINNABLE {
            self.owner.store(o & RD_NONSPINNABLE, Relaxed);
        }
        if self.is_broken(broken::WAKE_WITHOUT_GRANT) {
            // Loom only: release first, wake (and grant) afterwards.
            let old = self.count.fetch_sub(WRITER_LOCKED, Release);
            if old & WAITERS != 0 {
                self.unlock_wake();
            }
            return;
        }
        // (0,1,F) -> (0,0,F) while WAITERS is clear: one CAS. Release
        // pairs with the next acquirer's Acquire. Anything else (waiters,
        // a lost race) goes to the slow path.
        let c = self.count.load(Relaxed);
        // Debug builds: a lock that is not write-locked goes to the slow
        // path, which reports the misuse.
        if c & WAITERS != 0
            || (cfg!(debug_assertions) && c & WRITER_LOCKED == 0)
            || self
                .count
                .compare_exchange(c, c.wrapping_sub(WRITER_LOCKED), Release, Relaxed)
                .is_err()
        {
            self.write_unlock_slow();
        }
    }

    /// Write unlock with waiters queued, or after the fast path's CAS lost
    /// a race. `(0,1,F) -> (0,0,F)` by CAS, only while WAITERS is clear: with
    /// waiters queued the unlock may have to grant the lock to readers at
    /// the front without ever letting it fall free (a writer could take it
    /// between a plain release and the wake-up), so it goes through
    /// wait_lock. Release pairs with the next acquirer's Acquire.
    #[cold]
    #[inline(never)]
    fn write_unlock_slow(&self) {
        let mut c = self.count.load(Relaxed);
        loop {
            if cfg!(debug_assertions) {
                assert!(
                    c & WRITER_LOCKED != 0,
                    "klock::RwSem: write unlock of a lock not write-locked (count {c:#x})"
                );
            }
            if c & WAITERS != 0 {
                // Through wait_lock only when a grant may be due: a reader
                // at the front (or readers may be granted past a front
                // writer). A writer at the front is woken after a plain
                // release, as before, without holding the lock longer.
                // Acquire fence: pairs with the Release `WAITERS` RMW of a
                // reader queueing first, so its `front_reader` is seen.
                fence(Acquire);
                if self.front_reader.load(Relaxed) || self.reader_wait() != u64::MAX {
                    self.write_unlock_queued();
                    return;
                }
                // (0,1,F) -> (0,0,F). Release as above. A front writer
                // already woken looks at the lock again after this RMW
                // (it clears WRITER_WOKEN with an RMW before its trylock):
                // no second wake-up, and no wait_lock round trip.
                let old = self.count.fetch_sub(WRITER_LOCKED, Release);
                if old & WRITER_WOKEN == 0 {
                    self.unlock_wake();
                }
                return;
            }
            match self
                .count
                .compare_exchange_weak(c, c - WRITER_LOCKED, Release, Relaxed)
            {
                Ok(_) => return,
                Err(now) => c = now,
            }
        }
    }

    /// Write unlock with waiters queued (the kernel's `rwsem_mark_wake`
    /// done at release time). Under `wait_lock`, still holding the lock:
    /// * readers at the front: our release and their grant are **one**
    ///   RMW, `(0,1,F) -> (n,0,F-HANDOFF[-W])`, so the lock never falls
    ///   free and no writer can slip in before the woken readers, who
    ///   return owning it;
    /// * a writer at the front: a plain release, then the writer is woken
    ///   to compete (writers may steal from writers; its `HANDOFF` bounds
    ///   that).
    #[cold]
    #[inline(never)]
    fn write_unlock_queued(&self) {
        self.wait_lock.lock();
        // SAFETY: we hold wait_lock; linked waiters are alive.
        let head = unsafe { self.list_head() };
        let reader = if head.is_null() || unsafe { &*head }.role == Role::Reader {
            head
        } else {
            // SAFETY: we hold wait_lock; head is linked.
            unsafe { self.starving_reader(head) }
        };
        if !reader.is_null() {
            // SAFETY: we hold wait_lock and the write lock; reader is the
            // first queued reader.
            unsafe { self.grant_readers(reader, true) };
            events::inc(if reader == head {
                Event::RwsemUnlockGrant
            } else {
                Event::RwsemUnlockGrantSkip
            });
        } else {
            // (0,1,F) -> (0,0,F). Release as in raw_unlock_exclusive.
            let old = self.count.fetch_sub(WRITER_LOCKED, Release);
            if cfg!(debug_assertions) {
                assert!(
                    old & WRITER_LOCKED != 0,
                    "klock::RwSem: write unlock of a lock not write-locked (count {old:#x})"
                );
            }
            // SAFETY: we hold wait_lock.
            unsafe { self.wake_front(true) };
        }
        // SAFETY: we hold wait_lock.
        unsafe { self.wl_unlock() };
    }

    /// Turn our write lock into a read lock, without letting any writer in
    /// between; queued readers at the front join us.
    ///
    /// # Safety
    /// As [`raw_unlock_exclusive`](Self::raw_unlock_exclusive).
    pub unsafe fn raw_downgrade(&self, guard: WriteGuard) -> ReadGuard {
        let o = self.owner.load(Relaxed);
        self.owner
            .store(guard.id | READER_OWNED | (o & RD_NONSPINNABLE), Relaxed);
        // (0,1,F) -> (1,0,F). Release: readers that join us (Acquire)
        // see what we wrote.
        let old = self.count.fetch_add(READER_BIAS - WRITER_LOCKED, Release);
        debug_assert!(old & WRITER_LOCKED != 0, "downgrade without the write lock");
        #[cfg(loom)]
        Probe::hit(&self.probe.downgrades);
        if old & WAITERS != 0 {
            self.grant_front_readers();
        }
        ReadGuard::new()
    }

    /// Write trylock: `(0,0,F) -> (0,1,F-HANDOFF)`; refused while readers or
    /// a writer hold it, or while `HANDOFF` reserves it for the first waiter
    /// (unless `first`: we are that waiter).
    #[inline]
    fn try_write(&self, first: bool) -> bool {
        let ignore_handoff = self.is_broken(broken::IGNORE_HANDOFF);
        let mut c = self.count.load(Relaxed);
        loop {
            if c & (WRITER_LOCKED | READER_MASK) != 0 {
                return false;
            }
            if c & HANDOFF != 0 && !first && !ignore_handoff {
                return false;
            }
            // Acquire pairs with the Release of the previous unlock (all
            // later writes are RMWs: the release sequence holds).
            match self.count.compare_exchange_weak(
                c,
                (c | WRITER_LOCKED) & !HANDOFF,
                Acquire,
                Relaxed,
            ) {
                Ok(_) => return true,
                Err(now) => c = now,
            }
        }
    }

    /// Contended write lock. `false` only when `deadline` passed.
    #[cold]
    #[inline(never)]
    fn write_slow(&self, me: usize, deadline: Option<u64>) -> bool {
        if cfg!(debug_assertions) && deadline.is_none() {
            let (c, o) = (self.count.load(Relaxed), self.owner.load(Relaxed));
            assert!(
                c & WRITER_LOCKED == 0 || o & !NONSPINNABLE != me,
                "klock::RwSem: thread {} write-locks a lock it already holds (deadlock)",
                tid_of(me)
            );
        }
        if self.try_write(false) {
            self.owner.store(me, Relaxed);
            return true;
        }
        if oncpu::spinning_useful()
            && self.can_spin(Role::Writer)
            && self.optimistic_spin(me, Role::Writer, false, deadline)
        {
            // Spinning worked: this locker saw no reason to stop readers.
            self.owner.store(me, Relaxed);
            return true;
        }
        let saw_wr = self.owner.load(Relaxed) & WR_NONSPINNABLE != 0;
        self.write_sleep(me, saw_wr, deadline)
    }

    /// Record the slow-path writer as owner: `me`, plus `RD_NONSPINNABLE`
    /// if it saw `WR_NONSPINNABLE` after failing to spin (adaptive on).
    fn set_writer_owned_slow(&self, me: usize, saw_wr: bool) {
        let rd = if saw_wr && self.adaptive_enabled() {
            #[cfg(loom)]
            Probe::hit(&self.probe.rd_set_by_writer);
            RD_NONSPINNABLE
        } else {
            0
        };
        self.owner.store(me | rd, Relaxed);
    }

    /// Queue as a writer: sleep until we own the lock (`true`) or
    /// `deadline` passes (`false`).
    #[inline(never)]
    fn write_sleep(&self, me: usize, saw_wr: bool, deadline: Option<u64>) -> bool {
        let waiter = Waiter {
            state: AtomicU32::new(W_WAITING),
            links: Links::new(),
            id: me,
            role: Role::Writer,
            saw_rd: false,
            since: 0,
            #[cfg(loom)]
            thread: loom::thread::current(),
        };
        let wp: *const Waiter = &waiter;
        let spin = oncpu::spinning_useful();

        self.wait_lock.lock();
        if self.try_write(false) {
            // SAFETY: we hold wait_lock.
            unsafe { self.wl_unlock() };
            self.set_writer_owned_slow(me, saw_wr);
            return true;
        }
        // SAFETY (list accesses below): as in read_sleep.
        let bomb = AbortOnUnwind("RwSem");
        if unsafe { self.list_push(wp) } {
            // First in the queue, a writer: as in read_sleep.
            self.front_reader.store(false, Relaxed);
            self.count.fetch_or(WAITERS, Release);
        }
        let start = monotonic_ns();
        let timeout = self.wait_timeout();
        let mut first = false;
        let mut handoff_set = false;

        let acquired = loop {
            // Holding wait_lock.
            if !first {
                first = unsafe { self.list_head() } == wp;
            }
            if cfg!(any(debug_assertions, loom)) {
                assert!(
                    self.count.load(Relaxed) & WAITERS != 0,
                    "klock::RwSem: writer queued but WAITERS clear"
                );
            }
            if first && !handoff_set && monotonic_ns().saturating_sub(start) >= timeout {
                // Relaxed: unlockers read it with their RMW and then
                // serialise with us on wait_lock.
                self.count.fetch_or(HANDOFF, Relaxed);
                handoff_set = true;
                events::inc(Event::RwsemWlockHandoff);
                #[cfg(loom)]
                Probe::hit(&self.probe.handoff_requests);
            }
            // Re-arm before the trylock: a later unlock wakes us (under
            // wait_lock, so after this store).
            waiter.state.store(W_WAITING, Relaxed);
            // Only the front writer is woken. Drop WRITER_WOKEN before the
            // trylock, by an RMW: an unlock ordered before it is seen by
            // the trylock, one after it sees the bit clear and wakes us.
            if first
                && self.count.load(Relaxed) & WRITER_WOKEN != 0
                && !self.is_broken(broken::WOKEN_NEVER_CLEARED)
            {
                self.count.fetch_and(!WRITER_WOKEN, Relaxed);
            }
            if self.try_write(first) {
                break true;
            }
            if deadline.is_some_and(|d| monotonic_ns() >= d) {
                break false;
            }
            // SAFETY: we hold wait_lock.
            unsafe { self.wl_unlock() };
            self.park_counted(&waiter, deadline, Event::RwsemSleepWriter);
            // Only the front waiter is ever woken; a woken writer is first
            // and stays first (waiters ahead can only leave).
            if !first && waiter.state.load(Relaxed) == W_WOKEN {
                first = true;
            }
            if first
                && (self.try_write(true)
                    || (spin && self.optimistic_spin(me, Role::Writer, true, deadline)))
            {
                self.wait_lock.lock();
                break true;
            }
            self.wait_lock.lock();
        };

        // Holding wait_lock: unlink ourselves.
        if acquired {
            // A HANDOFF of ours was cleared by our trylock's CAS; a
            // WRITER_WOKEN is ours (we are first) and goes now.
            let clear = if unsafe { self.list_remove(wp) } {
                WAITERS | HANDOFF | WRITER_WOKEN
            } else {
                WRITER_WOKEN
            };
            if self.count.load(Relaxed) & clear != 0 {
                // Relaxed: these flags only change under wait_lock.
                self.count.fetch_and(!clear, Relaxed);
            }
        } else {
            // SAFETY: we hold wait_lock and are linked.
            unsafe { self.leave(wp) };
            #[cfg(loom)]
            Probe::hit(&self.probe.timeouts);
        }
        // SAFETY: we hold wait_lock.
        unsafe { self.wl_unlock() };
        core::mem::forget(bomb);
        if acquired {
            self.set_writer_owned_slow(me, saw_wr);
            events::inc(Event::RwsemWlock);
        }
        acquired
    }

    // ------------------------------------------------------------------
    // Spinning.
    // ------------------------------------------------------------------

    /// Whether a `role` locker may start spinning: no nonspinnable bit for
    /// its role, and a writer owner not known to be off CPU.
    fn can_spin(&self, role: Role) -> bool {
        let o = self.owner.load(Relaxed);
        let bit = if role == Role::Writer {
            WR_NONSPINNABLE
        } else {
            RD_NONSPINNABLE
        };
        if o & bit != 0 {
            return false;
        }
        let c = self.count.load(Relaxed);
        if c & WRITER_LOCKED != 0 && o & READER_OWNED == 0 && o & OWNER_MASK != 0 {
            return oncpu::oracle().owner_running(tid_of(o & OWNER_MASK)) != Some(false);
        }
        true
    }

    /// Set both nonspinnable bits, only while the lock is reader-owned.
    /// Returns whether this call set them.
    fn set_nonspinnable(&self) -> bool {
        let mut o = self.owner.load(Relaxed);
        loop {
            if o & READER_OWNED == 0 || o & NONSPINNABLE == NONSPINNABLE {
                return false;
            }
            let c = self.count.load(Relaxed);
            if c & WRITER_LOCKED != 0 || c & READER_MASK == 0 {
                return false;
            }
            // Relaxed: a hint. The CAS fails if any owner changed it.
            match self
                .owner
                .compare_exchange_weak(o, o | NONSPINNABLE, Relaxed, Relaxed)
            {
                Ok(_) => {
                    #[cfg(loom)]
                    Probe::hit(&self.probe.nospin_sets);
                    return true;
                }
                Err(now) => o = now,
            }
        }
    }

    /// Optimistic spinning. New lockers (`queued == false`) go through the
    /// OSQ; a woken first waiter (a writer, `queued == true`) spins
    /// directly and may take a `HANDOFF`-reserved lock, but only on a
    /// writer owner. Returns whether we got the lock (owner word not yet
    /// updated by us, except for readers).
    #[inline(never)]
    fn optimistic_spin(&self, me: usize, role: Role, queued: bool, deadline: Option<u64>) -> bool {
        let oracle = oncpu::oracle();
        let slot = if queued {
            None
        } else {
            match thread::current() {
                Some(s) => Some(s),
                None => return false,
            }
        };
        let nonspin = if role == Role::Writer {
            WR_NONSPINNABLE
        } else {
            RD_NONSPINNABLE
        };
        let budget = self.spin.budget_ns();
        oracle.spin_begin();
        let start = monotonic_ns();
        let total_end = start.saturating_add(budget.saturating_mul(MAX_OWNER_BUDGETS));
        let mut owner_end = start.saturating_add(budget);
        let past_deadline = |now: u64| deadline.is_some_and(|d| now >= d);

        if let Some(slot) = slot {
            let mut n = 0u32;
            let head = self.osq.lock_with(slot, || {
                n = n.wrapping_add(1);
                if !crate::spin::clock_due(n) {
                    return false;
                }
                if oracle.should_yield() {
                    return true;
                }
                let now = monotonic_ns();
                now >= owner_end || past_deadline(now)
            });
            if !head {
                events::inc(Event::RwsemOptFail);
                return false;
            }
        }

        let mut last_owner = usize::MAX;
        let mut running = None;
        // Some(end) while a writer spins on a reader-owned lock.
        let mut reader_phase_end: Option<u64> = None;
        let mut i = 0u32;
        let result = loop {
            let c = self.count.load(Relaxed);
            let o = self.owner.load(Relaxed);
            if o & nonspin != 0 {
                break Err(SpinFail::NotSpinnable);
            }
            if c & HANDOFF != 0 && !queued {
                // Reserved for the first waiter: spinning cannot win.
                break Err(SpinFail::NotSpinnable);
            }
            let got = match role {
                Role::Writer => c & (WRITER_LOCKED | READER_MASK) == 0 && self.try_write(queued),
                Role::Reader => c & (WRITER_LOCKED | HANDOFF) == 0 && self.try_read_unqueued(me),
            };
            if got {
                break Ok(());
            }
            i = i.wrapping_add(1);
            let due = crate::spin::clock_due(i);
            if c & WRITER_LOCKED != 0 {
                reader_phase_end = None;
                let owner = if o & READER_OWNED == 0 {
                    o & OWNER_MASK
                } else {
                    0
                };
                if owner != 0 && owner != last_owner {
                    if last_owner != usize::MAX {
                        // The lock moved on: a fresh budget for the new owner.
                        owner_end = monotonic_ns().saturating_add(budget).min(total_end);
                    }
                    last_owner = owner;
                    running = oracle.owner_running(tid_of(owner));
                    if running == Some(false) {
                        break Err(SpinFail::NotSpinnable);
                    }
                }
                if due {
                    if oracle.should_yield() {
                        break Err(SpinFail::Budget);
                    }
                    if owner != 0 {
                        running = oracle.owner_running(tid_of(owner));
                        if running == Some(false) {
                            break Err(SpinFail::NotSpinnable);
                        }
                    }
                    let now = monotonic_ns();
                    if past_deadline(now) || (running != Some(true) && now >= owner_end) {
                        break Err(SpinFail::Budget);
                    }
                }
            } else if c & READER_MASK != 0 && role == Role::Writer {
                if queued {
                    // The first waiter sleeps through read phases: the
                    // last reader wakes it.
                    break Err(SpinFail::Budget);
                }
                match reader_phase_end {
                    None => {
                        // A new read phase: a fresh threshold.
                        reader_phase_end =
                            Some(monotonic_ns().saturating_add(rspin_threshold_ns(readers_of(c))));
                    }
                    Some(end) if due => {
                        if oracle.should_yield() {
                            break Err(SpinFail::Budget);
                        }
                        let now = monotonic_ns();
                        if past_deadline(now) {
                            break Err(SpinFail::Budget);
                        }
                        if now >= end {
                            if self.set_nonspinnable() {
                                events::inc(Event::RwsemOptNospin);
                            }
                            break Err(SpinFail::ReaderTimeout);
                        }
                    }
                    Some(_) => {}
                }
            } else if due {
                // Free but another thread was quicker (or a reader probe
                // lost a race): retry within the total budget.
                if oracle.should_yield() {
                    break Err(SpinFail::Budget);
                }
                let now = monotonic_ns();
                if past_deadline(now) || now >= total_end {
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
                events::inc(Event::RwsemOptLock);
                #[cfg(loom)]
                Probe::hit(&self.probe.spin_successes);
                true
            }
            Err(f) => {
                let _ = f;
                events::inc(Event::RwsemOptFail);
                false
            }
        }
    }

    // ------------------------------------------------------------------
    // Wait list.
    // ------------------------------------------------------------------

    /// The wait timeout for this lock.
    #[inline]
    fn wait_timeout(&self) -> u64 {
        #[cfg(loom)]
        return crate::sync::loom_tunable(&self.loom_wait_timeout_ns, wait_timeout_ns);
        #[cfg(not(loom))]
        wait_timeout_ns()
    }

    /// The reader grant bound for this lock.
    #[inline]
    fn reader_grant(&self) -> u64 {
        #[cfg(loom)]
        return crate::sync::loom_tunable(&self.loom_reader_grant_ns, reader_grant_ns);
        #[cfg(not(loom))]
        reader_grant_ns()
    }

    /// The reader wait bound for this lock.
    #[inline]
    fn reader_wait(&self) -> u64 {
        #[cfg(loom)]
        return crate::sync::loom_tunable(&self.loom_reader_wait_ns, reader_wait_ns);
        #[cfg(not(loom))]
        reader_wait_ns()
    }

    /// [`park`] `waiter`, counting a real sleep as `sleep_event` (and, under
    /// loom, tracking the threads between leaving wait_lock and parking).
    #[inline]
    fn park_counted(&self, waiter: &Waiter, deadline: Option<u64>, sleep_event: Event) {
        #[cfg(loom)]
        Probe::hit(&self.probe.parking);
        let gate = (waiter.role == Role::Reader).then_some(&self.rgate);
        let slept = park(waiter, gate, deadline);
        #[cfg(loom)]
        self.probe
            .parking
            .fetch_sub(1, core::sync::atomic::Ordering::Relaxed);
        if slept {
            events::inc(sleep_event);
            #[cfg(loom)]
            Probe::hit(&self.probe.sleeps);
        }
    }

    /// An unlock found `WAITERS` with the lock free of holders.
    #[cold]
    #[inline(never)]
    fn unlock_wake(&self) {
        self.wait_lock.lock();
        // SAFETY: we hold wait_lock.
        unsafe { self.wake_front(true) };
        // SAFETY: we hold wait_lock.
        unsafe { self.wl_unlock() };
    }

    /// Let the front of the queue go, if it can:
    /// * a writer at the front is woken (if `wake_writer`) when no one
    ///   holds the lock; it takes the lock itself;
    /// * readers at the front: all queued readers (skipping writers, at
    ///   most [`MAX_READERS_WAKEUP`]) are granted the lock in one CAS —
    ///   unless a writer holds it, in which case a front reader that has
    ///   waited too long requests a hand-off.
    ///
    /// # Safety
    /// The caller holds wait_lock.
    unsafe fn wake_front(&self, wake_writer: bool) {
        // SAFETY: caller holds wait_lock; linked waiters are alive.
        let head = unsafe { self.list_head() };
        if head.is_null() {
            return;
        }
        let h = unsafe { &*head };
        if h.role == Role::Writer {
            if wake_writer && self.count.load(Relaxed) & (WRITER_LOCKED | READER_MASK) == 0 {
                self.wake(h);
            }
            return;
        }
        // SAFETY: caller holds wait_lock; head is linked.
        unsafe { self.grant_readers(head, false) };
    }

    /// Grant the lock to the readers queued from `head` (the first queued
    /// reader; only a write unlock passes one behind a writer) on: all
    /// queued readers, skipping writers, at most [`MAX_READERS_WAKEUP`],
    /// with one CAS on the count; then unlink them and mark them granted
    /// (their futex wake-ups go out after `wait_lock` is released).
    ///
    /// `unlocking`: the caller holds the write lock and releases it in the
    /// same CAS (write unlock, `(0,1,F) -> (n,0,F')`). Otherwise the lock
    /// must be free of writers: if a writer holds it nothing is granted,
    /// and a front reader that has waited too long requests a hand-off.
    ///
    /// # Safety
    /// The caller holds wait_lock (and, if `unlocking`, the write lock);
    /// `head` is the linked first waiter, a reader.
    unsafe fn grant_readers(&self, head: *const Waiter, unlocking: bool) {
        // SAFETY: caller's contract.
        let h = unsafe { &*head };
        // Readers to grant, and whether anybody stays queued.
        let cap = if self.is_broken(broken::GRANT_ONE_READER) {
            1
        } else {
            MAX_READERS_WAKEUP
        };
        // SAFETY: caller holds wait_lock.
        let (mut n, mut others) = (0u64, head != unsafe { self.list_head() });
        let mut p = head;
        while !p.is_null() {
            // SAFETY: linked waiters are alive.
            let w = unsafe { &*p };
            if w.role == Role::Reader && n < cap {
                n += 1;
            } else {
                others = true;
            }
            p = w.links.next();
        }
        // Grant (hand the lock over) only to readers that have waited their
        // bound, or past a front writer; younger ones are woken to compete.
        let skip = head != unsafe { self.list_head() };
        let due = skip || monotonic_ns().saturating_sub(h.since) >= self.reader_grant();
        let mut c = self.count.load(Relaxed);
        let grant = loop {
            if unlocking {
                if cfg!(debug_assertions) {
                    assert!(
                        c & WRITER_LOCKED != 0,
                        "klock::RwSem: write unlock of a lock not write-locked (count {c:#x})"
                    );
                }
            } else if c & WRITER_LOCKED != 0 {
                if c & HANDOFF == 0 && monotonic_ns().saturating_sub(h.since) >= self.wait_timeout()
                {
                    // Relaxed: as the writer's hand-off request.
                    self.count.fetch_or(HANDOFF, Relaxed);
                    events::inc(Event::RwsemRlockHandoff);
                    #[cfg(loom)]
                    Probe::hit(&self.probe.handoff_requests);
                }
                return;
            }
            // A reader's hand-off request (HANDOFF with a reader at the
            // front) is always answered with a grant.
            let grant = due || c & HANDOFF != 0;
            let mut new = if grant {
                c.wrapping_add(n * READER_BIAS) & !HANDOFF
            } else {
                c
            };
            if unlocking {
                new &= !WRITER_LOCKED;
            }
            if !others {
                new &= !WAITERS;
            }
            if new == c {
                // Waking to compete with others still queued: no change.
                break grant;
            }
            // Unlocking: Release (our write section) pairs with the Acquire
            // of the next writer, through the readers' release sequence.
            // A grant otherwise: Acquire (for the readers we grant) pairs
            // with the Release of the last write unlock. Either way the
            // grantees synchronise with us through their state words.
            // Waking to compete without unlocking only drops WAITERS:
            // Relaxed (it changes under wait_lock; the woken readers'
            // own probes acquire).
            let ord = if unlocking {
                Release
            } else if grant {
                Acquire
            } else {
                Relaxed
            };
            match self.count.compare_exchange_weak(c, new, ord, Relaxed) {
                Ok(_) => break grant,
                Err(now) => c = now,
            }
        };
        if !grant {
            // SAFETY: caller holds wait_lock; head is linked.
            unsafe { self.wake_readers_to_compete(head, n) };
            return;
        }
        // Owner hint: the first grantee; RD_NONSPINNABLE if it saw it at
        // slow-path entry (adaptive), else cleared.
        let rd = if h.saw_rd && self.adaptive_enabled() {
            #[cfg(loom)]
            Probe::hit(&self.probe.rd_set_by_reader);
            RD_NONSPINNABLE
        } else {
            0
        };
        self.owner.store(h.id | READER_OWNED | rd, Relaxed);
        // Unlink and grant.
        let mut p = head;
        let mut granted = 0;
        let mut asleep = false;
        while !p.is_null() && granted < n {
            // SAFETY: linked waiters are alive. A granted reader may return
            // as soon as it sees W_GRANTED, so the swap below is our last
            // access to it; sleepers are woken through `rgate`, after
            // wait_lock is released (wake_later_n).
            let w = unsafe { &*p };
            let next = w.links.next();
            if w.role == Role::Reader {
                unsafe { self.list_remove(p) };
                #[cfg(loom)]
                let t = w.thread.clone();
                // Release pairs with the reader's Acquire load of its state.
                asleep |= w.state.swap(W_GRANTED, Release) == W_PARKED;
                #[cfg(loom)]
                t.unpark();
                granted += 1;
            }
            p = next;
        }
        if asleep {
            // After every mark: a sleeper that read the gate before this
            // bump finds it changed or is woken (Release pairs with its
            // Acquire gate load in `park`). One FUTEX_WAKE for the group,
            // not one per reader (see the module docs).
            self.rgate.fetch_add(1, Release);
            wake_later_n(futex_addr(&self.rgate), u32::MAX >> 1);
        }
        events::add(Event::RwsemWakeReaders, n);
        #[cfg(loom)]
        {
            Probe::hit(&self.probe.grants);
            self.probe
                .max_group
                .fetch_max(n as u32, core::sync::atomic::Ordering::Relaxed);
        }
    }

    /// Unlink the first `n` queued readers from `head` on and wake them to
    /// compete for the lock (state `W_RETRY`), without granting it: the
    /// lock stays with threads that run, instead of being held for readers
    /// until the scheduler gets to them.
    ///
    /// # Safety
    /// The caller holds wait_lock; `head` is a linked reader.
    unsafe fn wake_readers_to_compete(&self, head: *const Waiter, n: u64) {
        let mut p = head;
        let mut woken = 0;
        let mut asleep = false;
        while !p.is_null() && woken < n {
            // SAFETY: linked waiters are alive; as in grant_readers, the
            // swap is our last access to a reader.
            let w = unsafe { &*p };
            let next = w.links.next();
            if w.role == Role::Reader {
                unsafe { self.list_remove(p) };
                woken += 1;
                if self.is_broken(broken::COMPETE_NO_WAKE) {
                    p = next;
                    continue;
                }
                #[cfg(loom)]
                let t = w.thread.clone();
                // Release pairs with the reader's Acquire load of its state
                // (it learns it was unlinked).
                asleep |= w.state.swap(W_RETRY, Release) == W_PARKED;
                #[cfg(loom)]
                t.unpark();
            }
            p = next;
        }
        if asleep {
            // As in grant_readers: one FUTEX_WAKE for the group.
            self.rgate.fetch_add(1, Release);
            wake_later_n(futex_addr(&self.rgate), u32::MAX >> 1);
        }
        events::add(Event::RwsemWakeCompete, n);
        #[cfg(loom)]
        Probe::hit(&self.probe.compete_wakes);
    }

    /// The first queued reader, if a writer is at the front (`head`),
    /// that writer has not demanded a hand-off, and the reader has waited
    /// at least [`reader_wait_ns`] (at most [`wait_timeout_ns`]); else null.
    /// A write unlock then grants the readers past that writer: writers
    /// stealing the lock from the front writer would otherwise starve every
    /// reader behind it until the front writer's own wait timeout.
    ///
    /// # Safety
    /// The caller holds wait_lock; `head` is the linked first waiter.
    unsafe fn starving_reader(&self, head: *const Waiter) -> *const Waiter {
        if self.is_broken(broken::NO_READER_BOUND) || self.count.load(Relaxed) & HANDOFF != 0 {
            return core::ptr::null();
        }
        // SAFETY: caller's contract; linked waiters are alive.
        let mut p = unsafe { &*head }.links.next();
        while !p.is_null() {
            // SAFETY: as above.
            let w = unsafe { &*p };
            if w.role == Role::Reader {
                let bound = self.wait_timeout().min(self.reader_wait());
                if monotonic_ns().saturating_sub(w.since) >= bound {
                    return p;
                }
                break;
            }
            p = w.links.next();
        }
        core::ptr::null()
    }

    /// Wake writer `w` (under wait_lock: it cannot unlink and vanish).
    fn wake(&self, w: &Waiter) {
        // Unlocks stop waking it until it clears the bit (write_sleep).
        // Relaxed: set and cleared under wait_lock; unlockers read it in
        // their own RMW.
        if self.count.load(Relaxed) & WRITER_WOKEN == 0 {
            self.count.fetch_or(WRITER_WOKEN, Relaxed);
        }
        // Release pairs with the waiter's Acquire load in park.
        if w.state.swap(W_WOKEN, Release) == W_PARKED {
            events::inc(Event::RwsemWakeWriter);
            #[cfg(loom)]
            Probe::hit(&self.probe.wakes_of_sleepers);
            wake_later(futex_addr(&w.state));
        }
        #[cfg(loom)]
        w.thread.unpark();
    }

    /// A waiter gives up: unlink it, drop the flags it owned, let the new
    /// front go.
    ///
    /// # Safety
    /// The caller holds wait_lock and `w` is linked.
    unsafe fn leave(&self, w: *const Waiter) {
        let was_first = unsafe { self.list_head() } == w;
        if unsafe { self.list_remove(w) } {
            // Relaxed: these flags only change under wait_lock.
            self.count
                .fetch_and(!(WAITERS | HANDOFF | WRITER_WOKEN), Relaxed);
        } else if was_first {
            // A HANDOFF or WRITER_WOKEN belonged to the leaving first waiter.
            self.count.fetch_and(!(HANDOFF | WRITER_WOKEN), Relaxed);
            #[cfg(loom)]
            Probe::hit(&self.probe.wake_next_on_leave);
            unsafe { self.wake_front(true) };
        }
    }

    /// Release wait_lock, then send the wake-ups queued by `wake_later`.
    ///
    /// # Safety
    /// The caller holds wait_lock.
    #[inline]
    unsafe fn wl_unlock(&self) {
        // The front may have changed under wait_lock: refresh the hint.
        // SAFETY: we hold wait_lock; linked waiters are alive.
        let head = unsafe { self.list_head() };
        let reader = !head.is_null() && unsafe { &*head }.role == Role::Reader;
        if self.front_reader.load(Relaxed) != reader {
            self.front_reader.store(reader, Relaxed);
        }
        // SAFETY: forwarded contract.
        unsafe { self.wait_lock.unlock() };
        wake_pending();
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

    // ------------------------------------------------------------------
    // Introspection.
    // ------------------------------------------------------------------

    /// Held by anyone (readers or a writer). A snapshot.
    #[inline]
    pub fn is_held(&self) -> bool {
        self.count.load(Relaxed) & (WRITER_LOCKED | READER_MASK) != 0
    }

    /// Held by a writer. A snapshot.
    #[inline]
    pub fn is_write_held(&self) -> bool {
        self.count.load(Relaxed) & WRITER_LOCKED != 0
    }

    /// The raw count word, for tests and debugging.
    #[doc(hidden)]
    pub fn count_word(&self) -> u64 {
        self.count.load(Relaxed)
    }

    /// The raw owner word, for tests and debugging.
    #[doc(hidden)]
    pub fn owner_word(&self) -> usize {
        self.owner.load(Relaxed)
    }

    /// This lock's adaptive spin statistics (spins on writers).
    pub fn spin_stats(&self) -> &SpinStats {
        &self.spin
    }
}

/// Sleep until `w`'s state leaves `W_PARKED` or `deadline` passes.
/// Returns whether we slept at all. A writer sleeps on its state word; a
/// reader on `gate`, the lock's `rgate`, which a grant bumps after marking
/// its readers, so that one `FUTEX_WAKE` wakes them all.
///
/// Under loom an untimed waiter blocks in `loom::thread::park` (wakers
/// unpark it through a cloned handle) instead of a futex wait, which loom
/// models as a yield: two yielding waiters could otherwise be scheduled
/// against each other forever while the waker stays preempted, which loom
/// reports as a failure although no real schedule does that.
fn park(w: &Waiter, gate: Option<&AtomicU32>, deadline: Option<u64>) -> bool {
    // W_WAITING -> W_PARKED; fails if a waker already changed it.
    if w.state
        .compare_exchange(W_WAITING, W_PARKED, Relaxed, Relaxed)
        .is_err()
    {
        return false;
    }
    loop {
        // The gate before the state: if the state below still says
        // parked, our grant's bump comes later and changes the gate from
        // the value read here (Acquire pairs with the bump's Release:
        // having seen a bump, we see the marks made before it).
        let gate_now = gate.map(|g| (g, g.load(Acquire)));
        // Acquire pairs with the waker's Release swap.
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
        #[cfg(loom)]
        if timeout.is_none() {
            loom::thread::park();
            continue;
        }
        // Spurious returns are fine: we re-check the state.
        match gate_now {
            Some((word, seen)) => sys::futex_wait(word, seen, timeout),
            None => sys::futex_wait(&w.state, W_PARKED, timeout),
        };
    }
}

impl<const R: u8, const A: u8, W: WaitLockRaw> Default for RawRwSemWith<R, A, W> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const R: u8, const A: u8, W: WaitLockRaw> core::fmt::Debug for RawRwSemWith<R, A, W> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let c = self.count.load(Relaxed);
        let o = self.owner.load(Relaxed);
        f.debug_struct("RawRwSem")
            .field("reader_spin", &self.reader_spin_enabled())
            .field("adaptive", &self.adaptive_enabled())
            .field("readers", &readers_of(c))
            .field("writer_locked", &(c & WRITER_LOCKED != 0))
            .field("waiters", &(c & WAITERS != 0))
            .field("handoff", &(c & HANDOFF != 0))
            .field("owner_tid", &tid_of(o & OWNER_MASK))
            .field("reader_owned", &(o & READER_OWNED != 0))
            .field("rd_nonspinnable", &(o & RD_NONSPINNABLE != 0))
            .field("wr_nonspinnable", &(o & WR_NONSPINNABLE != 0))
            .finish()
    }
}

// SAFETY: readers/writer exclusion as argued in the module docs (and
// checked by the loom models); every lock path acquires, every unlock
// releases.
#[cfg(not(loom))]
unsafe impl<const R: u8, const A: u8, W: WaitLockRaw> lock_api::RawRwLock
    for RawRwSemWith<R, A, W>
{
    #[allow(clippy::declare_interior_mutable_const)]
    const INIT: Self = Self::new();
    type SharedGuard = ReadGuard;
    type ExclusiveGuard = WriteGuard;

    #[inline]
    fn lock_shared(&self) -> ReadGuard {
        self.raw_lock_shared()
    }

    #[inline]
    fn try_lock_shared(&self) -> Option<ReadGuard> {
        self.raw_try_lock_shared()
    }

    #[inline]
    unsafe fn unlock_shared(&self, _guard: ReadGuard) {
        // SAFETY: forwarded contract.
        unsafe { self.raw_unlock_shared() }
    }

    #[inline]
    fn lock_exclusive(&self) -> WriteGuard {
        self.raw_lock_exclusive()
    }

    #[inline]
    fn try_lock_exclusive(&self) -> Option<WriteGuard> {
        self.raw_try_lock_exclusive()
    }

    #[inline]
    unsafe fn unlock_exclusive(&self, guard: WriteGuard) {
        // SAFETY: forwarded contract.
        unsafe { self.raw_unlock_exclusive(guard) }
    }

    #[inline]
    fn is_locked(&self) -> bool {
        self.is_held()
    }

    #[inline]
    fn is_locked_exclusive(&self) -> bool {
        self.is_write_held()
    }
}

// SAFETY: the write lock becomes a read lock in one RMW; no writer can
// get in between.
#[cfg(not(loom))]
unsafe impl<const R: u8, const A: u8, W: WaitLockRaw> lock_api::RawRwLockDowngrade
    for RawRwSemWith<R, A, W>
{
    #[inline]
    unsafe fn downgrade(&self, guard: WriteGuard) -> ReadGuard {
        // SAFETY: forwarded contract.
        unsafe { self.raw_downgrade(guard) }
    }
}

// SAFETY: a timed-out attempt owns nothing and has left every queue.
#[cfg(not(loom))]
unsafe impl<const R: u8, const A: u8, W: WaitLockRaw> lock_api::RawRwLockTimed
    for RawRwSemWith<R, A, W>
{
    type Duration = Duration;
    type Instant = std::time::Instant;

    fn try_lock_shared_for(&self, timeout: Duration) -> Option<ReadGuard> {
        self.raw_try_lock_shared_until_ns(sys::deadline_after(timeout))
    }

    fn try_lock_shared_until(&self, timeout: std::time::Instant) -> Option<ReadGuard> {
        let left = timeout.saturating_duration_since(std::time::Instant::now());
        self.raw_try_lock_shared_until_ns(sys::deadline_after(left))
    }

    fn try_lock_exclusive_for(&self, timeout: Duration) -> Option<WriteGuard> {
        self.raw_try_lock_exclusive_until_ns(sys::deadline_after(timeout))
    }

    fn try_lock_exclusive_until(&self, timeout: std::time::Instant) -> Option<WriteGuard> {
        let left = timeout.saturating_duration_since(std::time::Instant::now());
        self.raw_try_lock_exclusive_until_ns(sys::deadline_after(left))
    }
}

/// Loom-only record of the rare paths one model execution took.
#[cfg(loom)]
#[derive(Debug, Default)]
#[doc(hidden)]
pub struct Probe {
    pub spin_successes: std::sync::atomic::AtomicU32,
    pub nospin_sets: std::sync::atomic::AtomicU32,
    pub norspins: std::sync::atomic::AtomicU32,
    pub rd_set_by_writer: std::sync::atomic::AtomicU32,
    pub rd_set_by_reader: std::sync::atomic::AtomicU32,
    pub rejoins: std::sync::atomic::AtomicU32,
    pub steals: std::sync::atomic::AtomicU32,
    pub rlock_fast: std::sync::atomic::AtomicU32,
    pub grants: std::sync::atomic::AtomicU32,
    /// Largest number of readers granted by one wake-up.
    pub max_group: std::sync::atomic::AtomicU32,
    pub handoff_requests: std::sync::atomic::AtomicU32,
    pub sleeps: std::sync::atomic::AtomicU32,
    pub wakes_of_sleepers: std::sync::atomic::AtomicU32,
    pub timeouts: std::sync::atomic::AtomicU32,
    pub wake_next_on_leave: std::sync::atomic::AtomicU32,
    pub downgrades: std::sync::atomic::AtomicU32,
    /// Wake-ups of readers to compete (not granted).
    pub compete_wakes: std::sync::atomic::AtomicU32,
    /// Woken readers that won the lock.
    pub woken_wins: std::sync::atomic::AtomicU32,
    /// Woken readers that lost it and queued again.
    pub requeues: std::sync::atomic::AtomicU32,
    /// Waiters between releasing wait_lock and returning from `park` now
    /// (a gauge, not a path count).
    pub parking: std::sync::atomic::AtomicU32,
}

#[cfg(loom)]
impl Probe {
    fn hit(c: &std::sync::atomic::AtomicU32) {
        c.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}

#[cfg(loom)]
impl<const R: u8, const A: u8, W: WaitLockRaw> RawRwSemWith<R, A, W> {
    /// Loom only: paths this lock's executions went through.
    #[doc(hidden)]
    pub fn probe(&self) -> &Probe {
        &self.probe
    }

    /// Loom only: this lock's wait timeout (see [`set_wait_timeout_ns`]).
    #[doc(hidden)]
    pub fn set_loom_wait_timeout_ns(&self, ns: u64) {
        self.loom_wait_timeout_ns
            .store(ns, core::sync::atomic::Ordering::Relaxed);
    }

    /// Loom only: make the lock deliberately wrong (see [`broken`]).
    #[doc(hidden)]
    pub fn set_loom_broken(&self, mode: u8) {
        self.loom_broken
            .store(mode, core::sync::atomic::Ordering::Relaxed);
    }

    /// Loom only: set owner-word bits (to start a model from a state).
    #[doc(hidden)]
    pub fn loom_set_owner(&self, v: usize) {
        self.owner.store(v, Relaxed);
    }

    /// Loom only: whether the wait list is empty (takes wait_lock).
    #[doc(hidden)]
    pub fn wait_list_is_empty(&self) -> bool {
        self.wait_lock.lock();
        // SAFETY: we hold wait_lock.
        let empty = unsafe { self.list_head() }.is_null();
        // SAFETY: we hold wait_lock.
        unsafe { self.wl_unlock() };
        empty
    }

    /// Loom only: this lock's reader wait bound (see [`set_reader_wait_ns`]).
    #[doc(hidden)]
    pub fn set_loom_reader_wait_ns(&self, ns: u64) {
        self.loom_reader_wait_ns
            .store(ns, core::sync::atomic::Ordering::Relaxed);
    }

    /// Loom only: this lock's reader grant bound (see [`set_reader_grant_ns`]).
    #[doc(hidden)]
    pub fn set_loom_reader_grant_ns(&self, ns: u64) {
        self.loom_reader_grant_ns
            .store(ns, core::sync::atomic::Ordering::Relaxed);
    }

    /// Loom only: how many waiters have released wait_lock to park and not
    /// yet returned from parking (read without any lock, so a model waiting
    /// on it adds no lock spins).
    #[doc(hidden)]
    pub fn waiters_parking(&self) -> u32 {
        self.probe
            .parking
            .load(core::sync::atomic::Ordering::Relaxed)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use lock_api::{RawRwLock as _, RawRwLockDowngrade as _, RawRwLockTimed as _};
    use std::time::Instant;

    /// Debug builds report a write unlock of a lock nobody write-locked
    /// (the fast path sends it to the checking slow path).
    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "write unlock of a lock not write-locked")]
    fn debug_write_unlock_of_unlocked_lock_panics() {
        let (held, free) = (RawRwSem::new(), RawRwSem::new());
        let g = held.lock_exclusive();
        // SAFETY: deliberately wrong (the guard is `held`'s); the debug
        // check panics before anything is written.
        unsafe { free.unlock_exclusive(g) };
    }

    type Spin = RawRwSemWith<ON, ON>;
    type NoSpin = RawRwSemWith<OFF, OFF>;

    #[test]
    fn word_layout() {
        assert_eq!(READER_MASK >> READER_SHIFT, (1 << 55) - 1);
        assert_eq!(
            READER_MASK & (WRITER_LOCKED | WAITERS | HANDOFF | WRITER_WOKEN | READ_FAILED),
            0
        );
        assert_eq!(OWNER_FLAGS, 0b111);
        assert_eq!(OWNER_MASK & OWNER_FLAGS, 0);
        assert_eq!(tid_of(((1usize << 22) - 1) << OWNER_SHIFT), (1 << 22) - 1);
    }

    #[test]
    fn rspin_threshold_matches_the_seed() {
        assert_eq!(rspin_threshold_ns(0), 10_000);
        assert_eq!(rspin_threshold_ns(2), 11_000);
        assert_eq!(rspin_threshold_ns(30), 25_000);
        assert_eq!(rspin_threshold_ns(1000), 25_000);
    }

    #[test]
    fn read_write_try_downgrade() {
        let l = Spin::INIT;
        let r1 = l.lock_shared();
        let r2 = l.lock_shared();
        assert!(l.is_locked() && !l.is_locked_exclusive());
        assert_eq!(readers_of(l.count_word()), 2);
        assert!(l.try_lock_exclusive().is_none());
        assert_eq!(l.owner_word() & READER_OWNED, READER_OWNED);
        unsafe {
            l.unlock_shared(r1);
            l.unlock_shared(r2);
        }
        assert_eq!(l.count_word(), 0);
        let w = l.lock_exclusive();
        assert!(l.is_locked_exclusive());
        assert_eq!(l.owner_word(), my_id());
        assert!(l.try_lock_shared().is_none());
        let r = unsafe { l.downgrade(w) };
        assert_eq!(l.count_word(), READER_BIAS);
        assert!(l.try_lock_exclusive().is_none());
        let r2 = l.try_lock_shared().unwrap();
        unsafe {
            l.unlock_shared(r);
            l.unlock_shared(r2);
        }
        assert_eq!(l.count_word(), 0);
        let w = l.try_lock_exclusive_for(Duration::from_millis(1)).unwrap();
        assert!(format!("{l:?}").contains("writer_locked: true"));
        unsafe { l.unlock_exclusive(w) };
    }

    #[test]
    fn fast_path_writer_clears_nonspinnable_and_readers_keep_rd() {
        let l = Spin::new();
        l.owner
            .store(77 << OWNER_SHIFT | READER_OWNED | NONSPINNABLE, Relaxed);
        let r = l.lock_shared();
        // A reader drops WR_NONSPINNABLE, keeps RD_NONSPINNABLE.
        assert_eq!(l.owner_word(), my_id() | READER_OWNED | RD_NONSPINNABLE);
        unsafe { l.unlock_shared(r) };
        let w = l.lock_exclusive();
        assert_eq!(l.owner_word(), my_id(), "fast-path writer clears both bits");
        unsafe { l.unlock_exclusive(w) };
        // A write unlock keeps RD_NONSPINNABLE.
        l.owner.store(0, Relaxed);
        let w = l.lock_exclusive();
        l.owner.store(my_id() | RD_NONSPINNABLE, Relaxed);
        unsafe { l.unlock_exclusive(w) };
        assert_eq!(l.owner_word(), RD_NONSPINNABLE);
    }

    #[test]
    fn set_nonspinnable_only_when_reader_owned() {
        let l = Spin::new();
        let w = l.lock_exclusive();
        assert!(!l.set_nonspinnable());
        assert_eq!(l.owner_word() & NONSPINNABLE, 0);
        unsafe { l.unlock_exclusive(w) };
        let r = l.lock_shared();
        assert!(l.set_nonspinnable());
        assert_eq!(l.owner_word() & NONSPINNABLE, NONSPINNABLE);
        unsafe { l.unlock_shared(r) };
        // Stale reader hint, no readers: not set again.
        l.owner.store(my_id() | READER_OWNED, Relaxed);
        assert!(!l.set_nonspinnable());
    }

    #[test]
    fn handoff_reserved_lock_refuses_strangers() {
        let l = NoSpin::new();
        l.count.store(HANDOFF | WAITERS, Relaxed);
        assert!(l.try_lock_exclusive().is_none());
        assert!(l.try_lock_shared().is_none());
        assert!(l.try_write(true), "the first waiter may take it");
        assert_eq!(l.count_word(), WRITER_LOCKED | WAITERS);
        l.count.store(0, Relaxed);
    }

    #[test]
    fn timed_locks_time_out() {
        let l = NoSpin::new();
        let w = l.lock_exclusive();
        std::thread::scope(|s| {
            s.spawn(|| {
                let t0 = Instant::now();
                assert!(l.try_lock_shared_for(Duration::from_millis(20)).is_none());
                assert!(t0.elapsed() >= Duration::from_millis(20));
                let t0 = Instant::now();
                assert!(l
                    .try_lock_exclusive_for(Duration::from_millis(20))
                    .is_none());
                assert!(t0.elapsed() >= Duration::from_millis(20));
            });
        });
        assert_eq!(
            l.count_word(),
            WRITER_LOCKED,
            "timed-out waiters left no flags"
        );
        unsafe { l.unlock_exclusive(w) };
    }

    #[test]
    fn switches() {
        let was = (reader_spin(), adaptive());
        set_reader_spin(!was.0);
        set_adaptive(!was.1);
        assert_eq!(RawRwSem::new().reader_spin_enabled(), !was.0);
        assert_eq!(RawRwSem::new().adaptive_enabled(), !was.1);
        assert!(Spin::new().reader_spin_enabled() && Spin::new().adaptive_enabled());
        assert!(!NoSpin::new().reader_spin_enabled() && !NoSpin::new().adaptive_enabled());
        set_reader_spin(was.0);
        set_adaptive(was.1);
        let t = wait_timeout_ns();
        set_wait_timeout_ns(123);
        assert_eq!(wait_timeout_ns(), 123);
        set_wait_timeout_ns(t);
    }
}
