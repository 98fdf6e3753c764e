//! The rw-semaphore's constants of policy and its process-wide switches:
//! reader-spin thresholds, the hand-off and reader bounds, the global
//! reader-spinning and adaptive-disabling switches (see the module docs).

use super::*;

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
pub const DEFAULT_READER_WAIT_NS: u64 = crate::config::DEFAULT_RWSEM_READER_WAIT_NS;
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
/// Per-lock `RSPIN` value only: readers spin as with [`ON`] and pass
/// queued waiters ([`reader_pass`]) whatever the global switch says, so
/// that one process can run the lock both ways (`klock bench` id
/// `rwsem-pass`).
pub const PASS: u8 = 4;

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
// The reader-spinning and adaptive switches and the reader wait bound are
// kept by `config` (read from the environment there, set by `Config`).
use crate::config::{
    RWSEM_ADAPTIVE as GLOBAL_ADAPTIVE, RWSEM_READER_PASS as GLOBAL_READER_PASS,
    RWSEM_RSPIN as GLOBAL_RSPIN,
};
static WAIT_TIMEOUT: StdAtomicU64 = StdAtomicU64::new(DEFAULT_WAIT_TIMEOUT_NS);
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

/// The reader-passing switch, for every lock except `RSPIN = `[`STEAL`]
/// ones (`RSPIN = `[`PASS`] locks pass whatever it says): a reader whose
/// fast path failed only because waiters are queued
/// (no writer holds the lock, no hand-off is pending) takes the lock
/// past them, into a read phase or not, and the first queued writer
/// sleeps no longer than its hand-off bound ([`wait_timeout_ns`]), then
/// demands the lock. Off (the default), readers wait behind any queued
/// waiter (the kernel's rule). On with `KLOCK_RWSEM_READER_PASS=1` (read
/// once) or [`set_reader_pass`]`(true)`.
///
/// Off by default: it changes who waits. On 2 CPUs with 16 threads it
/// balanced `rwsem-rate` (the least served reader did 206–297 k
/// operations instead of 36–49 k, writers about the same) and moved its
/// rate from 0.72–0.80x the best peer's to 0.75–0.86x, but in
/// `rwsem-dedicated` the least served writer fell from 16–27 k operations
/// to about 3.7 k (alternating runs; side by side in one run, 9.7–10.8 k
/// against 15.0–17.4 k); a writer's wait under steady read load becomes
/// the hand-off bound; and it would change the 2019 mail's experiment,
/// whose readers wait behind queued writers (see `docs/locks/rwsem.md`).
#[inline]
pub fn reader_pass() -> bool {
    GLOBAL_READER_PASS.get()
}

/// Turn reader passing on or off. Takes effect at the next slow-path read
/// lock (and the next sleep of a queued writer).
pub fn set_reader_pass(on: bool) {
    GLOBAL_READER_PASS.set(on);
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
    crate::config::rwsem_reader_wait_ns()
}

/// Set the reader wait bound (ns) for all rw-semaphores: smaller is fairer
/// to readers and costs writer throughput (each grant starts a read phase
/// that writers wait out); `u64::MAX` leaves readers behind a writer to
/// that writer's own hand-off ([`wait_timeout_ns`]).
pub fn set_reader_wait_ns(ns: u64) {
    crate::config::set_rwsem_reader_wait_ns(ns);
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
