//! The compact mutex, [`RawMutexCompact`]: the design of [`crate::mutex`]
//! in 40 bytes.

use super::{handoff_ns, owner_spin};
use crate::oncpu::{self, SpinStats, MAX_OWNER_BUDGETS};
use crate::osq::Osq;
use crate::spin::{clock_due, cpu_relax};
use crate::sync::Ordering::{Acquire, Relaxed, Release};
use crate::sync::{AtomicU32, UnsafeCell};
use crate::sys::{self, monotonic_ns};
use crate::thread;
use crate::waitlist::{
    futex_addr, wake_later, wake_pending, AbortOnUnwind, Linked, Links, WaitList,
};
use crate::waitlock::{WaitLock, WaitLockRaw};
use std::time::Duration;

/// Owner word: the wait list is non-empty (unlock must wake its head).
pub const C_WAITERS: u32 = 1 << 0;
/// Owner word: the first waiter starves; unlock hands the lock to it.
pub const C_HANDOFF: u32 = 1 << 1;
/// Owner word: handed off; the named waiter has yet to pick it up.
pub const C_PICKUP: u32 = 1 << 2;
/// All flag bits.
pub const C_FLAGS: u32 = C_WAITERS | C_HANDOFF | C_PICKUP;
/// The owner's tid sits above the flags.
pub const C_OWNER_SHIFT: u32 = 3;
/// Bits of a Linux tid: it stays below `PID_MAX_LIMIT`, 2^22.
const TID_BITS: u32 = 22;
/// The owner field: bits 3..25.
const OWNER_MASK: u32 = ((1 << TID_BITS) - 1) << C_OWNER_SHIFT;
/// Bits 25..32: the fork generation the wait list was built in (low 7
/// bits of [`FORK_GEN`]), set with `WAITERS` by the first waiter and
/// cleared with it by the last.
const GEN_SHIFT: u32 = C_OWNER_SHIFT + TID_BITS;
const GEN_MASK: u32 = !0 << GEN_SHIFT;

/// Forks this process is a child of, counted by
/// [`RawMutexCompact::forked`]. Relaxed: it is bumped in a just-forked
/// child before any other thread of it exists.
static FORK_GEN: core::sync::atomic::AtomicU32 = core::sync::atomic::AtomicU32::new(0);

/// The generation bits of a wait list built now.
#[inline]
fn gen_bits() -> u32 {
    FORK_GEN.load(Relaxed) << GEN_SHIFT
}

/// Whether the owner word `w` describes a wait list built before this
/// process was forked: one whose waiters exist only in the parent.
#[inline]
fn is_stale(w: u32) -> bool {
    w & C_WAITERS != 0 && w & GEN_MASK != gen_bits()
}

// Waiter states (its futex word).
const W_WAITING: u32 = 0;
const W_PARKED: u32 = 1;
const W_WOKEN: u32 = 2;

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
/// stops spinners from starving sleepers) and drops three userspace
/// additions:
///
/// * the adaptive test ([`crate::spinadapt`]): a contender spins on a
///   running owner whenever the global switch ([`crate::mutex::owner_spin`]) is
///   on, as the kernel does ([`crate::mutex::OWNER_SPIN_FIXED`] semantics);
/// * the `WOKEN` bit: every unlock that finds `WAITERS` takes `wait_lock`
///   to mark the first waiter woken, even when it is awake already;
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
/// | 0..4 | `owner` | `gen << 25 \| tid << 3 \| PICKUP \| HANDOFF \| WAITERS` |
/// | 4..8 | `osq` | tail of the optimistic spinners' queue |
/// | 8..12 | `wait_lock` | protects `list` and the setting of `WAITERS`/`HANDOFF` |
/// | 12..16 | `spin` | adaptive spin budget ([`SpinStats`]) |
/// | 16..24 | `spare` | two words the lock never touches, for its embedder |
/// | 24..40 | `list` | FIFO of sleeping waiters (head, tail) |
///
/// The spare words sit where glibc keeps a mutex's kind (offset 16), so
/// an embedder can leave glibc's static initializers' kind in place.
///
/// A Linux tid is below 2^22 (`PID_MAX_LIMIT`), so `tid << 3` leaves the
/// top 7 bits free: they hold the fork generation of the wait list
/// ([`RawMutexCompact::forked`]).
///
/// # State transitions
///
/// As in [`crate::mutex`] without `WOKEN`: fast lock `(0, -) -> (me, -)`; fast
/// unlock `(me, F) -> (0, F)` by `fetch_sub`, then, with `WAITERS`, under
/// `wait_lock` hand a `HANDOFF` lock to the first waiter `(0, HANDOFF|F)
/// -> (W, PICKUP|WAITERS)` and mark it woken; the first waiter sets
/// `HANDOFF` after [`crate::mutex::handoff_ns`]; the last waiter to leave clears
/// `WAITERS|HANDOFF`. Orderings as argued in [`crate::mutex`]: acquiring CASes
/// `Acquire`, releasing RMWs `Release`, flag RMWs `Relaxed` (ordered with
/// the releases by the word's modification order, the list by
/// `wait_lock`).
///
/// In a forked child ([`forked`](Self::forked)), a lock whose wait list
/// was built before the fork leaves that list and its wait-list lock alone
/// for good; its contenders poll the owner word instead of sleeping.
///
/// Driven without guards: the owner word says who holds it, so callers (a
/// C API) need no place to keep one.
#[repr(C, align(8))]
pub struct RawMutexCompact {
    owner: AtomicU32,
    osq: Osq,
    wait_lock: WaitLock,
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

/// The identity the calling thread writes into the owner word.
#[inline(always)]
fn my_id() -> u32 {
    thread::current_tid() << C_OWNER_SHIFT
}

impl RawMutexCompact {
    /// An unlocked mutex (all-zero bytes).
    #[cfg(not(loom))]
    pub const fn new() -> Self {
        Self {
            owner: AtomicU32::new(0),
            osq: Osq::new(),
            wait_lock: WaitLock::INIT,
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
        let w = self.owner.load(Relaxed);
        (w & OWNER_MASK != 0 && w & C_PICKUP == 0).then_some((w & OWNER_MASK) >> C_OWNER_SHIFT)
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
        if self
            .owner
            .compare_exchange(0, me, Acquire, Relaxed)
            .is_err()
        {
            self.lock_slow(me, None);
        }
    }

    /// Take the lock if it is free and not reserved for a starving waiter.
    #[inline]
    pub fn try_lock(&self) -> bool {
        let me = my_id();
        // Acquire: as in lock.
        self.owner.compare_exchange(0, me, Acquire, Relaxed).is_ok()
            || self.try_lock_slow(me, false)
    }

    /// Acquire the lock unless `deadline_ns` ([`sys::monotonic_ns`] time)
    /// passes first; `false` if it did (the caller then holds nothing and
    /// is in no queue).
    pub fn lock_until_ns(&self, deadline_ns: u64) -> bool {
        let me = my_id();
        // Acquire: as in lock.
        self.owner.compare_exchange(0, me, Acquire, Relaxed).is_ok()
            || self.lock_slow(me, Some(deadline_ns))
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
        if flags & C_WAITERS != 0 {
            self.unlock_slow(flags);
        }
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
                    if w & C_WAITERS != 0 {
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
        let mut w = self.owner.load(Relaxed);
        loop {
            let owner = w & OWNER_MASK;
            if owner != 0 {
                // Held, unless handed to us, or to a waiter that stayed
                // in the parent of a fork (see lock_polling).
                if w & C_PICKUP == 0 || (owner != me && !is_stale(w)) {
                    return false;
                }
            } else if w & C_HANDOFF != 0 && !first && !is_stale(w) {
                return false;
            }
            // Acquire pairs with the previous owner's Release unlock (the
            // hand-off CAS continues its release sequence).
            match self.owner.compare_exchange_weak(
                w,
                me | (w & (C_WAITERS | GEN_MASK)),
                Acquire,
                Relaxed,
            ) {
                Ok(_) => return true,
                Err(now) => w = now,
            }
        }
    }

    /// Whether a contender may spin now: the global switch and a second
    /// CPU to run the owner.
    #[inline]
    fn may_spin(&self) -> bool {
        #[cfg(loom)]
        if self.loom_no_spin() {
            return false;
        }
        owner_spin() && oncpu::spinning_useful()
    }

    #[cold]
    #[inline(never)]
    fn lock_slow(&self, me: u32, deadline: Option<u64>) -> bool {
        if self.try_lock_slow(me, false) {
            return true;
        }
        if self.may_spin() && self.optimistic_spin(me, false, deadline) {
            return true;
        }
        if is_stale(self.owner.load(Relaxed)) {
            return self.lock_polling(me, deadline);
        }
        self.lock_sleep(me, deadline)
    }

    /// The slow path in a forked child, on a lock whose wait list was
    /// built before the fork. Its waiters stayed in the parent, their
    /// records lie on stacks the child may reuse for new threads, and one
    /// of them may have been inside `wait_lock`: so neither the list nor
    /// `wait_lock` is touched again, and contenders poll the owner word
    /// instead, taking the lock when it is free or was handed to a waiter
    /// that stayed behind (`try_lock_slow` allows both for a stale word).
    /// Unlocks of such a lock wake nobody. A lock held by a thread that
    /// stayed behind stays held, as with glibc's locks.
    #[cold]
    #[inline(never)]
    fn lock_polling(&self, me: u32, deadline: Option<u64>) -> bool {
        let mut n = 0u32;
        loop {
            if self.try_lock_slow(me, true) {
                return true;
            }
            if deadline.is_some_and(|d| monotonic_ns() >= d) {
                return false;
            }
            n = n.saturating_add(1);
            if n < 64 {
                cpu_relax();
            } else if n < 128 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
    }

    /// Spin while the owner runs, within the lock's budget. A new locker
    /// (`waiter == false`) goes through the OSQ, and only if nobody is
    /// queued there; the first waiter spins directly and may take a lock
    /// reserved by HANDOFF.
    fn optimistic_spin(&self, me: u32, waiter: bool, deadline: Option<u64>) -> bool {
        let oracle = oncpu::oracle();
        let owner = self.owner.load(Relaxed) & OWNER_MASK;
        if owner != 0 && owner != me && oracle.owner_running(owner >> C_OWNER_SHIFT) == Some(false)
        {
            return false;
        }
        if !waiter && self.osq.is_locked() {
            return false;
        }
        let budget = self.spin.budget_ns();
        oracle.spin_begin();
        let start = monotonic_ns();
        let total_end = start.saturating_add(budget.saturating_mul(MAX_OWNER_BUDGETS));
        let mut owner_end = start.saturating_add(budget);
        let past = |now: u64| deadline.is_some_and(|d| now >= d);
        if !waiter {
            let mut n = 0u32;
            let head = self.osq.lock(|| {
                n = n.wrapping_add(1);
                if !clock_due(n) {
                    return false;
                }
                let now = monotonic_ns();
                oracle.should_yield() || now >= owner_end || past(now)
            });
            if !head {
                return false;
            }
        }
        let mut last_owner = u32::MAX;
        let mut running = None;
        let mut i = 0u32;
        let got = loop {
            let owner = self.owner.load(Relaxed) & OWNER_MASK;
            if owner == 0 || owner == me {
                if self.try_lock_slow(me, waiter) {
                    break true;
                }
            } else if owner != last_owner {
                if last_owner != u32::MAX {
                    // The lock moved on: the new owner gets a fresh budget.
                    owner_end = monotonic_ns().saturating_add(budget).min(total_end);
                }
                last_owner = owner;
                running = oracle.owner_running(owner >> C_OWNER_SHIFT);
                if running == Some(false) {
                    break false;
                }
            }
            i = i.wrapping_add(1);
            if clock_due(i) {
                if oracle.should_yield() {
                    break false;
                }
                let now = monotonic_ns();
                // An owner known to run may be spun on without a budget
                // (the kernel's rule); otherwise the budget decides.
                if past(now) || (running != Some(true) && now >= owner_end) {
                    break false;
                }
            }
            cpu_relax();
        };
        if !waiter {
            self.osq.unlock();
        }
        if got {
            self.spin
                .record_success(monotonic_ns().saturating_sub(start));
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
        self.wait_lock.lock();
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
            // Re-arm before the trylock: an unlock after it marks us woken
            // under wait_lock, so after this store.
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
            park(&waiter, deadline);
            // Only the first waiter is ever woken, and it stays first.
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
        let was_first = unsafe { self.list_head() } == wp;
        let mut woke = false;
        if unsafe { self.list_remove(wp) } {
            // The last waiter left: (X, F) -> (X, F & PICKUP). Relaxed:
            // both flags are only set under wait_lock.
            self.owner
                .fetch_and(!(C_WAITERS | C_HANDOFF | GEN_MASK), Relaxed);
        } else if was_first && !acquired {
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
            // Nobody of this process waits (see lock_polling).
            return;
        }
        self.wait_lock.lock();
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
                id | C_PICKUP | C_WAITERS | (w & GEN_MASK),
                Relaxed,
                Relaxed,
            ) {
                Ok(_) => {
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
        // Release pairs with the waiter's Acquire load in park.
        if w.state.swap(W_WOKEN, Release) == W_PARKED {
            wake_later(futex_addr(&w.state));
            true
        } else {
            false
        }
    }

    /// Tell the compact mutexes that this process is a child just forked.
    /// A lock whose wait list was built before the fork (its waiters
    /// exist only in the parent) then never touches that list or its
    /// wait-list lock again: its contenders poll instead of sleeping
    /// (`lock_polling`). Call it in the child before any other thread of
    /// it starts: a `pthread_atfork` child handler.
    pub fn forked() {
        FORK_GEN.fetch_add(1, Relaxed);
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

/// Sleep on our futex word until woken or `deadline` passes.
fn park(w: &Waiter, deadline: Option<u64>) {
    // W_WAITING -> W_PARKED; fails if an unlocker woke us already.
    // Relaxed: what we need from the waker is re-read under wait_lock.
    if w.state
        .compare_exchange(W_WAITING, W_PARKED, Relaxed, Relaxed)
        .is_err()
    {
        return;
    }
    loop {
        // Acquire pairs with the waker's Release swap in mark_woken.
        if w.state.load(Acquire) != W_PARKED {
            return;
        }
        let timeout = match deadline {
            None => None,
            Some(d) => {
                let now = monotonic_ns();
                if now >= d {
                    return;
                }
                Some(Duration::from_nanos(d - now))
            }
        };
        // Spurious returns are fine: the state is re-checked.
        sys::futex_wait(&w.state, W_PARKED, timeout);
    }
}

#[cfg(loom)]
#[path = "compact_loom.rs"]
mod compact_loom;
#[cfg(loom)]
pub use compact_loom::{CompactBroken, CompactProbe};

#[cfg(all(test, not(loom)))]
#[path = "compact_tests.rs"]
mod tests;
