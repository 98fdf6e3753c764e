//! Per-lock-type event counters: klock's analogue of the kernel's
//! `lock_events` (`/sys/kernel/debug/lock_event_counts/`).
//!
//! Locks call [`inc`] at interesting points of their slow paths (took the
//! pending bit, queued, used a nested MCS node, …). The counters are
//! process-wide, one set per [`Event`], grouped by [`LockType`].
//!
//! # Cost
//!
//! * Feature `events` **off** (the default): [`inc`] and [`add`] are empty
//!   `#[inline(always)]` functions — the call, the thread-index lookup and
//!   the counter all compile away. [`enabled`] returns `false` and
//!   [`snapshot`] reports zeros.
//! * Feature `events` **on**: every thread index ([`crate::thread`]) has its
//!   own cache-padded row of counters, so a bump is a plain `Relaxed` load
//!   and store on a line no other thread writes — no locked instruction, no
//!   cache-line bouncing (the kernel's `this_cpu_inc`, per thread instead of
//!   per CPU). A locked `fetch_add` on shared shards halved the rate of the
//!   2-thread spinlock benchmark, whose pending path takes ~20 ns. A thread
//!   keeps its row's address in a destructor-free thread-local from its
//!   first count until its exit (a thread hook clears it before the index
//!   can be handed on), so a bump is one TLS load before the counter's. Rows are
//!   allocated in chunks of [`ROWS_PER_CHUNK`] on first use and never freed;
//!   a recycled index keeps adding to its row. Threads without an index
//!   (thread teardown) share one row, with `fetch_add`. Reads sum all rows.
//! * Under `--cfg loom` the counters are compiled out as if the feature were
//!   off (a model runs each execution thousands of times; counts would be
//!   meaningless and the statics are not loom-aware).
//!
//! # Adding a lock type
//!
//! Add a block to the `lock_events!` invocation below: a [`LockType`]
//! variant, its display name, and its events (variant = `"name"`). Event
//! variants are one flat enum, so they must be unique across lock types —
//! prefix the variant (not the name) when two locks share an event name,
//! e.g. `MutexSleep = "sleep"` and `RwsemSleep = "sleep"`.
//!
//! ```
//! use klock::events::{self, LockType};
//! events::reset_all();
//! for (name, value) in events::snapshot(LockType::QSpinLock) {
//!     println!("{name:>16} = {value}");
//! }
//! ```

/// Defines [`LockType`] and [`Event`] from one table, so the two can never
/// disagree.
macro_rules! lock_events {
    ( $(
        $(#[$tydoc:meta])*
        $ty:ident = $tyname:literal {
            $( $(#[$evdoc:meta])* $ev:ident = $name:literal ),* $(,)?
        }
    )* ) => {
        /// A lock type whose events are counted.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum LockType {
            $( $(#[$tydoc])* $ty, )*
        }

        /// One counted event. The discriminant is the counter's column in
        /// a row of counters.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum Event {
            $( $( $(#[$evdoc])* $ev, )* )*
        }

        impl LockType {
            /// Every lock type, in declaration order.
            pub const ALL: &'static [LockType] = &[ $( LockType::$ty, )* ];

            /// Short name, e.g. `"qspinlock"`.
            pub const fn name(self) -> &'static str {
                match self {
                    $( LockType::$ty => $tyname, )*
                }
            }

            /// This lock type's events, in declaration order.
            pub const fn events(self) -> &'static [Event] {
                match self {
                    $( LockType::$ty => &[ $( Event::$ev, )* ], )*
                }
            }
        }

        impl Event {
            /// Every event of every lock type; `ALL[i] as usize == i`.
            pub const ALL: &'static [Event] = &[ $( $( Event::$ev, )* )* ];
            /// Number of events (columns in the counter table).
            pub const COUNT: usize = Event::ALL.len();

            /// The kernel-style name, e.g. `"lock_pending"`.
            pub const fn name(self) -> &'static str {
                match self {
                    $( $( Event::$ev => $name, )* )*
                }
            }

            /// The lock type this event belongs to.
            pub const fn lock_type(self) -> LockType {
                match self {
                    $( $( Event::$ev => LockType::$ty, )* )*
                }
            }
        }
    };
}

lock_events! {
    /// The queued spinlock ([`crate::qspinlock`]).
    QSpinLock = "qspinlock" {
        /// Took the lock through the pending bit (no queueing).
        LockPending = "lock_pending",
        /// Entered the MCS queue path.
        LockSlowpath = "lock_slowpath",
        /// Queued with the 2nd per-thread MCS node (nesting level 1).
        LockUseNode2 = "lock_use_node2",
        /// Queued with the 3rd per-thread MCS node (nesting level 2).
        LockUseNode3 = "lock_use_node3",
        /// Queued with the 4th per-thread MCS node (nesting level 3).
        LockUseNode4 = "lock_use_node4",
        /// No MCS node free (nesting too deep, or the thread has no slot):
        /// fell back to spinning on trylock.
        LockNoNode = "lock_no_node",
        /// Paravirt: a newcomer took a free lock past a queue whose head was
        /// not holding the pending bit (hybrid unfair mode).
        PvLockStealing = "pv_lock_stealing",
        /// Paravirt: a queued waiter stopped spinning on its node and slept.
        PvWaitNode = "pv_wait_node",
        /// Paravirt: ... of those, early, because its predecessor was asleep
        /// or (oracle) not running.
        PvWaitEarly = "pv_wait_early",
        /// Paravirt: the queue head stopped spinning and slept on the lock word.
        PvWaitHead = "pv_wait_head",
        /// Paravirt: the queue head could not sleep (the owner took the lock
        /// on the fast path and unlocks with a plain store) and yielded.
        PvWaitYield = "pv_wait_yield",
        /// Paravirt: a pending waiter's bounded wait ran out; it queued.
        PvPendingTimeout = "pv_pending_timeout",
        /// Paravirt: the head reserved the lock with the pending bit (it
        /// had waited past the fairness bound), blocking steals.
        PvHeadReserve = "pv_head_reserve",
        /// Paravirt: an unlock found the head asleep and woke it.
        PvKickUnlock = "pv_kick_unlock",
        /// Paravirt: passing the MCS baton woke a sleeping successor.
        PvKickWake = "pv_kick_wake",
        /// Paravirt: a sleeper woke without its condition being met.
        PvSpuriousWakeup = "pv_spurious_wakeup",
    }

    /// The queued rwlock ([`crate::qrwlock`]; its wait queue is a
    /// [`QSpinLock`](LockType::QSpinLock) and counts there too).
    QRwLock = "qrwlock" {
        /// A reader found a writer (holding or waiting) and queued on the
        /// wait lock.
        QrwReadQueued = "read_queued",
        /// A writer found the lock taken and queued on the wait lock.
        QrwWriteQueued = "write_queued",
        /// The brief read-only poll before queueing took the lock (reader).
        QrwReadQuick = "read_quick",
        /// The brief read-only poll before queueing took the lock (writer).
        QrwWriteQuick = "write_quick",
        /// The wait-lock holder stopped spinning and slept on the word.
        QrwSleep = "sleep",
        /// A release woke the sleeping wait-lock holder.
        QrwWake = "wake",
    }

    /// The optimistic-spinning mutex ([`crate::mutex`]).
    Mutex = "mutex" {
        /// Optimistic spinning (OSQ head or first waiter) took the lock.
        MutexSpinSuccess = "spin_success",
        /// The brief read-only poll before optimistic spinning took the lock.
        MutexSpinQuick = "spin_quick",
        /// Spinning stopped: the oracle said the owner is not running.
        MutexSpinFailOwnerSleeping = "spin_fail_owner_sleeping",
        /// Spinning stopped: the time budget (or the caller's deadline) ran out.
        MutexSpinFailBudget = "spin_fail_budget",
        /// Spinning stopped: the spinner should yield (it was migrated).
        MutexSpinFailYield = "spin_fail_yield",
        /// A spinner left the OSQ before reaching its head (three-step unqueue).
        MutexOsqUnqueue = "osq_unqueue",
        /// A waiter went to sleep on its futex word.
        MutexSleep = "sleep",
        /// Of those sleeps, one by a first waiter that an unlock had
        /// already woken and that lost the lock to another thread (a lazy
        /// round on a timer, or until woken again).
        MutexSleepAgain = "sleep_again",
        /// An unlocker (or a leaving waiter) woke a sleeping first waiter.
        MutexWake = "wake",
        /// A first waiter woken by an unlock lost the lock to a thread
        /// that took it back, and sleeps its lazy rounds on a timer
        /// ([`crate::mutex::LAZY_WAIT_NS`]) instead of asking to be woken.
        MutexLazyWait = "lazy_wait",
        /// An unlocker handed the lock to the first waiter (`PICKUP`).
        MutexHandoff = "handoff",
        /// Did not spin: as many threads as CPUs-1 were already spinning
        /// on this lock (one more could only spin on a preempted owner).
        MutexSpinFailCrowded = "spin_fail_crowded",
        /// The adaptive test ([`crate::spinadapt`]) found spinning faster
        /// (or no slower) than sleeping and kept it for the next run (250 ms–2 s).
        MutexAdaptSpin = "adapt_spin",
        /// The adaptive test found sleeping faster: no owner spinning for
        /// the next run (250 ms–2 s).
        MutexAdaptNoSpin = "adapt_nospin",
        /// Did not spin: this lock's recent spins mostly ran out of their
        /// budget ([`crate::mutex::futile_skip`]).
        MutexSpinSkipFutile = "spin_skip_futile",
    }

    /// The priority-inheritance mutex ([`crate::rtmutex`]).
    RtMutex = "rtmutex" {
        /// Userspace top-waiter spinning took the lock.
        RtSpinSuccess = "spin_success",
        /// Spinning stopped (or was skipped): a waiter is queued in the
        /// kernel, so we are not the top waiter.
        RtSpinFailWaiterQueued = "spin_fail_waiter_queued",
        /// Spinning stopped: the oracle said the owner is not running.
        RtSpinFailOwnerSleeping = "spin_fail_owner_sleeping",
        /// Spinning stopped: the time budget (or the caller's deadline) ran out.
        RtSpinFailBudget = "spin_fail_budget",
        /// Spinning stopped: the spinner should yield (it was migrated).
        RtSpinFailYield = "spin_fail_yield",
        /// Another thread already spins: went to the kernel at once.
        RtSpinBusy = "spin_busy",
        /// Spinning skipped: recent spins kept failing (adaptive disabling).
        RtSpinSkipped = "spin_skipped",
        /// A contended locker called `FUTEX_LOCK_PI2` (or `FUTEX_LOCK_PI`).
        RtKernelLock = "kernel_lock",
        /// An unlock with waiters called `FUTEX_UNLOCK_PI`.
        RtKernelUnlock = "kernel_unlock",
        /// A non-real-time contender slept in userspace (on the lock's
        /// second futex) instead of queueing in the kernel.
        RtUserPark = "user_park",
        /// A userspace waiter was woken: by an unlock, or passed on by a
        /// waiter that left without the lock.
        RtUserWake = "user_wake",
        /// A userspace waiter waited `USER_WAIT_NS` and queued in the kernel.
        RtUserWaitExpired = "user_wait_expired",
    }

    /// The rw-semaphore with reader optimistic spinning ([`crate::rwsem`]).
    Rwsem = "rwsem" {
        /// Optimistic spinning (reader or writer, OSQ head or first waiter) took the lock.
        RwsemOptLock = "opt_lock",
        /// The brief read-only poll before optimistic spinning took the
        /// lock (no OSQ, no clock).
        RwsemSpinQuick = "spin_quick",
        /// Optimistic spinning ended without the lock.
        RwsemOptFail = "opt_fail",
        /// A writer's time-based spin on a reader-owned lock ran out: it set
        /// the nonspinnable bits.
        RwsemOptNospin = "opt_nospin",
        /// A reader did not spin because `RD_NONSPINNABLE` was set.
        RwsemNorspin = "norspin",
        /// Read locks granted through the wait list (after queueing).
        RwsemRlock = "rlock",
        /// Read slow path took the lock at once under `wait_lock` (empty list).
        RwsemRlockFast = "rlock_fast",
        /// Phase-fair join: a reader that quit spinning joined another
        /// reader's read phase.
        RwsemRlockRejoin = "rlock_rejoin",
        /// `STEAL` mode: a reader whose fast path failed took the lock
        /// (no writer, no reader, no hand-off), waiters or not.
        RwsemRlockSteal = "rlock_steal",
        /// Reader passing: a reader whose fast path failed only on queued
        /// waiters took the lock past them.
        RwsemRlockPass = "rlock_pass",
        /// A starving first reader set `HANDOFF`.
        RwsemRlockHandoff = "rlock_handoff",
        /// Write locks taken through the wait list.
        RwsemWlock = "wlock",
        /// A starving first writer set `HANDOFF`.
        RwsemWlockHandoff = "wlock_handoff",
        /// A queued reader went to sleep on its futex word.
        RwsemSleepReader = "sleep_reader",
        /// A queued writer went to sleep on its futex word.
        RwsemSleepWriter = "sleep_writer",
        /// Readers granted the lock by wake-ups (one count per reader).
        RwsemWakeReaders = "wake_readers",
        /// Sleeping writers woken.
        RwsemWakeWriter = "wake_writer",
        /// A write unlock handed the lock straight to the readers queued at
        /// the front (release and grant in one RMW; one count per unlock).
        RwsemUnlockGrant = "unlock_grant",
        /// A write unlock granted the lock to readers queued behind a writer
        /// at the front, because they had waited past their bound (one
        /// count per unlock).
        RwsemUnlockGrantSkip = "grant_skip",
        /// Queued readers woken to compete for the lock instead of being
        /// granted it (one count per reader).
        RwsemWakeCompete = "wake_compete",
        /// A reader woken to compete took the lock.
        RwsemRlockWoken = "rlock_woken",
        /// A reader woken to compete found a writer or a hand-off and
        /// queued again.
        RwsemRlockRequeue = "rlock_requeue",
    }
}

/// Counter rows allocated together (one per thread index).
pub const ROWS_PER_CHUNK: usize = 64;

/// Whether counters are compiled in (feature `events`, and not under loom).
#[inline(always)]
pub const fn enabled() -> bool {
    cfg!(all(feature = "events", not(loom)))
}

#[cfg(all(feature = "events", not(loom)))]
mod store {
    use super::{Event, ROWS_PER_CHUNK};
    use crate::thread::MAX_THREADS;
    // Plain std atomics on purpose: counters are statistics, not
    // synchronisation, and must not go through the loom shim.
    use core::sync::atomic::{AtomicPtr, AtomicU64, AtomicU8, Ordering};
    use crossbeam_utils::CachePadded;

    type Row = CachePadded<[AtomicU64; Event::COUNT]>;
    type Chunk = [Row; ROWS_PER_CHUNK];

    const NCHUNKS: usize = (MAX_THREADS as usize).div_ceil(ROWS_PER_CHUNK);
    #[allow(clippy::declare_interior_mutable_const)]
    const ZERO_ROW: Row = CachePadded::new([const { AtomicU64::new(0) }; Event::COUNT]);

    /// Rows of thread indexes 1..=MAX_THREADS, by chunk.
    static CHUNKS: [AtomicPtr<Chunk>; NCHUNKS] =
        [const { AtomicPtr::new(core::ptr::null_mut()) }; NCHUNKS];
    /// Threads without an index: many writers, so `fetch_add`.
    static SHARED: Row = ZERO_ROW;

    /// Allocate chunk `c` (or take the one another thread just published).
    #[cold]
    fn alloc_chunk(c: usize) -> *mut Chunk {
        let fresh = Box::into_raw(Box::new([ZERO_ROW; ROWS_PER_CHUNK]));
        match CHUNKS[c].compare_exchange(
            core::ptr::null_mut(),
            fresh,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => fresh,
            Err(winner) => {
                // SAFETY: `fresh` was never published.
                drop(unsafe { Box::from_raw(fresh) });
                winner
            }
        }
    }

    /// The row of thread index `index` (1..=MAX_THREADS).
    #[inline(always)]
    fn row(index: u32) -> &'static Row {
        let i = (index - 1) as usize;
        let c = i / ROWS_PER_CHUNK;
        // Acquire pairs with the AcqRel CAS that published the chunk.
        let mut p = CHUNKS[c].load(Ordering::Acquire);
        if p.is_null() {
            p = alloc_chunk(c);
        }
        // SAFETY: chunks are never freed.
        unsafe { &(*p)[i % ROWS_PER_CHUNK] }
    }

    std::thread_local! {
        /// This thread's row while it holds its thread index, else `None`: a
        /// const-initialised, destructor-free thread-local, so a count is
        /// one TLS load and the counter's load and store. Going through the
        /// thread index instead (the lazily made per-thread context, then
        /// the chunk table) cost about a fifth of the `spinlock` suite's
        /// rate where every acquisition counts a steal past the queue.
        static ROW: core::cell::Cell<Option<&'static Row>> = const { core::cell::Cell::new(None) };
    }

    #[inline(always)]
    pub fn add(ev: Event, n: u64) {
        if !add_if_cached(ev, n) {
            add_uncached(ev, n);
        }
    }

    /// [`add`] only if the thread's row is cached; whether it was.
    #[inline(always)]
    pub fn add_if_cached(ev: Event, n: u64) -> bool {
        // The cache is cleared before the thread gives its index back
        // (`THREAD_HOOKS`); rows are never freed.
        let Some(row) = ROW.get() else {
            return false;
        };
        let c = &row[ev as usize];
        // Only this thread writes this row while it holds the index: a
        // load and a store, no locked RMW.
        c.store(c.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
        true
    }

    /// First count on this thread, or one made while it has no index
    /// (teardown, or more threads than indexes) or no cache (the exit hook
    /// refused): find the row and cache it, or count in the shared row.
    #[cold]
    #[inline(never)]
    fn add_uncached(ev: Event, n: u64) {
        match crate::thread::current_index() {
            Some(index) => {
                let r = row(index);
                if exit_hook_registered() {
                    ROW.set(Some(r));
                }
                r[ev as usize].fetch_add(n, Ordering::Relaxed);
            }
            None => {
                SHARED[ev as usize].fetch_add(n, Ordering::Relaxed);
            }
        }
    }

    /// Clears a thread's cached row as its context is destroyed, before
    /// its index can go to another thread (the row with it).
    static THREAD_HOOKS: crate::thread::ThreadHooks = crate::thread::ThreadHooks {
        start: |_| {},
        exit: |_| ROW.set(None),
    };
    /// [`THREAD_HOOKS`]: not tried yet, registered, or refused.
    static HOOKS_STATE: AtomicU8 = AtomicU8::new(HOOKS_UNTRIED);
    const HOOKS_UNTRIED: u8 = 0;
    const HOOKS_REGISTERED: u8 = 1;
    const HOOKS_REFUSED: u8 = 2;

    /// Whether [`THREAD_HOOKS`] runs at every thread's exit, registering
    /// it on first use. Refused (every hook slot taken), rows are not
    /// cached and every count takes the uncached path; the registration
    /// is not tried again (it takes a lock).
    fn exit_hook_registered() -> bool {
        // Acquire pairs with the Release below: a thread that caches its
        // row because another registered the hook then sees the hook
        // table's entry when it exits.
        match HOOKS_STATE.load(Ordering::Acquire) {
            HOOKS_REGISTERED => true,
            HOOKS_REFUSED => false,
            _ => {
                let ok = crate::thread::register_hooks(&THREAD_HOOKS);
                let state = if ok { HOOKS_REGISTERED } else { HOOKS_REFUSED };
                // Release: after the registration's store of the entry.
                HOOKS_STATE.store(state, Ordering::Release);
                ok
            }
        }
    }

    /// Every allocated row, and the shared one.
    fn rows() -> impl Iterator<Item = &'static Row> {
        CHUNKS
            .iter()
            .filter_map(|c| {
                let p = c.load(Ordering::Acquire);
                // SAFETY: chunks are never freed.
                (!p.is_null()).then(|| unsafe { &*p })
            })
            .flat_map(|chunk| chunk.iter())
            .chain(core::iter::once(&SHARED))
    }

    pub fn read(ev: Event) -> u64 {
        rows().fold(0u64, |s, row| {
            s.wrapping_add(row[ev as usize].load(Ordering::Relaxed))
        })
    }

    pub fn reset(ev: Event) {
        for row in rows() {
            row[ev as usize].store(0, Ordering::Relaxed);
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn a_thread_counts_in_its_cached_row_until_its_exit_hook_clears_it() {
            let _serial = super::super::TEST_SERIAL
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            std::thread::spawn(|| {
                let index = crate::thread::current_index().expect("a thread index");
                let count = || row(index)[Event::LockUseNode2 as usize].load(Ordering::Relaxed);
                let before = count();
                assert!(ROW.get().is_none(), "nothing counted yet on this thread");
                add(Event::LockUseNode2, 3);
                let cached = ROW.get().expect("the first count caches the row");
                assert!(
                    core::ptr::eq(cached, row(index)),
                    "the row of this thread's index"
                );
                add(Event::LockUseNode2, 4);
                assert_eq!(count() - before, 7, "both counts in the index's row");
                (THREAD_HOOKS.exit)(0);
                assert!(ROW.get().is_none(), "the exit hook forgets the row");
                add(Event::LockUseNode2, 5);
                assert_eq!(count() - before, 12, "found again while the index is held");
            })
            .join()
            .unwrap();
        }
    }
}

/// Count one `ev` if this thread's counter row is at hand, with no call
/// (for a fast path that must not make one: see the qspinlock's
/// `callee_save.rs`); `false` if it was not counted, and the caller should
/// count it with [`inc`] off its fast path. Always `true` without the
/// `events` feature.
#[inline(always)]
pub fn inc_if_cached(ev: Event) -> bool {
    #[cfg(all(feature = "events", not(loom)))]
    return store::add_if_cached(ev, 1);
    #[cfg(not(all(feature = "events", not(loom))))]
    {
        let _ = ev;
        true
    }
}

/// Count one `ev`. Compiles to nothing without the `events` feature.
#[inline(always)]
pub fn inc(ev: Event) {
    add(ev, 1);
}

/// Count `n` occurrences of `ev`. Compiles to nothing without the `events`
/// feature.
#[inline(always)]
pub fn add(ev: Event, n: u64) {
    #[cfg(all(feature = "events", not(loom)))]
    store::add(ev, n);
    #[cfg(not(all(feature = "events", not(loom))))]
    let _ = (ev, n);
}

/// Current total of `ev` (0 when counters are compiled out). Not a
/// consistent snapshot across events: counting goes on while it sums.
#[cfg(all(feature = "events", not(loom)))]
pub fn read(ev: Event) -> u64 {
    store::read(ev)
}

/// Current total of `ev` (0 when counters are compiled out).
#[cfg(not(all(feature = "events", not(loom))))]
pub fn read(ev: Event) -> u64 {
    let _ = ev;
    0
}

/// `(name, value)` for each event of `kind`, in declaration order. Names are
/// reported even when counters are compiled out (values are then 0), so a
/// report's shape does not depend on the feature.
pub fn snapshot(kind: LockType) -> Vec<(&'static str, u64)> {
    kind.events().iter().map(|&e| (e.name(), read(e))).collect()
}

/// Zero the counters of one lock type.
pub fn reset(kind: LockType) {
    #[cfg(all(feature = "events", not(loom)))]
    for &e in kind.events() {
        store::reset(e);
    }
    #[cfg(not(all(feature = "events", not(loom))))]
    let _ = kind;
}

/// Zero every counter. Call it while the counted locks are quiet: a thread
/// bumping a counter while it is reset may write back its pre-reset value
/// (a row's single writer does a load and a store, not an atomic add).
pub fn reset_all() {
    for &kind in LockType::ALL {
        reset(kind);
    }
}

/// Serialises the crate's unit tests that reset counters or assert on
/// their deltas (tests in one binary share the process-wide counters).
#[cfg(all(test, not(loom)))]
pub(crate) static TEST_SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn table_is_consistent() {
        for (i, &e) in Event::ALL.iter().enumerate() {
            assert_eq!(e as usize, i);
            assert!(e.lock_type().events().contains(&e));
        }
        let total: usize = LockType::ALL.iter().map(|t| t.events().len()).sum();
        assert_eq!(total, Event::COUNT);
        let names: Vec<_> = snapshot(LockType::QSpinLock)
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        assert_eq!(
            names,
            [
                "lock_pending",
                "lock_slowpath",
                "lock_use_node2",
                "lock_use_node3",
                "lock_use_node4",
                "lock_no_node",
                "pv_lock_stealing",
                "pv_wait_node",
                "pv_wait_early",
                "pv_wait_head",
                "pv_wait_yield",
                "pv_pending_timeout",
                "pv_head_reserve",
                "pv_kick_unlock",
                "pv_kick_wake",
                "pv_spurious_wakeup"
            ]
        );
        assert_eq!(LockType::QSpinLock.name(), "qspinlock");
    }

    #[test]
    fn counts_from_many_threads_and_resets() {
        let _serial = TEST_SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        reset_all();
        let hs: Vec<_> = (0..8)
            .map(|_| {
                std::thread::spawn(|| {
                    for _ in 0..1000 {
                        inc(Event::LockUseNode4);
                    }
                    add(Event::LockUseNode3, 5);
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        let snap = snapshot(LockType::QSpinLock);
        let get = |n: &str| snap.iter().find(|(k, _)| *k == n).unwrap().1;
        if enabled() {
            assert_eq!(get("lock_use_node4"), 8000);
            assert_eq!(get("lock_use_node3"), 40);
            reset_all();
            assert_eq!(read(Event::LockUseNode4), 0);
        } else {
            assert!(snap.iter().all(|&(_, v)| v == 0));
        }
    }
}
