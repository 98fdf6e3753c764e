//! The compact mutex, [`RawMutexCompact`]: the design of [`crate::mutex`]
//! in 40 bytes.

use super::slow::{count_sleep, count_spin_fail, skip_futile};
use super::{handoff_ns, owner_spin, LazyWait};
use crate::events::{self, Event};
use crate::oncpu::{self, SpinStats, MAX_OWNER_BUDGETS};
use crate::osq::Osq;
use crate::ownerspin::OwnerSpin;
use crate::spin::cpu_relax;
use crate::sync::Ordering::{Acquire, Relaxed, Release};
use crate::sync::{AtomicU32, UnsafeCell};
use crate::sys::monotonic_ns;
use crate::thread;
use crate::waitlist::{
    futex_addr, park, wake_later, wake_pending, AbortOnUnwind, Linked, Links, WaitList, W_PARKED,
    W_WAITING, W_WOKEN,
};
use crate::waitlock::{WaitLockRaw, YieldLock};

/// Owner word: the wait list is non-empty (unlock must wake its head).
pub const C_WAITERS: u32 = 1 << 0;
/// Owner word: the first waiter starves; unlock hands the lock to it.
pub const C_HANDOFF: u32 = 1 << 1;
/// Owner word: handed off; the named waiter has yet to pick it up.
pub const C_PICKUP: u32 = 1 << 2;
/// Owner word: the first waiter has been woken and has not yet gone back
/// to sleep; an unlock need not wake it (set with `WAITERS` only).
pub const C_WOKEN: u32 = 1 << 3;
/// All flag bits.
pub const C_FLAGS: u32 = C_WAITERS | C_HANDOFF | C_PICKUP | C_WOKEN;
/// `WAITERS|WOKEN`: the flags a locker keeps when it takes the lock, and
/// the ones an unlock may leave without a wake-up.
const C_WW: u32 = C_WAITERS | C_WOKEN;
/// The owner's tid sits above the flags.
pub const C_OWNER_SHIFT: u32 = 4;
/// Bits of a Linux tid: it stays below `PID_MAX_LIMIT`, 2^22.
const TID_BITS: u32 = 22;
/// The owner field: bits 4..26.
const OWNER_MASK: u32 = ((1 << TID_BITS) - 1) << C_OWNER_SHIFT;
/// Owner word (bit 26): this lock's adaptive spin test is counting
/// acquisitions (its state in a table beside the locks, see `compact_adapt.rs`). The fast paths'
/// CAS from 0 fails while it is set, so every acquisition takes the slow
/// path, where the new holder counts it.
pub const C_COUNTING: u32 = 1 << (C_OWNER_SHIFT + TID_BITS);

/// The tid of the thread that holds a lock whose word is `w`: none if it
/// is free, or handed over and not yet picked up.
#[inline]
fn holder(w: u32) -> Option<u32> {
    (w & OWNER_MASK != 0 && w & C_PICKUP == 0).then_some((w & OWNER_MASK) >> C_OWNER_SHIFT)
}

/// Whether an unlock that left the flags `f` must take the slow path: a
/// waiter is queued and either none is awake (`WAITERS` without `WOKEN`)
/// or the first one demanded a hand-off.
#[inline(always)]
fn wake_due(f: u32) -> bool {
    f & C_WAITERS != 0 && f & (C_WOKEN | C_HANDOFF) != C_WOKEN
}

/// A sleeping locker, on its own stack, linked into the wait list (links
/// protected by `wait_lock`).
struct Waiter {
    state: AtomicU32,
    links: Links<Waiter>,
    /// The waiter's owner identity (for a hand-off).
    id: u32,
}

impl Linked for Waiter {
    fn links(&self) -> &Links<Self> {
        &self.links
    }
}

/// A compact mutex: the design of [`crate::mutex`] in 40 bytes, for storage whose
/// size someone else fixed (a C `pthread_mutex_t`, which is 40 bytes on
/// x86-64 glibc: `klock-preload` replaces glibc's mutex with this one in
/// place).
///
/// [`RawMutex`](crate::mutex::RawMutex) is 96 bytes, most of it the adaptive
/// spin test's state. This form keeps the kernel design (an owner word
/// naming the owner's tid, optimistic spinning while the owner runs, then
/// a FIFO of sleepers each on its own futex word, and the hand-off that
/// stops spinners from starving sleepers) and the full mutex's `WOKEN` bit
/// (an unlock wakes the first waiter only if it is not awake already). Two
/// userspace additions differ:
///
/// * the adaptive test ([`crate::spinadapt`]) keeps its state in a table
///   beside the locks (a few hundred slots, one cache line each), claimed
///   when a lock is first contended and given up when its test stops
///   counting; while it runs, the owner word carries `COUNTING` and every
///   acquisition takes the slow path, which counts it. A lock whose slot is
///   busy with another lock's test spins as the kernel does
///   ([`crate::mutex::OWNER_SPIN_FIXED`] semantics);
/// * the spinner seats: instead of counting spinners, a new locker spins
///   only if the OSQ is empty, so at most one new locker and the first
///   waiter spin on one lock (the seat limit on 2 CPUs is one).
///
/// # Layout
///
/// `repr(C)`, 8-byte aligned, all-zero bytes an unlocked mutex:
///
/// | bytes | field | |
/// |---|---|---|
/// | 0..4 | `owner` | `gen << 27 \| COUNTING \| tid << 4 \| WOKEN \| PICKUP \| HANDOFF \| WAITERS` |
/// | 4..8 | `osq` | tail of the optimistic spinners' queue |
/// | 8..12 | `wait_lock` | protects `list` and the setting of `WAITERS`/`HANDOFF`/`WOKEN` |
/// | 12..16 | `spin` | adaptive spin budget ([`SpinStats`]) |
/// | 16..24 | `spare` | two words the lock never touches, for its embedder |
/// | 24..40 | `list` | FIFO of sleeping waiters (head, tail) |
///
/// The spare words sit where glibc keeps a mutex's kind (offset 16), so
/// an embedder can leave glibc's static initializers' kind in place.
///
/// A Linux tid is below 2^22 (`PID_MAX_LIMIT`), so `tid << 4` leaves the
/// top 6 bits free: `COUNTING`, and the fork generation of the wait list
/// ([`crate::thread::fork_generation`]) in the 5 above it.
///
/// # State transitions
///
/// As in [`crate::mutex`]: fast lock `(0, -) -> (me, -)` (any flag left in
/// a free word, `WAITERS|WOKEN` or `COUNTING`, sends it to the slow-path
/// trylock `(0, F) -> (me, F & (WW|COUNTING))`); fast unlock `(me, F) ->
/// (0, F)` by `fetch_sub`, then, with `WAITERS` but without `WOKEN`, or
/// with `HANDOFF`, under `wait_lock` hand a `HANDOFF` lock to the first
/// waiter `(0, HANDOFF|F) -> (W, PICKUP|WAITERS|WOKEN)` and mark it woken
/// `(X, F) -> (X, F|WOKEN)`; the first waiter clears `WOKEN` under
/// `wait_lock` before its last trylock ahead of sleeping, sets `HANDOFF`
/// after [`crate::mutex::handoff_ns`], and clears `WOKEN` when it leaves
/// with the lock (the next first waiter sleeps); the last waiter to leave
/// clears `WAITERS|WOKEN|HANDOFF`. Orderings as argued in [`crate::mutex`]: acquiring CASes
/// `Acquire`, releasing RMWs `Release`, flag RMWs `Relaxed` (ordered with
/// the releases by the word's modification order, the list by
/// `wait_lock`).
///
/// In a forked child ([`crate::after_fork_in_child`]), the waiters queued at the
/// fork and a holder of `wait_lock` stayed in the parent: the wait list's
/// generation (in the owner word) and `wait_lock`'s held value (tagged
/// with its holder's generation) tell, and the first child thread to take
/// `wait_lock` forgets them (`compact_fork.rs`).
///
/// Driven without guards: the owner word says who holds it, so callers (a
/// C API) need no place to keep one.
#[repr(C, align(8))]
pub struct RawMutexCompact {
    owner: AtomicU32,
    osq: Osq,
    /// Held with [`crate::thread::fork_tag`] (see `compact_fork.rs`).
    wait_lock: YieldLock,
    spin: SpinStats,
    spare: [AtomicU32; 2],
    list: UnsafeCell<WaitList<Waiter>>,
    /// Loom only: the model's switches and counters (`compact_loom.rs`).
    #[cfg(loom)]
    loom: compact_loom::LoomState,
}

#[cfg(not(loom))]
const _: () = assert!(core::mem::size_of::<RawMutexCompact>() == 40);
#[cfg(not(loom))]
const _: () = assert!(core::mem::offset_of!(RawMutexCompact, spare) == 16);

// SAFETY: the list's pointers name waiters that stay alive while linked,
// and the list is only touched under wait_lock; the rest is atomic.
unsafe impl Send for RawMutexCompact {}
// SAFETY: as above.
unsafe impl Sync for RawMutexCompact {}

impl RawMutexCompact {
    /// An unlocked mutex (all-zero bytes).
    #[cfg(not(loom))]
    pub const fn new() -> Self {
        Self {
            owner: AtomicU32::new(0),
            osq: Osq::new(),
            wait_lock: YieldLock::INIT,
            spin: SpinStats::new(),
            spare: [AtomicU32::new(0), AtomicU32::new(0)],
            list: UnsafeCell::new(WaitList::new()),
        }
    }

    /// The two words at bytes 16..24 that the lock never reads or writes.
    #[inline]
    pub fn spare(&self) -> &[AtomicU32; 2] {
        &self.spare
    }

    /// Held, or handed to a waiter that has not picked it up. A snapshot.
    #[inline]
    pub fn is_locked(&self) -> bool {
        self.owner.load(Relaxed) & OWNER_MASK != 0
    }

    /// The holder's tid (not a waiter's it was handed to). A snapshot;
    /// exact when it names the caller, who alone can set or clear that.
    #[inline]
    pub fn owner_tid(&self) -> Option<u32> {
        holder(self.owner.load(Relaxed))
    }

    /// Whether the calling thread holds the lock.
    #[inline]
    pub fn held_by_me(&self) -> bool {
        self.held_by(thread::current_tid())
    }

    /// Whether the thread `tid` holds the lock: [`held_by_me`](Self::held_by_me)
    /// for a caller that has its tid at hand (each lookup of it is a
    /// thread-local access, a call in a shared library).
    #[inline]
    pub fn held_by(&self, tid: u32) -> bool {
        self.owner_tid() == Some(tid)
    }

    /// The raw owner word, for tests and debugging.
    #[doc(hidden)]
    pub fn word(&self) -> u32 {
        self.owner.load(Relaxed)
    }

    /// Acquire the lock, waiting as long as it takes. A thread that holds
    /// it already waits forever (a self-deadlock, as POSIX's normal mutex).
    #[inline]
    pub fn lock(&self) {
        self.lock_as(thread::current_tid());
    }

    /// [`lock`](Self::lock) by a caller that has its tid at hand (each
    /// lookup of it is a thread-local access, a call in a shared
    /// library). `tid` must be the caller's ([`thread::current_tid`]) for
    /// the owner word to name the holder.
    #[inline]
    pub fn lock_as(&self, tid: u32) {
        let me = tid << C_OWNER_SHIFT;
        // (0, -) -> (me, -). Acquire pairs with the previous owner's
        // Release unlock.
        if let Err(w) = self.owner.compare_exchange(0, me, Acquire, Relaxed) {
            self.lock_slow(me, None, w);
        }
    }

    /// [`lock_as`](Self::lock_as) unless `tid` holds the lock already:
    /// `false`, and nothing changed, if it does (a recursive mutex's
    /// relock, an errorcheck mutex's `EDEADLK`). One CAS either way: its
    /// failure value tells whether the caller holds the lock, so no load
    /// of the word comes before it. On a 2-vCPU Intel Xeon guest a load
    /// of the word next to locked RMWs of it cost 2.5–5 ns
    /// (`docs/preload.md`, "Recursive and errorcheck mutexes").
    #[inline]
    pub fn lock_unless_held_as(&self, tid: u32) -> bool {
        let me = tid << C_OWNER_SHIFT;
        // (0, -) -> (me, -). Acquire pairs with the previous owner's
        // Release unlock; the failure reads nothing the caller uses but
        // the word (a holder that is the caller needs nothing published).
        match self.owner.compare_exchange(0, me, Acquire, Relaxed) {
            Ok(_) => true,
            Err(w) if holder(w) == Some(tid) => false,
            Err(w) => {
                self.lock_slow(me, None, w);
                true
            }
        }
    }

    /// Take the lock if it is free and not reserved for a starving waiter.
    #[inline]
    pub fn try_lock(&self) -> bool {
        self.try_lock_as(thread::current_tid())
    }

    /// [`try_lock`](Self::try_lock) by a caller that has its tid at hand
    /// (see [`lock_as`](Self::lock_as)).
    #[inline]
    pub fn try_lock_as(&self, tid: u32) -> bool {
        let me = tid << C_OWNER_SHIFT;
        // Acquire: as in lock.
        match self.owner.compare_exchange(0, me, Acquire, Relaxed) {
            Ok(_) => true,
            Err(w) => self.try_lock_missed(me, w),
        }
    }

    /// The trylock's fast CAS found `w`: one try from it, as the lock's
    /// first (see [`lock_slow`](Self::lock_slow)). Out of line, to keep
    /// the fast path one CAS.
    #[inline(never)]
    fn try_lock_missed(&self, me: u32, w: u32) -> bool {
        self.take_from(me, w)
    }

    /// Acquire the lock unless `deadline_ns` ([`crate::sys::monotonic_ns`] time)
    /// passes first; `false` if it did (the caller then holds nothing and
    /// is in no queue).
    pub fn lock_until_ns(&self, deadline_ns: u64) -> bool {
        self.lock_until_ns_as(thread::current_tid(), deadline_ns)
    }

    /// [`lock_until_ns`](Self::lock_until_ns) by a caller that has its tid
    /// at hand (see [`lock_as`](Self::lock_as)).
    pub fn lock_until_ns_as(&self, tid: u32, deadline_ns: u64) -> bool {
        let me = tid << C_OWNER_SHIFT;
        // Acquire: as in lock.
        match self.owner.compare_exchange(0, me, Acquire, Relaxed) {
            Ok(_) => true,
            Err(w) => self.lock_slow(me, Some(deadline_ns), w),
        }
    }

    /// Release the lock.
    ///
    /// # Safety
    /// The calling thread holds it.
    #[inline]
    pub unsafe fn unlock(&self) {
        // SAFETY: forwarded contract.
        unsafe { self.unlock_as(thread::current_tid()) }
    }

    /// [`unlock`](Self::unlock) by a caller that has its tid at hand.
    ///
    /// # Safety
    /// `tid` is the calling thread's ([`thread::current_tid`]), and it
    /// holds the lock.
    #[inline]
    pub unsafe fn unlock_as(&self, tid: u32) {
        let me = tid << C_OWNER_SHIFT;
        #[cfg(loom)]
        if self.loom_broken_unlock(me) {
            return;
        }
        // (me, F) -> (0, F). Release pairs with the Acquire CAS of the next
        // owner (or the hand-off pick-up, which continues this release
        // sequence).
        let flags = self.owner.fetch_sub(me, Release).wrapping_sub(me);
        if wake_due(flags) {
            self.unlock_slow(flags);
        }
    }

    /// Take the lock if it is free with a plain load and store instead of
    /// an atomic read-modify-write, as glibc's own mutex does while its
    /// process has one thread: `(0, 0) -> (me, 0)`; `false`, nothing
    /// changed, for any other word (held, or flags left by a fork). With
    /// it, a lock+unlock pair through `libklock_preload.so` took 10.1–10.8
    /// ns on a 2-vCPU Intel guest, against 22.0–23.6 with the CAS and the
    /// RMW (`docs/preload.md`, "One thread").
    ///
    /// # Safety
    /// No other thread can touch the lock meanwhile: the process has one
    /// thread (signal handlers do not take locks, which is not
    /// async-signal-safe), and a thread created later is created after
    /// this store (thread creation orders it before the new thread's
    /// first access). `tid` is the caller's.
    #[inline]
    pub unsafe fn try_lock_single_threaded_as(&self, tid: u32) -> bool {
        // Relaxed: no other thread exists to order anything with.
        let free = self.owner.load(Relaxed) == 0;
        if free {
            self.owner.store(tid << C_OWNER_SHIFT, Relaxed);
        }
        free
    }

    /// Release the lock as [`try_lock_single_threaded_as`] took it, if the
    /// word is exactly `(me, 0)`: `(me, 0) -> (0, 0)`; `false`, nothing
    /// changed, for any other word (the caller then takes the usual
    /// path).
    ///
    /// # Safety
    /// As for [`try_lock_single_threaded_as`].
    ///
    /// [`try_lock_single_threaded_as`]: Self::try_lock_single_threaded_as
    #[inline]
    pub unsafe fn unlock_single_threaded_as(&self, tid: u32) -> bool {
        // Relaxed: as in try_lock_single_threaded_as.
        let mine = self.owner.load(Relaxed) == tid << C_OWNER_SHIFT;
        if mine {
            self.owner.store(0, Relaxed);
        }
        mine
    }

    /// Release the lock whoever holds it (POSIX leaves an unlock by a
    /// non-owner of a normal mutex undefined; glibc releases it, and
    /// programs rely on that). `false` if it was not held.
    pub fn unlock_any(&self) -> bool {
        let mut w = self.owner.load(Relaxed);
        loop {
            if w & OWNER_MASK == 0 || w & C_PICKUP != 0 {
                return false;
            }
            // (X, F) -> (0, F). Release: as in unlock (the caller's own
            // writes are published; the holder's, if another thread, are
            // that program's race).
            match self
                .owner
                .compare_exchange_weak(w, w & !OWNER_MASK, Release, Relaxed)
            {
                Ok(_) => {
                    if wake_due(w) {
                        self.unlock_slow(w & !OWNER_MASK);
                    }
                    return true;
                }
                Err(now) => w = now,
            }
        }
    }

    /// The slow-path trylock: `(0, F) -> (me, F & WAITERS)` unless a
    /// hand-off reserves the free lock for the first waiter (`first`: we
    /// are it), or pick up a lock handed to us. Clears HANDOFF and PICKUP.
    fn try_lock_slow(&self, me: u32, first: bool) -> bool {
        self.try_lock_from(me, first, self.owner.load(Relaxed))
            .is_some()
    }

    /// [`try_lock_slow`](Self::try_lock_slow) from the word `w` the caller
    /// has just seen (a failed CAS's value) instead of a load of it: the
    /// word written if it took the lock.
    fn try_lock_from(&self, me: u32, first: bool, mut w: u32) -> Option<u32> {
        loop {
            let owner = w & OWNER_MASK;
            if owner != 0 {
                // Held, unless handed to us, or to a waiter that stayed
                // in the parent of a fork (see compact_fork.rs).
                if w & C_PICKUP == 0 || (owner != me && !is_stale(w)) {
                    return None;
                }
            } else if w & C_HANDOFF != 0 && !first && !is_stale(w) {
                return None;
            }
            // Acquire pairs with the previous owner's Release unlock (the
            // hand-off CAS continues its release sequence).
            let mine = me | (w & (C_WW | C_COUNTING | GEN_MASK));
            match self.owner.compare_exchange_weak(w, mine, Acquire, Relaxed) {
                Ok(_) => return Some(mine),
                Err(now) => w = now,
            }
        }
    }

    /// Whether a contender may spin now: the global switch, a second CPU
    /// to run the owner, and this lock's adaptive test, if it runs one.
    #[inline]
    fn may_spin(&self) -> bool {
        #[cfg(loom)]
        if self.loom_no_spin() {
            return false;
        }
        owner_spin() && oncpu::spinning_useful() && self.spin_pays()
    }

    /// Every acquisition that is not the fast paths' CAS from 0, which
    /// found `w`. Its first try starts from `w`, and counts from the word
    /// it wrote, with no load of the word: a free lock whose word keeps
    /// flags (its waiters asleep, or its spin test counting) comes here on
    /// every acquisition, and a load of the word just after a locked
    /// instruction on it waits for that instruction to complete
    /// (`bench/access_widths.c`'s third table: 1.3–5 ns on two Intel
    /// guests; `docs/preload.md`, "A free lock whose word keeps flags").
    /// Out of line, to keep the fast paths one CAS; not cold.
    #[inline(never)]
    fn lock_slow(&self, me: u32, deadline: Option<u64>, w: u32) -> bool {
        self.take_from(me, w) || self.lock_contended(me, deadline)
    }

    /// One try to take a free lock from the word `w` a failed fast CAS
    /// returned, counted from the word it wrote: the first step of the
    /// lock's and the trylock's slow paths.
    #[inline(always)]
    fn take_from(&self, me: u32, w: u32) -> bool {
        let Some(mine) = self.try_lock_from(me, false, w) else {
            return false;
        };
        self.count_acquisition_seen(mine);
        true
    }

    /// The lock is held or reserved: spin, or sleep.
    #[cold]
    #[inline(never)]
    fn lock_contended(&self, me: u32, deadline: Option<u64>) -> bool {
        self.adapt_contended();
        let got = (self.may_spin() && self.optimistic_spin(me, false, deadline))
            || self.lock_sleep(me, deadline);
        if got {
            self.count_acquisition();
        }
        got
    }

    /// Spin while the owner runs, within the lock's budget. A new locker
    /// (`waiter == false`) goes through the OSQ, and only if nobody is
    /// queued there; the first waiter spins directly and may take a lock
    /// reserved by HANDOFF.
    fn optimistic_spin(&self, me: u32, waiter: bool, deadline: Option<u64>) -> bool {
        if skip_futile(&self.spin) {
            return false;
        }
        let oracle = oncpu::oracle();
        let owner = self.owner.load(Relaxed) & OWNER_MASK;
        if owner != 0 && owner != me && oracle.owner_running(owner >> C_OWNER_SHIFT) == Some(false)
        {
            events::inc(Event::MutexSpinFailOwnerSleeping);
            return false;
        }
        if !waiter && self.osq.is_locked() {
            return false;
        }
        let mut spin = OwnerSpin::begin(&self.spin, MAX_OWNER_BUDGETS, deadline);
        if !waiter && !self.osq.lock(|| spin.queued_poll()) {
            return false;
        }
        let got = loop {
            let owner = self.owner.load(Relaxed) & OWNER_MASK;
            let asked = if owner == 0 || owner == me {
                if self.try_lock_slow(me, waiter) {
                    break true;
                }
                None
            } else {
                Some(owner >> C_OWNER_SHIFT)
            };
            if let Err(stop) = spin.poll(asked) {
                count_spin_fail(&self.spin, stop);
                break false;
            }
            cpu_relax();
        };
        if !waiter {
            self.osq.unlock();
        }
        if got {
            spin.succeeded(&self.spin);
            events::inc(Event::MutexSpinSuccess);
        }
        got
    }

    /// Sleep in the wait list until we own the lock (`true`) or `deadline`
    /// passes (`false`). As in [`crate::mutex`], without the WOKEN bit.
    #[inline(never)]
    fn lock_sleep(&self, me: u32, deadline: Option<u64>) -> bool {
        let waiter = Waiter {
            state: AtomicU32::new(W_WAITING),
            links: Links::new(),
            id: me,
        };
        let wp: *const Waiter = &waiter;
        self.lock_wait_list();
        // Unlockers that saw WAITERS wait for wait_lock: one more try.
        if self.try_lock_slow(me, false) {
            // SAFETY: we hold wait_lock.
            unsafe { self.wait_lock.unlock() };
            return true;
        }
        // SAFETY (list accesses below): we hold wait_lock whenever we touch
        // the list, and `waiter` is unlinked before we return (unwinding
        // aborts).
        let bomb = AbortOnUnwind("compact mutex");
        if unsafe { self.list_push(wp) } {
            // (X, F) -> (X, F|WAITERS). Relaxed: an unlock ordered after it
            // in the word's modification order sees WAITERS and wakes us
            // (through wait_lock); one before it leaves a free lock that
            // our trylock below finds.
            self.owner.fetch_or(C_WAITERS | gen_bits(), Relaxed);
        }
        let start = monotonic_ns();
        let mut first = false;
        let mut handoff_set = false;
        let mut lazy = self.lazy_wait();
        // An unlock has woken us at least once (for `MutexSleepAgain`).
        let mut was_woken = false;
        let acquired = loop {
            if !first {
                first = unsafe { self.list_head() } == wp;
            }
            if first && !handoff_set && monotonic_ns().saturating_sub(start) >= self.handoff_bound()
            {
                // Relaxed: the unlocker reads it with its release RMW and
                // then serialises with us on wait_lock.
                self.owner.fetch_or(C_HANDOFF, Relaxed);
                handoff_set = true;
            }
            // Re-arm before the trylock: an unlock after the trylock will
            // find WAITERS without WOKEN and mark us woken (under
            // wait_lock, so after this). (X, F) -> (X, F & !WOKEN).
            // Relaxed: the trylock below reads the word at or after this
            // RMW, so an unlock that still saw WOKEN is one we see as
            // released. Not in a lazy round, whose sleep is timed.
            #[cfg(loom)]
            let clears_woken = first && !lazy.active() && !self.loom_keeps_woken();
            #[cfg(not(loom))]
            let clears_woken = first && !lazy.active();
            if clears_woken && self.owner.load(Relaxed) & C_WOKEN != 0 {
                self.owner.fetch_and(!C_WOKEN, Relaxed);
            }
            waiter.state.store(W_WAITING, Relaxed);
            #[cfg(loom)]
            if self.loom_gives_up(deadline) {
                break false;
            }
            if self.try_lock_slow(me, first) {
                break true;
            }
            if deadline.is_some_and(|d| monotonic_ns() >= d) {
                break false;
            }
            // SAFETY: we hold wait_lock.
            unsafe { self.wait_lock.unlock() };
            if park(&waiter.state, None, lazy.park_deadline(deadline), false) {
                count_sleep(was_woken);
            }
            let woken = waiter.state.load(Relaxed) == W_WOKEN;
            was_woken |= woken;
            // Only the first waiter is ever woken, and it stays first.
            if !first && woken {
                first = true;
            }
            if first
                && (self.try_lock_slow(me, true)
                    || (self.may_spin() && self.optimistic_spin(me, true, deadline)))
            {
                self.lock_wait_list();
                break true;
            }
            if first && lazy.lost(woken) {
                #[cfg(not(loom))]
                events::inc(Event::MutexLazyWait);
                #[cfg(loom)]
                self.loom_count_lazy();
            }
            self.lock_wait_list();
        };
        let was_first = unsafe { self.list_head() } == wp;
        let mut woke = false;
        if unsafe { self.list_remove(wp) } {
            // The last waiter left: (X, F) -> (X, F & (PICKUP|COUNTING)).
            // Relaxed: the flags cleared are only set under wait_lock.
            self.owner
                .fetch_and(!(C_WW | C_HANDOFF | GEN_MASK), Relaxed);
        } else if was_first && acquired {
            // The new first waiter sleeps: (X, F) -> (X, F & !WOKEN), so
            // the next unlock wakes it. Relaxed: as above.
            self.owner.fetch_and(!C_WOKEN, Relaxed);
        } else if was_first {
            // Timed out as first waiter: the new first one may sleep
            // through an unlock that woke us; wake it.
            woke = self.mark_woken(unsafe { self.list_head() });
        }
        // SAFETY: we hold wait_lock.
        unsafe { self.wait_lock.unlock() };
        if woke {
            wake_pending();
        }
        core::mem::forget(bomb);
        acquired
    }

    /// After an unlock released `(me, flags) -> (0, flags)` with WAITERS:
    /// hand the lock to the first waiter if it demanded so, and wake it.
    #[cold]
    #[inline(never)]
    fn unlock_slow(&self, flags: u32) {
        if is_stale(flags) {
            // Nobody of this process waits: a thread of it links itself
            // only after the list's flags were cleared (compact_fork.rs).
            return;
        }
        self.lock_wait_list();
        // SAFETY: we hold wait_lock.
        let head = unsafe { self.list_head() };
        let mut woke = false;
        if !head.is_null() {
            if flags & C_HANDOFF != 0 {
                self.hand_over(head);
            }
            woke = self.mark_woken(head);
            #[cfg(loom)]
            self.loom_count_wake(woke);
        }
        // SAFETY: we hold wait_lock.
        unsafe { self.wait_lock.unlock() };
        if woke {
            wake_pending();
        }
    }

    /// `(0, HANDOFF|F) -> (W, PICKUP|WAITERS)` unless the first waiter
    /// `head` took the lock meanwhile (only it can take a free HANDOFF
    /// lock). Caller holds wait_lock.
    fn hand_over(&self, head: *const Waiter) {
        #[cfg(loom)]
        if self.loom_broken_hand_over() {
            return;
        }
        // SAFETY: linked waiters are alive (caller holds wait_lock).
        let id = unsafe { (*head).id };
        let mut w = self.owner.load(Relaxed);
        while w & OWNER_MASK == 0 && w & C_HANDOFF != 0 {
            // Relaxed: this RMW continues the unlock's release sequence,
            // so the waiter's Acquire pick-up still pairs with that release.
            match self.owner.compare_exchange_weak(
                w,
                id | C_PICKUP | C_WW | (w & (C_COUNTING | GEN_MASK)),
                Relaxed,
                Relaxed,
            ) {
                Ok(_) => {
                    events::inc(Event::MutexHandoff);
                    #[cfg(loom)]
                    self.loom_count_hand_over();
                    return;
                }
                Err(now) => w = now,
            }
        }
    }

    /// Mark the linked waiter `w` woken (caller holds wait_lock) and queue
    /// its `FUTEX_WAKE` if it sleeps (`true`).
    #[must_use]
    fn mark_woken(&self, w: *const Waiter) -> bool {
        // SAFETY: linked, hence alive, under wait_lock.
        let w = unsafe { &*w };
        // (X, F) -> (X, F|WOKEN). Relaxed: later unlockers that see it skip
        // the wake-up, which is right from now on: the waiter re-checks the
        // lock (clearing WOKEN under wait_lock first) before sleeping.
        if self.owner.load(Relaxed) & C_WOKEN == 0 {
            self.owner.fetch_or(C_WOKEN, Relaxed);
        }
        // Release pairs with the waiter's Acquire load in park.
        if w.state.swap(W_WOKEN, Release) == W_PARKED {
            // Counted only when the waiter sleeps, as the full mutex does.
            events::inc(Event::MutexWake);
            wake_later(futex_addr(&w.state));
            true
        } else {
            false
        }
    }

    /// The first waiter's lazy wait ([`LazyWait`]; under loom, the
    /// model's).
    #[cfg(not(loom))]
    #[inline]
    fn lazy_wait(&self) -> LazyWait {
        LazyWait::from_config()
    }

    /// The hand-off bound: [`handoff_ns`] (under loom, the model's).
    #[cfg(not(loom))]
    #[inline]
    fn handoff_bound(&self) -> u64 {
        handoff_ns()
    }

    /// First waiter, or null. Caller holds wait_lock.
    unsafe fn list_head(&self) -> *const Waiter {
        // SAFETY: caller's contract.
        self.list.with(|l| unsafe { (*l).head() })
    }

    /// Append `w`; whether the list was empty. Caller holds wait_lock.
    unsafe fn list_push(&self, w: *const Waiter) -> bool {
        // SAFETY: caller's contract.
        self.list.with_mut(|l| unsafe { (*l).push(w) })
    }

    /// Unlink `w`; whether the list is now empty. Caller holds wait_lock.
    unsafe fn list_remove(&self, w: *const Waiter) -> bool {
        // SAFETY: caller's contract.
        self.list.with_mut(|l| unsafe { (*l).remove(w) })
    }
}

impl Default for RawMutexCompact {
    fn default() -> Self {
        Self::new()
    }
}

impl core::fmt::Debug for RawMutexCompact {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let w = self.word();
        f.debug_struct("RawMutexCompact")
            .field("owner_tid", &((w & OWNER_MASK) >> C_OWNER_SHIFT))
            .field("flags", &(w & C_FLAGS))
            .finish()
    }
}

#[path = "compact_adapt.rs"]
mod adapt;

#[path = "compact_fork.rs"]
mod fork;
use fork::{gen_bits, is_stale, GEN_MASK};

#[cfg(loom)]
#[path = "compact_loom.rs"]
mod compact_loom;
#[cfg(loom)]
pub use compact_loom::{CompactBroken, CompactProbe};

#[cfg(all(test, not(loom)))]
#[path = "compact_tests.rs"]
mod tests;
