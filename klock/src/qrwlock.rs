//! Queued rwlock: the kernel's qrwlock, a reader/writer spinlock whose
//! contended lockers queue FIFO on a [`RawQSpinLock32`].
//!
//! Readers and writers meet on one 32-bit counter word. Uncontended, a read
//! lock is one `fetch_add` and a write lock one CAS. Contended lockers —
//! readers that found a writer, writers that found anybody — line up on
//! `wait_lock`, klock's queued spinlock, so they are served in arrival
//! order and spin on their own MCS node rather than on the counter. A
//! writer at the head of that queue sets the *writer-waiting* bit, which
//! turns away new readers (they queue behind it), so a steady stream of
//! readers cannot starve writers; readers already inside drain, then the
//! writer takes the lock. This is the lock the 2004 `tree_lock` patch
//! argued for: a read-mostly structure whose lookups can then run in
//! parallel.
//!
//! # The lock word (`cnts`)
//!
//! ```text
//!  31                                     10   9   8   7                 0
//! +-----------------------------------------+---+---+--------------------+
//! |      reader count (READER_BIAS = 1<<10) | S | W |  writer locked byte |
//! |    readers inside, plus readers passing |   |   |   0 or WLOCKED=0xff |
//! |    through the fast path that back out  |   |   |                     |
//! +-----------------------------------------+---+---+--------------------+
//! ```
//!
//! * **writer locked** (bits 0–7, [`WLOCKED`] = `0xff`): a writer owns the
//!   lock.
//! * **writer waiting** (bit 8, [`WAITING`]): the writer at the head of the
//!   `wait_lock` queue wants the lock; new readers must queue.
//! * **sleeper** (bit 9, [`SLEEPER`]): the `wait_lock` holder stopped
//!   spinning and sleeps on this word (futex); the release that makes its
//!   wait end must wake it.
//! * **readers** (bits 10–31, [`READER_BIAS`] each): up to 2²² − 1, far
//!   more than the 16,383 threads klock can index.
//!
//! `wait_lock` (a [`RawQSpinLock32`], 4 bytes) orders contended lockers: only
//! its holder may set `WAITING` or `SLEEPER`, or add a slow-path reader.
//! It is klock's paravirt qspinlock, so queued lockers sleep too.
//!
//! Before queueing, a contended locker polls the word for up to
//! [`crate::spin::QUICK_SPIN_NS`] while nobody is queued, and takes the
//! lock with one fast-path RMW if it comes free: most contended critical
//! sections end within the polls. The polls are spaced: a poll that had
//! to fetch the line from the holder is followed by a long gap
//! ([`crate::spin::QUICK_SPIN_GAP_NS`]), so that the holder is not robbed
//! of its line in every short critical section. The kernel queues at
//! once; in userspace the queue's RMWs on the word's cache line cost as
//! much as a short critical section. A queued locker is never passed: its `wait_lock`
//! ends the polls.
//!
//! # Waiting without spinning behind a preempted thread
//!
//! The `wait_lock` holder waits on the word: a reader for the writer to
//! go, a writer for the readers to drain. It spins for the paravirt spin
//! budget ([`crate::qspinlock::pv_tuning`]), then sets [`SLEEPER`] and
//! sleeps on the word. Every release (read unlock, write unlock, and a
//! fast-path reader's back-out) is an RMW whose result says whether it
//! ended that wait: `SLEEPER` and no reader or writer left for a waiting
//! writer (`(0,1,0)` plus `S`), `SLEEPER` and the writer byte clear for a
//! waiting reader (`WAITING` clear). That release wakes the sleeper; the
//! sleeper clears `SLEEPER` as it takes the lock.
//!
//! # State transitions
//!
//! Written as `(readers, waiting, locked)`; `r` any reader count, `*` any.
//!
//! ```text
//! read fast path      (r,0,0) -> (r+1,0,0)                fetch_add, acquire
//!   found a writer    (r,*,L) or (r,1,*): back out  (r+1,..) -> (r,..), then slow path
//! read quick poll     nobody queued (wait_lock free, waiting = 0): spaced
//!                     loads for up to QUICK_SPIN_NS; on (r,0,0) one
//!                     fast-path try, backed out if it fails; then queue
//! read slow path      under wait_lock: (r,*,*) -> (r+1,*,*), wait for locked = 0
//!                     (acquire; past the budget: set S, sleep), clear S,
//!                     release wait_lock
//! read unlock         (r+1,*,*) -> (r,*,*)                fetch_sub, release
//!
//! write fast path     (0,0,0) -> (0,0,L)                  CAS, acquire
//! write quick poll    nobody queued: spaced loads for up to QUICK_SPIN_NS;
//!                     on (0,0,0) one fast-path CAS; then queue
//! write slow path     under wait_lock:
//!   retry             (0,0,0) -> (0,0,L)                  CAS, acquire
//!   announce          (r,0,*) -> (r,1,*)                  fetch_or (blocks new readers)
//!   drain             wait for exactly (0,1,0)            readers and owner gone
//!                     (past the budget: set S, sleep)
//!   take it           (0,1,0)[+S] -> (0,0,L)              CAS, acquire; release wait_lock
//! write unlock        (*,*,L) -> (*,*,0)                  fetch_sub, release;
//!                     wakes a sleeping reader (S, WAITING clear), or a
//!                     sleeping writer if it left (0,1,0)+S
//! ```
//!
//! A transient `+1` of a fast-path reader that will back out can make the
//! writer's exact-match CAS fail; it re-waits (the reader backs out at once).
//!
//! # Memory ordering
//!
//! Every write to `cnts` is a 32-bit read-modify-write (the kernel's byte
//! store for write unlock becomes a `fetch_sub`, one access size per word: docs/design.md, Building blocks), so the word's
//! modification order is one release sequence: an acquire read of any value
//! synchronises with every release RMW (every unlock) before it. Each
//! `Acquire`/`Release` below says what it pairs with.
//!
//! # When to use it
//!
//! Read-mostly data with short critical sections: lookups run in parallel,
//! at the price of a slightly dearer uncontended write (the 2004 patch
//! measured ~240 ns more per one-byte write on a P4) and of the counter's
//! cache line bouncing between readers. No waiter spins for longer than
//! the spin budget, so more threads than CPUs do not collapse it (the
//! kernel's version spins until it gets the lock; a preempted holder or
//! queued waiter then stalls everyone). `klock bench treelock` and
//! `klock bench rwlock` weigh it against a spinlock and the usual peers.

use crate::events::{self, Event};
use crate::qspinlock::RawQSpinLock32;
use crate::sync::AtomicU32;
use crate::sync::Ordering::{self, Acquire, Relaxed, Release};

/// Writer locked byte (bits 0–7): the value of a writer-held lock.
pub const WLOCKED: u32 = 0xff;
/// Writer waiting (bit 8): a queued writer blocks new readers.
pub const WAITING: u32 = 1 << 8;
/// Either writer bit: a reader fast path that sees one must queue.
pub const WMASK: u32 = WLOCKED | WAITING;
/// The `wait_lock` holder sleeps on the word (bit 9).
pub const SLEEPER: u32 = 1 << 9;
/// Reader count: bit offset.
pub const READER_SHIFT: u32 = 10;
/// One reader.
pub const READER_BIAS: u32 = 1 << READER_SHIFT;
/// The reader count bits.
pub const READER_MASK: u32 = !(WMASK | SLEEPER);

const _: () = assert!(
    WMASK & READER_MASK == 0 && WMASK & SLEEPER == 0 && WMASK | SLEEPER | READER_MASK == u32::MAX
);

/// Algorithm variants, chosen at compile time. Only [`CORRECT`] is reachable
/// outside loom builds; the broken ones let the loom models show that they
/// catch a wrong lock.
const CORRECT: u8 = 0;
/// Broken: the writer takes the lock as soon as no writer holds it, without
/// waiting for readers to drain.
const NO_DRAIN: u8 = 1;
/// Broken: the reader fast path ignores the writer-waiting bit.
const IGNORE_WAITING: u8 = 2;
/// Broken: releases never wake a sleeper (a lost wake-up).
const NO_WAKE: u8 = 3;
/// Broken: the quick spin's reader keeps its probe whatever it found,
/// trusting the poll that showed no writer.
const QUICK_TRUSTS_POLL: u8 = 4;

/// Queued reader/writer spinlock (see the [module docs](self)). 8 bytes.
/// Use it through [`crate::RwLock`].
pub struct RawQRwLock {
    cnts: AtomicU32,
    wait_lock: RawQSpinLock32,
    /// Loom only: which paths an execution went through.
    #[cfg(loom)]
    probe: Probe,
    /// Loom only: the quick spin is off (models of the queue).
    #[cfg(loom)]
    loom_no_quick_spin: std::sync::atomic::AtomicBool,
}

/// Under loom: plain-load re-reads explored per wait before pruning (the
/// same scheme as the qspinlock's `Spin`; see there for why).
#[cfg(loom)]
const LOOM_SPIN_EXPLORE: u32 = 3;

impl RawQRwLock {
    /// An unlocked lock.
    #[cfg(not(loom))]
    pub const fn new() -> Self {
        Self {
            cnts: AtomicU32::new(0),
            wait_lock: RawQSpinLock32::new(),
        }
    }

    /// An unlocked lock (loom atomics cannot be built in a `const fn`).
    #[cfg(loom)]
    pub fn new() -> Self {
        Self {
            cnts: AtomicU32::new(0),
            wait_lock: RawQSpinLock32::new(),
            probe: Probe::default(),
            loom_no_quick_spin: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// The counter word, for tests and debugging (a plain, possibly stale load).
    #[doc(hidden)]
    #[inline]
    pub fn word(&self) -> u32 {
        self.cnts.load(Relaxed)
    }

    /// Wait until `done(cnts)`; returns the value that satisfied it. Natively
    /// a relax-and-load loop. Under loom the first re-reads are explored,
    /// then the branch is pruned and the wait reads the newest value (see
    /// `Spin` in qspinlock.rs).
    #[inline(always)]
    fn wait_until(&self, order: Ordering, done: impl Fn(u32) -> bool) -> u32 {
        let mut v = self.cnts.load(order);
        #[cfg(loom)]
        let mut rereads = 0u32;
        while !done(v) {
            crate::spin::cpu_relax();
            #[cfg(loom)]
            {
                rereads += 1;
                if rereads == LOOM_SPIN_EXPLORE + 1 {
                    loom::skip_branch();
                }
                if rereads > LOOM_SPIN_EXPLORE {
                    v = self.cnts.fetch_or(0, order);
                    continue;
                }
            }
            v = self.cnts.load(order);
        }
        v
    }

    /// Take the lock shared.
    #[inline]
    pub fn raw_read_lock(&self) {
        self.read_lock_with::<CORRECT>();
    }

    /// Take the lock shared if no writer holds it or waits for it.
    #[inline]
    pub fn raw_try_read_lock(&self) -> bool {
        if self.cnts.load(Relaxed) & WMASK != 0 {
            return false;
        }
        // Acquire pairs with the Release of the last write unlock.
        let c = self.cnts.fetch_add(READER_BIAS, Acquire);
        if c & WMASK == 0 {
            return true;
        }
        // Relaxed: we read nothing under the lock. Our transient bias may
        // have been all that kept a sleeping writer waiting.
        let old = self.cnts.fetch_sub(READER_BIAS, Relaxed);
        self.released::<CORRECT>(old - READER_BIAS);
        false
    }

    /// Release a shared hold.
    ///
    /// # Safety
    /// The caller (or the thread that handed it its guard) holds the lock shared.
    #[inline]
    pub unsafe fn raw_read_unlock(&self) {
        self.read_unlock_with::<CORRECT>()
    }

    #[inline(always)]
    fn read_unlock_with<const MODE: u8>(&self) {
        // (r+1,*,*) -> (r,*,*). Release pairs with the Acquire of the writer
        // that takes the lock after the readers drained (its final CAS).
        let old = self.cnts.fetch_sub(READER_BIAS, Release);
        debug_assert!(
            old & READER_MASK != 0,
            "read unlock of a qrwlock without readers"
        );
        self.released::<MODE>(old.wrapping_sub(READER_BIAS));
    }

    /// After a release RMW that left `new`: wake the sleeping `wait_lock`
    /// holder if this release ended its wait. One branch on the fast path:
    /// `SLEEPER` is clear unless somebody sleeps.
    #[inline(always)]
    fn released<const MODE: u8>(&self, new: u32) {
        if new & SLEEPER != 0 && MODE != NO_WAKE {
            self.wake_sleeper(new);
        }
    }

    #[cold]
    #[inline(never)]
    fn wake_sleeper(&self, new: u32) {
        // A waiting writer (WAITING set: only a writer holding wait_lock sets
        // it) waits for no reader and no writer; a waiting reader (WAITING
        // clear) for the writer byte to clear.
        let ended = if new & WAITING != 0 {
            new & !SLEEPER == WAITING
        } else {
            new & WLOCKED == 0
        };
        if ended {
            events::inc(Event::QrwWake);
            #[cfg(loom)]
            Probe::hit(&self.probe.wakes);
            crate::qspinlock::pv_ops::pv_kick(crate::qspinlock::pv_ops::futex_key(&self.cnts));
        }
    }

    /// Take the lock exclusively.
    #[inline]
    pub fn raw_write_lock(&self) {
        self.write_lock_with::<CORRECT>();
    }

    /// Take the lock exclusively if it is free; never spins.
    #[inline]
    pub fn raw_try_write_lock(&self) -> bool {
        // Read first: a CAS would steal the line from the readers for nothing.
        // Acquire (on the CAS) pairs with the Release of the last unlock.
        self.cnts.load(Relaxed) == 0
            && self
                .cnts
                .compare_exchange(0, WLOCKED, Acquire, Relaxed)
                .is_ok()
    }

    /// Release an exclusive hold.
    ///
    /// # Safety
    /// The caller (or the thread that handed it its guard) holds the lock exclusively.
    #[inline]
    pub unsafe fn raw_write_unlock(&self) {
        self.write_unlock_with::<CORRECT>()
    }

    #[inline(always)]
    fn write_unlock_with<const MODE: u8>(&self) {
        // (*,*,L) -> (*,*,0). A 32-bit RMW, not a byte store: it must also
        // tell whether a sleeper waits. Release pairs with the Acquire of
        // the next owner: a reader's fast-path fetch_add or slow-path wait,
        // or a writer's CAS.
        let old = self.cnts.fetch_sub(WLOCKED, Release);
        debug_assert_eq!(
            old & WLOCKED,
            WLOCKED,
            "write unlock of a qrwlock not write-held"
        );
        self.released::<MODE>(old - WLOCKED);
    }

    /// A writer holds it, waits for it, or readers are inside.
    #[inline]
    pub fn is_locked_any(&self) -> bool {
        self.cnts.load(Relaxed) != 0
    }

    #[inline(always)]
    fn read_lock_with<const MODE: u8>(&self) {
        // (r,0,0) -> (r+1,0,0). Acquire pairs with the Release of the last
        // write unlock: the writer's data is visible if we stay.
        let c = self.cnts.fetch_add(READER_BIAS, Acquire);
        let blocked = if MODE == IGNORE_WAITING {
            WLOCKED // BROKEN (loom only): walks past a waiting writer
        } else {
            WMASK
        };
        if c & blocked != 0 {
            self.read_lock_slow::<MODE>();
        }
    }

    /// A writer holds or waits: back out and queue behind it.
    #[cold]
    #[inline(never)]
    fn read_lock_slow<const MODE: u8>(&self) {
        // Back out the fast path's bias. Relaxed: nothing was read; a
        // draining writer waits for this to reach exactly (0,1,0), and if
        // it sleeps, this back-out may be what ends its wait.
        let old = self.cnts.fetch_sub(READER_BIAS, Relaxed);
        self.released::<MODE>(old - READER_BIAS);
        if self.quick_spin::<MODE>(false) {
            return;
        }
        events::inc(Event::QrwReadQueued);
        #[cfg(loom)]
        Probe::hit(&self.probe.reader_queued);

        // FIFO with every other contended locker.
        self.wait_lock.raw_lock();
        // Holding wait_lock, no writer can be waiting (only the holder sets
        // WAITING). A writer may still own the lock: our bias now stops the
        // next writer's fast path, and we wait for this one to go. Relaxed:
        // the wait below acquires.
        self.cnts.fetch_add(READER_BIAS, Relaxed);
        // Acquire pairs with the Release of the owning writer's unlock.
        let c = self.wait_or_sleep(Acquire, |c| c & WLOCKED == 0);
        if c & SLEEPER != 0 {
            // Our mark; nobody else sets it while we hold wait_lock.
            self.cnts.fetch_and(!SLEEPER, Relaxed);
        }
        // SAFETY: taken above, on this thread.
        unsafe { self.wait_lock.raw_unlock() };
    }

    /// The `wait_lock` holder's wait for `done(cnts)`: spin for the spin
    /// budget, then sleep on the word with [`SLEEPER`] set until a release
    /// that ends the wait wakes it. Returns the value that satisfied
    /// `done` (with `SLEEPER` if we set it).
    fn wait_or_sleep(&self, order: Ordering, done: impl Fn(u32) -> bool) -> u32 {
        use crate::qspinlock::pv_ops::{pv_wait, spin_ns, Budget};
        let mut budget = Budget::new(spin_ns());
        let mut v = self.cnts.load(order);
        loop {
            if done(v) {
                return v;
            }
            if budget.due() && budget.spent() {
                break;
            }
            crate::spin::cpu_relax();
            v = self.cnts.load(order);
        }
        loop {
            if done(v) {
                return v;
            }
            // Mark, then sleep while the word stays as marked. A release
            // between our read and the mark makes the CAS fail; one after
            // it sees SLEEPER (one word, RMWs only: no lost wake-up).
            if v & SLEEPER == 0 {
                // `order` on failure too: the value it reads may end the
                // wait, and a reader must acquire the writer's unlock.
                match self.cnts.compare_exchange(v, v | SLEEPER, order, order) {
                    Ok(_) => v |= SLEEPER,
                    Err(now) => {
                        v = now;
                        continue;
                    }
                }
            }
            events::inc(Event::QrwSleep);
            #[cfg(loom)]
            Probe::hit(&self.probe.sleeps);
            pv_wait(&self.cnts, v);
            // Woken, or the word changed before we slept: look again.
            // `order` so that the value that ends the wait is acquired.
            #[cfg(not(loom))]
            {
                v = self.cnts.load(order);
            }
            #[cfg(loom)]
            {
                // Loom may hand a plain load a stale value forever; an RMW
                // that changes nothing reads the newest.
                v = self.cnts.fetch_or(0, order);
            }
        }
    }

    /// Spaced read-only polls of the word (the quick spin of
    /// [`crate::spin`]) before queueing on `wait_lock`, while nobody is
    /// queued (`wait_lock` free, `WAITING` clear): most contended
    /// critical sections end within them, and the lock is then taken with
    /// one RMW, the fast path's, without the queue. A queued locker is
    /// never passed (its `wait_lock` stops the polls), so the order of
    /// the queue stays FIFO. A reader must come here with its
    /// fast-path bias backed out. With one reader and one writer on two
    /// CPUs and tiny critical sections (`klock bench rwsem-rate --locks
    /// qrwlock`, 2 threads) the lock went from 3,286–5,664 to 5,026–7,423
    /// kop/s (`docs/locks/rwlock.md`); spacing the polls took it further
    /// (`docs/locks/rwsem.md`, "The quick spin's gap").
    #[inline]
    fn quick_spin<const MODE: u8>(&self, writer: bool) -> bool {
        #[cfg(loom)]
        if self
            .loom_no_quick_spin
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            return false;
        }
        // One probe: a lost race means real contention.
        let got = crate::spin::quick_poll(|| {
            let c = self.cnts.load(Relaxed);
            if c & WAITING != 0 || self.wait_lock.is_contended_or_locked() {
                return Some(false);
            }
            if writer {
                // (0,0,0) -> (0,0,L), as the fast path. Acquire pairs
                // with the Release of the last unlock.
                return (c == 0).then(|| {
                    self.cnts
                        .compare_exchange(0, WLOCKED, Acquire, Relaxed)
                        .is_ok()
                });
            }
            if c & WLOCKED != 0 {
                return None;
            }
            // (r,0,0) -> (r+1,0,0), as the fast path. Acquire pairs with
            // the Release of the last write unlock.
            let old = self.cnts.fetch_add(READER_BIAS, Acquire);
            let blocked = if MODE == QUICK_TRUSTS_POLL {
                0 // BROKEN (loom only): keeps the probe unchecked
            } else {
                WMASK
            };
            if old & blocked != 0 {
                // Relaxed: nothing was read; a sleeping writer may wait
                // for exactly this back-out.
                let old = self.cnts.fetch_sub(READER_BIAS, Relaxed);
                self.released::<MODE>(old - READER_BIAS);
                return Some(false);
            }
            Some(true)
        });
        if got {
            events::inc(if writer {
                Event::QrwWriteQuick
            } else {
                Event::QrwReadQuick
            });
            #[cfg(loom)]
            Probe::hit(&self.probe.quick_spins);
        }
        got
    }

    #[inline(always)]
    fn write_lock_with<const MODE: u8>(&self) {
        // (0,0,0) -> (0,0,L). Acquire pairs with the Release of the last unlock.
        if self
            .cnts
            .compare_exchange(0, WLOCKED, Acquire, Relaxed)
            .is_err()
        {
            self.write_lock_slow::<MODE>();
        }
    }

    #[cold]
    #[inline(never)]
    fn write_lock_slow<const MODE: u8>(&self) {
        if self.quick_spin::<MODE>(true) {
            return;
        }
        events::inc(Event::QrwWriteQueued);
        self.wait_lock.raw_lock();
        #[cfg(loom)]
        Probe::hit(&self.probe.writer_queued);

        // The lock may have come free while we queued. Acquire pairs with
        // the Release of the last unlock.
        if self.cnts.load(Relaxed) == 0
            && self
                .cnts
                .compare_exchange(0, WLOCKED, Acquire, Relaxed)
                .is_ok()
        {
            // SAFETY: taken above, on this thread.
            unsafe { self.wait_lock.raw_unlock() };
            return;
        }

        // (r,0,*) -> (r,1,*): new readers now queue behind us. Relaxed: an
        // announcement; nothing is published or acquired by it.
        self.cnts.fetch_or(WAITING, Relaxed);

        loop {
            if MODE == NO_DRAIN {
                // BROKEN (loom only): do not wait for readers to drain.
                let c = self.wait_until(Relaxed, |c| c & WLOCKED == 0);
                if self
                    .cnts
                    .compare_exchange(c, c - WAITING + WLOCKED, Acquire, Relaxed)
                    .is_ok()
                {
                    break;
                }
                continue;
            }
            // Drain: wait for exactly (0,1,0), with our SLEEPER mark if we
            // slept. Relaxed: the CAS acquires.
            let c = self.wait_or_sleep(Relaxed, |c| c & !SLEEPER == WAITING);
            // (0,1,0)[+S] -> (0,0,L). Acquire pairs with the Release of the
            // last read unlock and of the previous writer's unlock (one
            // release sequence). Fails only on a fast-path reader's
            // transient bias.
            if self
                .cnts
                .compare_exchange(c, WLOCKED, Acquire, Relaxed)
                .is_ok()
            {
                break;
            }
            #[cfg(loom)]
            Probe::hit(&self.probe.writer_cas_retry);
        }
        // SAFETY: taken above, on this thread.
        unsafe { self.wait_lock.raw_unlock() };
    }
}

impl Default for RawQRwLock {
    fn default() -> Self {
        Self::new()
    }
}

impl core::fmt::Debug for RawQRwLock {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let c = self.word();
        f.debug_struct("RawQRwLock")
            .field("readers", &(c >> READER_SHIFT))
            .field("writer_waiting", &(c & WAITING != 0))
            .field("writer_locked", &(c & WLOCKED == WLOCKED))
            .finish()
    }
}

// SAFETY: readers exclude writers and writers exclude everybody, as argued
// in the module docs and checked by the loom models; every successful lock
// path acquires, every unlock releases. Unlock touches only the counter
// word, so guards may move between threads (GuardSend).
#[cfg(not(loom))]
unsafe impl lock_api::RawRwLock for RawQRwLock {
    #[allow(clippy::declare_interior_mutable_const)]
    const INIT: Self = Self::new();
    type SharedGuard = lock_api::GuardSend;
    type ExclusiveGuard = lock_api::GuardSend;

    #[inline]
    fn lock_shared(&self) -> Self::SharedGuard {
        self.raw_read_lock();
        lock_api::GuardSend::new()
    }

    #[inline]
    fn try_lock_shared(&self) -> Option<Self::SharedGuard> {
        self.raw_try_read_lock().then(lock_api::GuardSend::new)
    }

    #[inline]
    unsafe fn unlock_shared(&self, _guard: Self::SharedGuard) {
        // SAFETY: the caller passes the guard of a shared hold.
        unsafe { self.raw_read_unlock() }
    }

    #[inline]
    fn lock_exclusive(&self) -> Self::ExclusiveGuard {
        self.raw_write_lock();
        lock_api::GuardSend::new()
    }

    #[inline]
    fn try_lock_exclusive(&self) -> Option<Self::ExclusiveGuard> {
        self.raw_try_write_lock().then(lock_api::GuardSend::new)
    }

    #[inline]
    unsafe fn unlock_exclusive(&self, _guard: Self::ExclusiveGuard) {
        // SAFETY: the caller passes the guard of an exclusive hold.
        unsafe { self.raw_write_unlock() }
    }

    /// Readers inside, a writer inside, or a writer waiting.
    #[inline]
    fn is_locked(&self) -> bool {
        self.is_locked_any()
    }

    /// A writer holds the lock.
    #[inline]
    fn is_locked_exclusive(&self) -> bool {
        self.cnts.load(Relaxed) & WLOCKED == WLOCKED
    }
}

/// Loom-only record of the paths one model execution took.
#[cfg(loom)]
#[derive(Debug, Default)]
#[doc(hidden)]
pub struct Probe {
    /// A reader found a writer (holding or waiting) and queued.
    pub reader_queued: std::sync::atomic::AtomicU32,
    /// A writer went through `wait_lock`.
    pub writer_queued: std::sync::atomic::AtomicU32,
    /// A draining writer's (0,1,0) -> (0,0,L) CAS failed.
    pub writer_cas_retry: std::sync::atomic::AtomicU32,
    /// The `wait_lock` holder slept on the word.
    pub sleeps: std::sync::atomic::AtomicU32,
    /// A release woke the sleeper.
    pub wakes: std::sync::atomic::AtomicU32,
    /// The quick spin took the lock.
    pub quick_spins: std::sync::atomic::AtomicU32,
}

#[cfg(loom)]
impl Probe {
    fn hit(c: &std::sync::atomic::AtomicU32) {
        c.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}

#[cfg(loom)]
impl RawQRwLock {
    /// Loom only: paths this lock's executions went through.
    #[doc(hidden)]
    pub fn probe(&self) -> &Probe {
        &self.probe
    }

    /// Loom only: the newest value of the word (an RMW that changes nothing).
    #[doc(hidden)]
    pub fn word_newest(&self) -> u32 {
        self.cnts.fetch_or(0, Relaxed)
    }

    /// Loom only: turn the quick spin off, so that a model's lockers reach
    /// the queue (each poll's relax is a loom yield, which lets the owner
    /// release first).
    #[doc(hidden)]
    pub fn set_loom_no_quick_spin(&self) {
        self.loom_no_quick_spin
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Deliberately broken variants, compiled only for loom, so the models can
/// show that they fail on a wrong lock.
#[cfg(loom)]
#[doc(hidden)]
pub mod broken {
    use super::*;

    macro_rules! broken_rwlock {
        ($(#[$doc:meta])* $name:ident, $mode:expr) => {
            $(#[$doc])*
            #[derive(Debug, Default)]
            pub struct $name(pub RawQRwLock);

            impl $name {
                pub fn new() -> Self {
                    Self(RawQRwLock::new())
                }
                pub fn raw_read_lock(&self) {
                    self.0.read_lock_with::<{ $mode }>();
                }
                pub fn raw_write_lock(&self) {
                    self.0.write_lock_with::<{ $mode }>();
                }
                /// # Safety
                /// As [`RawQRwLock::raw_read_unlock`].
                pub unsafe fn raw_read_unlock(&self) {
                    self.0.read_unlock_with::<{ $mode }>()
                }
                /// # Safety
                /// As [`RawQRwLock::raw_write_unlock`].
                pub unsafe fn raw_write_unlock(&self) {
                    self.0.write_unlock_with::<{ $mode }>()
                }
            }
        };
    }

    broken_rwlock!(
        /// The writer does not wait for readers to drain: it takes the lock
        /// as soon as no other writer owns it, beside readers still inside.
        NoDrain,
        NO_DRAIN
    );
    broken_rwlock!(
        /// The reader fast path ignores the writer-waiting bit: new readers
        /// overtake a queued writer (and can starve it).
        IgnoreWaiting,
        IGNORE_WAITING
    );
    broken_rwlock!(
        /// Releases never wake the sleeping `wait_lock` holder: a reader
        /// behind a writer, or a writer waiting for readers, sleeps forever.
        NoWake,
        NO_WAKE
    );
    broken_rwlock!(
        /// The quick spin's reader keeps its probe unchecked: a writer
        /// that took the lock after the poll runs beside it.
        QuickTrustsPoll,
        QUICK_TRUSTS_POLL
    );
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use lock_api::RawRwLock;

    #[test]
    fn eight_bytes_and_states() {
        assert_eq!(core::mem::size_of::<RawQRwLock>(), 8);
        let l = RawQRwLock::INIT;
        assert!(!l.is_locked());
        let r1 = l.lock_shared();
        let r2 = l.try_lock_shared().expect("readers share");
        assert_eq!(l.word(), 2 * READER_BIAS);
        assert!(l.try_lock_exclusive().is_none());
        unsafe { l.unlock_shared(r1) };
        unsafe { l.unlock_shared(r2) };
        assert_eq!(l.word(), 0);
        let w = l.lock_exclusive();
        assert_eq!(l.word(), WLOCKED);
        assert!(l.try_lock_shared().is_none());
        assert!(l.try_lock_exclusive().is_none());
        assert_eq!(l.word(), WLOCKED, "failed trylocks leave no trace");
        unsafe { l.unlock_exclusive(w) };
        assert_eq!(l.word(), 0);
        assert!(format!("{l:?}").contains("readers: 0"));
    }

    /// A writer queued behind a reader sets WAITING; a new reader then
    /// cannot get in (try fails, lock queues) until the writer has been.
    #[test]
    fn waiting_writer_blocks_new_readers() {
        let l = RawQRwLock::new();
        let order = std::sync::Mutex::new(Vec::new());
        l.raw_read_lock();
        std::thread::scope(|s| {
            s.spawn(|| {
                l.raw_write_lock();
                order.lock().unwrap().push("writer");
                unsafe { l.raw_write_unlock() };
            });
            while l.word() & WAITING == 0 {
                std::thread::yield_now();
            }
            assert!(
                !l.raw_try_read_lock(),
                "a waiting writer must block try_read"
            );
            s.spawn(|| {
                l.raw_read_lock();
                order.lock().unwrap().push("reader2");
                unsafe { l.raw_read_unlock() };
            });
            // Give reader 2 time to queue behind the writer.
            std::thread::sleep(std::time::Duration::from_millis(20));
            assert!(order.lock().unwrap().is_empty(), "nobody may pass reader 1");
            unsafe { l.raw_read_unlock() };
        });
        assert_eq!(*order.lock().unwrap(), ["writer", "reader2"]);
        assert_eq!(l.word(), 0);
    }

    #[test]
    fn rwlock_alias() {
        let l = crate::RwLock::new(1u32);
        {
            let a = l.read();
            let b = l.read();
            assert_eq!(*a + *b, 2);
            assert!(l.try_write().is_none());
        }
        *l.write() += 1;
        assert_eq!(*l.read(), 2);
    }

    /// A writer behind a long read hold polls briefly, queues, sleeps and
    /// is woken by the read unlock; a reader behind a writer that releases
    /// at once takes the lock in its polls. Counted as such.
    #[test]
    fn queueing_sleeping_and_quick_spins_are_counted() {
        use crate::events;
        let _serial = events::TEST_SERIAL
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let count = |snap: &[(&str, u64)], name: &str| {
            snap.iter().find(|(n, _)| *n == name).map_or(0, |&(_, v)| v)
        };
        let before = events::snapshot(events::LockType::QRwLock);
        let l = RawQRwLock::new();
        l.raw_read_lock();
        std::thread::scope(|s| {
            s.spawn(|| {
                l.raw_write_lock();
                unsafe { l.raw_write_unlock() };
            });
            // Hold until the writer sleeps on the word (past its spin
            // budget, which is at most tens of microseconds).
            while l.word() & SLEEPER == 0 {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            unsafe { l.raw_read_unlock() };
        });
        assert_eq!(l.word(), 0);

        // Many short write holds against a reader: with two CPUs some
        // read locks come through the polls. A single CPU cannot show it.
        let polled = std::sync::atomic::AtomicBool::new(false);
        if std::thread::available_parallelism().map_or(1, |n| n.get()) > 1 {
            let stop = std::sync::atomic::AtomicBool::new(false);
            std::thread::scope(|s| {
                s.spawn(|| {
                    while !stop.load(Relaxed) {
                        l.raw_write_lock();
                        unsafe { l.raw_write_unlock() };
                    }
                });
                let t0 = std::time::Instant::now();
                while t0.elapsed() < std::time::Duration::from_secs(2) {
                    l.raw_read_lock();
                    unsafe { l.raw_read_unlock() };
                    let now = events::snapshot(events::LockType::QRwLock);
                    if count(&now, "read_quick") > count(&before, "read_quick")
                        || !events::enabled()
                    {
                        polled.store(true, Relaxed);
                        break;
                    }
                }
                stop.store(true, Relaxed);
            });
        }
        let after = events::snapshot(events::LockType::QRwLock);
        let delta = |name: &str| count(&after, name) - count(&before, name);
        if events::enabled() {
            assert!(delta("write_queued") >= 1, "{after:?}");
            assert!(delta("sleep") >= 1, "{after:?}");
            assert!(delta("wake") >= 1, "{after:?}");
            if std::thread::available_parallelism().map_or(1, |n| n.get()) > 1 {
                assert!(
                    polled.into_inner(),
                    "no read lock came through the polls: {after:?}"
                );
            }
        } else {
            assert!(after.iter().all(|&(_, v)| v == 0));
        }
    }
}
