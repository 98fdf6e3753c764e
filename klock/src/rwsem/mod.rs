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
//! reader at the front (the `FRONT_READER` bit) goes under `wait_lock`
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
//! **Reader passing** (opt-in: [`set_reader_pass`], off by default, or
//! per lock `RSPIN = `[`PASS`]): a
//! reader whose fast path failed only because waiters are queued takes
//! the lock past them, into a read phase or not (the `read pass` line
//! below), as writers take it from a queued writer. Readers then never
//! wait behind a writer the scheduler has not run yet; what bounds a
//! queued writer's wait instead is its hand-off: as the first waiter it
//! sleeps at most [`wait_timeout_ns`] and then sets `HANDOFF`, which
//! stops passing readers; writers behind it wake as often to look
//! whether they have become first. It moves waiting from readers to
//! writers (see [`reader_pass`] for the measured trade).
//!
//! # The count word (64 bits)
//!
//! ```text
//!  63          62 .............. 8   7 .. 5        4             3            2         1         0
//! +-------------+-------------------+-------+--------------+--------------+---------+---------+---------------+
//! | READ_FAILED |   reader count    |   0   | FRONT_READER | WRITER_WOKEN | HANDOFF | WAITERS | WRITER_LOCKED |
//! +-------------+-------------------+-------+--------------+--------------+---------+---------+---------------+
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
//! * [`FRONT_READER`]: a reader is at the front of the wait list (set
//!   with `WAITERS` by a reader that queues first, kept up to date under
//!   `wait_lock` whenever the front changes): a write unlock must then
//!   grant it through `wait_lock` instead of letting the lock fall free.
//!   Being in the count word, the unlock's CAS checks it for free.
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
//! read pass       (r, 0, F-HANDOFF) -> (r+1, 0, F)       reader passing: a probe tried when the
//!                                                        count showed no writer and no hand-off;
//!                                                        fails (backs out) on WRITER_LOCKED|
//!                                                        HANDOFF|READ_FAILED
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
//! write unlock    (0, 1, F)        -> (0, 0, F)          CAS, release, from the count the writer
//!                                                        saw when it took the lock (the guard's
//!                                                        hint): no FRONT_READER; W without WOKEN:
//!                                                        wake the front writer (under wait_lock)
//! write unlock    (0, 1, F|W)      -> (n, 0, F-HANDOFF[-W if list empties])
//!   + grant                                              under wait_lock, one CAS, release: readers
//!                                                        at the front, or behind a front writer
//!                                                        after reader_wait_ns (no HANDOFF set)
//! write unlock    (0, 1, F|W)      -> (0, 0, F[-W if list empties])
//!   + wake                                               as the grant, for readers at the front
//!                                                        that have not waited reader_grant_ns
//! write unlock    (0, 1, F|W)      -> (0, 0, F|W)        CAS, release, from a fresh load (a guard
//!   + wake                                               without a hint, or a wrong one); a writer
//!                                                        at the front: wake it (under wait_lock)
//! downgrade       (0, 1, F)        -> (1, 0, F)          fetch_add, release; W: grant front readers
//! queue / leave   (.., F)          -> (.., F|W[|FRONT_READER]) / (.., F-W-HANDOFF-WOKEN-FRONT_READER)
//!                                                        under wait_lock, relaxed
//! front changes   (.., F|W)        -> (.., F|W±FRONT_READER)  under wait_lock, relaxed
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
//! spinning is on for this lock and the bit is clear: poll the count for
//! a few microseconds, spaced so as not to take the line from a holder in
//! every short section (the quick spin, [`crate::spin::QUICK_SPIN_NS`];
//! unless a hand-off is pending: most write sections end within it), then
//! spin (OSQ) while a running writer holds it, take it when it turns
//! reader-owned or free; after taking it, grant the
//! queued readers at the front so they join this read phase. If spinning
//! failed: **phase-fair join** — if another reader took the lock since we
//! arrived (the reader hint changed) and it is still reader-owned, probe
//! it. Else queue: under `wait_lock`, take it at once if the list is
//! empty and no writer holds it; else append, set `WAITERS` if first,
//! wake the front if no writer holds the lock, and sleep until granted.
//!
//! *Write*: trylock; the quick spin as for readers, then spin (OSQ) on a
//! running writer or, time-bounded, on readers; else queue like the
//! mutex: under `wait_lock` re-arm, trylock (the first waiter may take a
//! `HANDOFF`-reserved lock), sleep; the first waiter sets `HANDOFF` after
//! [`wait_timeout_ns`] and, once woken, spins on a writer owner without
//! the OSQ.
//!
//! *Fork*: in a forked child, the first thread that takes `wait_lock`
//! forgets the waiters that stayed in the parent (`fork.rs`).
//!
//! # Layout
//!
//! The owner word and the count word are the last two words
//! (`#[repr(C)]`, 48 bytes in all): every acquisition writes both, and in
//! a [`RwSem<T>`](crate::RwSem) the protected data comes right after the
//! raw lock, so the line an acquirer takes holds the start of the data
//! too. Of the eight 8-byte placements of the lock in a cache line, six
//! keep the owner word, the count word and the data on one line (with the
//! count first: three). Each word on another line costs every hand-over
//! one more cache-line transfer: with one reader and one writer the rate
//! fell to less than half with the data on the next line and by about a
//! sixth with the owner word on the line before (`examples/placement.rs`;
//! figures in `docs/bench.md`). The lock ends at byte 48: the preload
//! library keeps `pthread_rwlock_t`'s flags word there, outside the
//! rw-semaphore (checked by `klock-preload/tests/layout.rs`).
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

use crate::oncpu::SpinStats;
use crate::osq::Osq;
use crate::sync::Ordering::{Acquire, Relaxed, Release};
use crate::sync::{AtomicU32, AtomicU64, AtomicUsize, UnsafeCell};
#[cfg(not(loom))]
use crate::sys;
use crate::thread;
use crate::waitlist::{Linked, Links, WaitList};
use crate::waitlock::{WaitLock, WaitLockRaw};
use core::marker::PhantomData;
use core::sync::atomic::AtomicU64 as StdAtomicU64;
#[cfg(not(loom))]
use std::time::Duration;

#[cfg(not(loom))]
mod api;
mod fork;
#[cfg(loom)]
mod loom_probe;
mod read;
mod spin;
#[cfg(all(test, not(loom)))]
mod tests;
mod tuning;
mod wait;
mod write;

#[cfg(loom)]
pub use loom_probe::Probe;
pub use tuning::*;

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
/// A reader is at the front of the wait list (only with `WAITERS`): a
/// write unlock grants it under `wait_lock` (see the module docs).
pub const FRONT_READER: u64 = 1 << 4;
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

/// The owner-word identity of thread `tid`.
#[inline(always)]
fn id_of(tid: u32) -> usize {
    (tid as usize) << OWNER_SHIFT
}

#[inline(always)]
fn my_id() -> usize {
    id_of(thread::current_tid())
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
/// (so unlock needs no thread-local lookup), `tid << OWNER_SHIFT`, and in
/// the low bits that an identity leaves free, a hint of the count word
/// the writer left when it took the lock, which the unlock's CAS tries
/// first (see [`raw_unlock_exclusive`](RawRwSemWith::raw_unlock_exclusive)).
/// Hint 0 means "unknown": a guard rebuilt from the identity alone is
/// valid. Not `Send`.
#[derive(Debug)]
pub struct WriteGuard {
    id: usize,
    _not_send: PhantomData<*mut ()>,
}

/// The guard's hint bits: two of the low bits an identity leaves free.
const SEEN_MASK: usize = 0b11;
const _: () = assert!(SEEN_MASK < 1 << OWNER_SHIFT);
/// The counts a guard's hint can name, by hint (0: unknown). A writer
/// that took the lock with other flags set leaves no hint.
const SEEN_COUNTS: [u64; 4] = [
    0,
    WRITER_LOCKED,
    WRITER_LOCKED | WAITERS,
    WRITER_LOCKED | WAITERS | WRITER_WOKEN,
];

// SAFETY: no shared state; `Sync` only lets `&Guard` be shared, as
// `GuardNoSend` does.
unsafe impl Sync for WriteGuard {}

impl WriteGuard {
    /// A guard without a hint.
    #[inline(always)]
    fn new(id: usize) -> Self {
        Self {
            id,
            _not_send: PhantomData,
        }
    }

    /// A guard whose hint is `count`, the word our acquiring CAS wrote (no
    /// hint if it is none of [`SEEN_COUNTS`]).
    #[inline(always)]
    fn seen(id: usize, count: u64) -> Self {
        let hint = SEEN_COUNTS.iter().position(|&c| c == count).unwrap_or(0);
        Self::new(id | hint)
    }

    /// The writer identity, without the hint.
    #[inline(always)]
    fn identity(&self) -> usize {
        self.id & !SEEN_MASK
    }

    /// The count word the hint names; 0 if unknown.
    #[inline(always)]
    fn seen_count(&self) -> u64 {
        SEEN_COUNTS[self.id & SEEN_MASK]
    }

    /// The writer's tid.
    pub fn owner_tid(&self) -> u32 {
        tid_of(self.id)
    }

    /// The guard of writer `tid`, for a caller that could not keep the
    /// one its acquisition returned (a C API has nowhere to keep it
    /// between lock and unlock). Its hint is the uncontended count,
    /// `(0,1,0)`: the unlock's CAS from it succeeds when nobody waits,
    /// and otherwise fails with the word in hand for the slow path,
    /// which costs no more than the load a hint-less guard starts with.
    /// `tid` must be the thread that write-holds the lock.
    #[inline(always)]
    pub fn rebuilt(tid: u32) -> Self {
        Self::seen(id_of(tid), WRITER_LOCKED)
    }
}

/// Guard state of a read-locked [`RawRwSemWith`] (nothing). Not `Send`.
pub type ReadGuard = lock_api::GuardNoSend;

// Waiter states (its futex word): running (or about to re-check), asleep,
// a writer woken to retry, and the reader states below.
use crate::waitlist::{W_PARKED, W_WAITING, W_WOKEN};
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
    /// The fork generation it queued in: a list whose waiters are of an
    /// older one was inherited from the parent of a fork (see `fork.rs`).
    gen: u32,
    /// Loom only: the waiter's thread, unparked by wakers (see `park`).
    #[cfg(loom)]
    thread: loom::thread::Thread,
}

impl Linked for Waiter {
    fn links(&self) -> &Links<Self> {
        &self.links
    }
}

/// The kernel's rw-semaphore with reader optimistic spinning. `RSPIN`:
/// reader spinning ([`GLOBAL`], [`ON`], [`OFF`]); `ADAPTIVE`: adaptive
/// disabling of reader spinning (same values); `W`: the lock guarding the
/// wait list. Use it through [`crate::RwSem`] or [`crate::RwSemWith`].
#[repr(C)] // The hot words at the end: see "Layout" in the module docs.
pub struct RawRwSemWith<const RSPIN: u8, const ADAPTIVE: u8, W: WaitLockRaw = WaitLock> {
    /// Queue of optimistic spinners.
    osq: Osq,
    /// Protects `list`, and the setting/clearing of WAITERS and HANDOFF.
    wait_lock: W,
    /// Adaptive budget for spinning on a writer.
    spin: SpinStats,
    /// Sleeping readers' futex word: a grant that found one of its readers
    /// asleep bumps it after marking them all, so one `FUTEX_WAKE` wakes
    /// the whole group (writers sleep on their own words).
    rgate: AtomicU32,
    /// FIFO of sleeping waiters.
    list: UnsafeCell<WaitList<Waiter>>,
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
    #[cfg(loom)]
    loom_reader_pass: core::sync::atomic::AtomicBool,
    #[cfg(loom)]
    loom_no_quick_spin: core::sync::atomic::AtomicBool,
    /// Owner hint and nonspinnable bits.
    owner: AtomicUsize,
    /// The lock (see the [module docs](self)). Last: see "Layout".
    count: AtomicU64,
}

/// The rw-semaphore following the global switches: [`crate::RwSem`]'s raw lock.
pub type RawRwSem = RawRwSemWith<GLOBAL, GLOBAL>;

/// Byte offsets of the owner word and the count word in a [`RawRwSem`]
/// (see "Layout" in the module docs), for tools that show where a lock's
/// hot words fall in its cache lines (`examples/placement.rs`).
#[doc(hidden)]
pub const HOT_WORD_OFFSETS: (usize, usize) = (
    core::mem::offset_of!(RawRwSem, owner),
    core::mem::offset_of!(RawRwSem, count),
);

// SAFETY: list pointers name waiters that stay alive while linked; the
// list is only accessed under wait_lock.
unsafe impl<const R: u8, const A: u8, W: WaitLockRaw> Send for RawRwSemWith<R, A, W> {}
// SAFETY: as above; everything else is atomic.
unsafe impl<const R: u8, const A: u8, W: WaitLockRaw> Sync for RawRwSemWith<R, A, W> {}

/// Loom only: deliberately broken variants, each rejected by a model
/// (set with `set_loom_broken`; never active outside loom).
#[doc(hidden)]
pub mod broken;

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
            rgate: AtomicU32::new(0),
            probe: Probe::default(),
            loom_wait_timeout_ns: core::sync::atomic::AtomicU64::new(u64::MAX),
            loom_reader_wait_ns: core::sync::atomic::AtomicU64::new(u64::MAX),
            loom_reader_grant_ns: core::sync::atomic::AtomicU64::new(u64::MAX),
            loom_broken: core::sync::atomic::AtomicU8::new(0),
            loom_reader_pass: core::sync::atomic::AtomicBool::new(false),
            loom_no_quick_spin: core::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Whether readers of this lock spin now (its mode, or the global switch).
    #[inline]
    pub fn reader_spin_enabled(&self) -> bool {
        match RSPIN {
            ON | PASS => true,
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

    /// Whether readers of this lock pass queued waiters now
    /// ([`reader_pass`]; always with `RSPIN = `[`PASS`], never with
    /// `RSPIN = `[`STEAL`], whose stealing readers keep the kernel's rule of
    /// not stealing into a read phase). Under loom the global switch is
    /// replaced by the model's per-lock setting (off unless it says so).
    #[inline]
    pub fn reader_pass_enabled(&self) -> bool {
        #[cfg(loom)]
        return RSPIN == PASS
            || (RSPIN != STEAL
                && self
                    .loom_reader_pass
                    .load(core::sync::atomic::Ordering::Relaxed));
        #[cfg(not(loom))]
        return RSPIN == PASS || (RSPIN != STEAL && reader_pass());
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
        self.raw_lock_shared_as(thread::current_tid())
    }

    /// [`raw_lock_shared`](Self::raw_lock_shared) by a caller that has its
    /// tid at hand (each lookup of it is a thread-local access, a call in
    /// a shared library). `tid` must be the caller's
    /// ([`thread::current_tid`]) for the owner word to name a reader.
    #[inline]
    pub fn raw_lock_shared_as(&self, tid: u32) -> ReadGuard {
        if !self.read_fast(id_of(tid)) {
            self.read_slow(None);
        }
        ReadGuard::new()
    }

    /// [`raw_lock_shared_as`](Self::raw_lock_shared_as) for an
    /// error-checking caller (the C API): `None`, without waiting, if
    /// `write_held_by_caller` says the caller write-holds the lock. Asked
    /// only when the fast path fails: a read lock that the fast path takes
    /// has no writer, so the uncontended path checks nothing.
    #[doc(hidden)]
    #[inline]
    pub fn raw_lock_shared_unless_as(
        &self,
        tid: u32,
        write_held_by_caller: impl FnOnce() -> bool,
    ) -> Option<ReadGuard> {
        if !self.read_fast(id_of(tid)) {
            if write_held_by_caller() {
                return None;
            }
            self.read_slow(None);
        }
        Some(ReadGuard::new())
    }

    /// Take a read lock if that needs no waiting (no writer holds or waits).
    #[inline]
    pub fn raw_try_lock_shared(&self) -> Option<ReadGuard> {
        self.try_read_as(my_id)
    }

    /// [`raw_try_lock_shared`](Self::raw_try_lock_shared) by a caller that
    /// has its tid at hand (see [`raw_lock_shared_as`](Self::raw_lock_shared_as)).
    #[inline]
    pub fn raw_try_lock_shared_as(&self, tid: u32) -> Option<ReadGuard> {
        self.try_read_as(|| id_of(tid))
    }

    /// The read trylock; `me` gives our owner-word identity, asked for
    /// only once the lock is ours.
    #[inline(always)]
    fn try_read_as(&self, me: impl FnOnce() -> usize) -> Option<ReadGuard> {
        let mut c = self.count.load(Relaxed);
        while c & READ_FAILED_MASK == 0 {
            // Acquire pairs with the Release of the last write unlock.
            match self
                .count
                .compare_exchange_weak(c, c + READER_BIAS, Acquire, Relaxed)
            {
                Ok(_) => {
                    self.set_reader_owned(me());
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
        self.raw_try_lock_shared_until_ns_as(thread::current_tid(), deadline_ns)
    }

    /// [`raw_try_lock_shared_until_ns`](Self::raw_try_lock_shared_until_ns)
    /// by a caller that has its tid at hand (see
    /// [`raw_lock_shared_as`](Self::raw_lock_shared_as)).
    pub fn raw_try_lock_shared_until_ns_as(&self, tid: u32, deadline_ns: u64) -> Option<ReadGuard> {
        (self.read_fast(id_of(tid)) || self.read_slow(Some(deadline_ns))).then(ReadGuard::new)
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

    /// The read fast path: a load, then `fetch_add(READER_BIAS)`; back out
    /// on failure.
    ///
    /// The load keeps a reader that arrives while a writer holds the lock
    /// (or waiters are queued) from writing the count: its `fetch_add`
    /// would take the line from the writer in its critical section, and
    /// the back-out take it again. In `rwsem-rate` at 2 threads (one
    /// reader, one writer) the load raised the rate by about a fifth in
    /// one A/B of three rounds, and a second A/B, after the write unlock
    /// became one CAS, favoured it in 11 of 12 pairs at 2–16 threads (see
    /// `docs/locks/rwsem.md`). It costs an
    /// uncontended read lock+unlock about 3 ns (one thread, ten alternating
    /// runs: a median of 25.1 ns against 21.7 without the load), a trade
    /// `docs/locks/rwsem.md` states.
    #[inline(always)]
    fn read_fast(&self, me: usize) -> bool {
        let mask = if self.is_broken(broken::READ_IGNORES_WRITER) {
            READ_FAILED_MASK & !WRITER_LOCKED
        } else {
            READ_FAILED_MASK
        };
        if self.count.load(Relaxed) & mask != 0 {
            return false;
        }
        // Acquire pairs with the Release of the last write unlock.
        let old = self.count.fetch_add(READER_BIAS, Acquire);
        if old & mask == 0 {
            self.set_reader_owned(me);
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
        self.try_read_unqueued_from(me).is_some()
    }

    /// [`try_read_unqueued`](Self::try_read_unqueued), returning the count
    /// before our add on success.
    #[inline]
    fn try_read_unqueued_from(&self, me: usize) -> Option<u64> {
        self.try_read_if(me, |old| old & (WRITER_LOCKED | HANDOFF | READ_FAILED) == 0)
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

    // ------------------------------------------------------------------
    // Write side.
    // ------------------------------------------------------------------

    /// Acquire the write lock.
    #[inline]
    pub fn raw_lock_exclusive(&self) -> WriteGuard {
        self.raw_lock_exclusive_as(thread::current_tid())
    }

    /// [`raw_lock_exclusive`](Self::raw_lock_exclusive) by a caller that
    /// has its tid at hand (see [`raw_lock_shared_as`](Self::raw_lock_shared_as)).
    /// `tid` must be the caller's: the owner word and the guard name it.
    #[inline]
    pub fn raw_lock_exclusive_as(&self, tid: u32) -> WriteGuard {
        let me = id_of(tid);
        // (0,0,-) -> (0,1,-). Acquire pairs with the Release of the last unlock.
        match self
            .count
            .compare_exchange(0, WRITER_LOCKED, Acquire, Relaxed)
        {
            Ok(_) => {
                // Fast path: clears both nonspinnable bits.
                self.owner.store(me, Relaxed);
                WriteGuard::seen(me, WRITER_LOCKED)
            }
            // With more threads than CPUs waiters are queued nearly all
            // the time, so the `(0,0,0)` CAS fails on a free lock: the
            // trylock once more, inline, from the count it read (made
            // first thing in the cold slow path instead, 16 writers on 2
            // CPUs ran 4–10% slower; see `docs/locks/rwsem.md`).
            Err(c) => match self.try_write_at(false, c) {
                Some(c) => {
                    // Like the fast path: clears both nonspinnable bits.
                    self.owner.store(me, Relaxed);
                    WriteGuard::seen(me, write::try_write_wrote(c))
                }
                None => WriteGuard::seen(me, self.write_slow(me, None).unwrap_or(0)),
            },
        }
    }

    /// Take the write lock if it is free (and not reserved by a hand-off).
    #[inline]
    pub fn raw_try_lock_exclusive(&self) -> Option<WriteGuard> {
        self.raw_try_lock_exclusive_as(thread::current_tid())
    }

    /// [`raw_try_lock_exclusive`](Self::raw_try_lock_exclusive) by a
    /// caller that has its tid at hand (see
    /// [`raw_lock_shared_as`](Self::raw_lock_shared_as)).
    #[inline]
    pub fn raw_try_lock_exclusive_as(&self, tid: u32) -> Option<WriteGuard> {
        let me = id_of(tid);
        let c = self.try_write_from(false)?;
        // Like the fast path: clears both nonspinnable bits.
        self.owner.store(me, Relaxed);
        Some(WriteGuard::seen(me, write::try_write_wrote(c)))
    }

    /// Acquire the write lock unless `deadline_ns` passes first.
    pub fn raw_try_lock_exclusive_until_ns(&self, deadline_ns: u64) -> Option<WriteGuard> {
        self.raw_try_lock_exclusive_until_ns_as(thread::current_tid(), deadline_ns)
    }

    /// [`raw_try_lock_exclusive_until_ns`](Self::raw_try_lock_exclusive_until_ns)
    /// by a caller that has its tid at hand (see
    /// [`raw_lock_shared_as`](Self::raw_lock_shared_as)).
    pub fn raw_try_lock_exclusive_until_ns_as(
        &self,
        tid: u32,
        deadline_ns: u64,
    ) -> Option<WriteGuard> {
        let me = id_of(tid);
        if self
            .count
            .compare_exchange(0, WRITER_LOCKED, Acquire, Relaxed)
            .is_ok()
        {
            self.owner.store(me, Relaxed);
            return Some(WriteGuard::seen(me, WRITER_LOCKED));
        }
        self.write_slow(me, Some(deadline_ns))
            .map(|wrote| WriteGuard::seen(me, wrote))
    }

    /// Release the write lock.
    ///
    /// # Safety
    /// `guard` comes from write-locking this lock, which is still held
    /// with it (debug builds check that a writer holds it).
    #[inline]
    pub unsafe fn raw_unlock_exclusive(&self, guard: WriteGuard) {
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
        // (0,1,F) -> (0,0,F): one CAS from the count we left when we took
        // the lock (the guard's hint), without loading the word first.
        // A load before the RMW cost a second cache-line transfer whenever
        // a contended locker on another CPU was polling the line: with
        // more threads than CPUs, where waiters stay queued and every
        // unlock took the slow path's load, the rate fell by about a fifth
        // (see `docs/locks/rwsem.md`). The CAS checks the hint: it fails
        // if anything changed, such as a reader that came to the front
        // (`FRONT_READER`), which the slow path then grants. A hint with
        // `WAITERS` is tried only while no reader wait bound can grant
        // readers past a front writer. Release pairs with the next
        // acquirer's Acquire. Debug builds: a lock that is not
        // write-locked fails the CAS; the slow path reports the misuse.
        let seen = guard.seen_count();
        if seen != 0 && (seen & WAITERS == 0 || self.reader_wait() == u64::MAX) {
            match self
                .count
                .compare_exchange(seen, seen - WRITER_LOCKED, Release, Relaxed)
            {
                Ok(_) => {
                    if seen & (WAITERS | WRITER_WOKEN) == WAITERS {
                        // A writer at the front, not yet woken.
                        self.unlock_wake();
                    }
                }
                // The failed CAS read the word: no second load.
                Err(now) => self.write_unlock_slow(now),
            }
            return;
        }
        self.write_unlock_slow(self.count.load(Relaxed));
    }

    /// Turn our write lock into a read lock, without letting any writer in
    /// between; queued readers at the front join us.
    ///
    /// # Safety
    /// As [`raw_unlock_exclusive`](Self::raw_unlock_exclusive).
    pub unsafe fn raw_downgrade(&self, guard: WriteGuard) -> ReadGuard {
        let o = self.owner.load(Relaxed);
        self.owner.store(
            guard.identity() | READER_OWNED | (o & RD_NONSPINNABLE),
            Relaxed,
        );
        // (0,1,F) -> (1,0,F). Release: readers that join us (Acquire)
        // see what we wrote.
        let old = self.count.fetch_add(READER_BIAS - WRITER_LOCKED, Release);
        debug_assert!(old & WRITER_LOCKED != 0, "downgrade without the write lock");
        #[cfg(loom)]
        Probe::hit(&self.probe.downgrades);
        if old & FRONT_READER != 0 {
            self.grant_front_readers();
        }
        ReadGuard::new()
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

    /// Held by readers and no writer, from one load of the count. A
    /// snapshot.
    #[inline]
    pub fn is_read_held(&self) -> bool {
        let c = self.count.load(Relaxed);
        c & WRITER_LOCKED == 0 && c & READER_MASK != 0
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
            .field("front_reader", &(c & FRONT_READER != 0))
            .finish()
    }
}
