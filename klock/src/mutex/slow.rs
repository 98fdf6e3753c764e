//! The mutex's slow paths: the slow-path trylock, the quick spin and the
//! optimistic spin on a running owner, sleeping in the wait list, and the
//! unlocks that wake the first waiter or hand the lock over to it (see the
//! [module docs](super)).

#[cfg(loom)]
use super::Probe;
use super::{
    futile_skip, handoff_ns, tid_of, LazyWait, RawMutexWith, Waiter, FLAGS, HANDOFF,
    MAX_OWNER_BUDGETS, OWNER_MASK, PICKUP, WAITERS, WOKEN, WW, W_PARKED, W_WAITING, W_WOKEN,
};
use crate::events::{self, Event};
use crate::oncpu::{self, SpinStats};
use crate::ownerspin::{OwnerSpin, SpinStop};
use crate::spin::{cpu_relax, QUICK_POLLS};
use crate::spinadapt;
use crate::sync::AtomicU32;
use crate::sync::Ordering::{Acquire, Relaxed, Release};
use crate::sys::{self, monotonic_ns};
use crate::thread;
use crate::waitlist::{futex_addr, park, wake_later, wake_pending, AbortOnUnwind, Links};
use crate::waitlock::WaitLockRaw;

/// Most threads that may spin on one mutex at once: CPUs - 1. The kernel
/// gets this for free (each spinner occupies a CPU and the owner must be
/// on another for spinning to make sense); in userspace, with more
/// runnable threads than CPUs, a further spinner could only be spinning
/// while the owner waits for a CPU. Unbounded under loom, so that models
/// can race several spinners.
#[inline]
pub(super) fn spin_cap() -> u32 {
    if cfg!(loom) {
        u32::MAX
    } else {
        (sys::online_cpus().saturating_sub(1)).clamp(1, u32::MAX as usize) as u32
    }
}

impl<const SPIN: u8, W: WaitLockRaw> RawMutexWith<SPIN, W> {
    /// The slow-path trylock: `(0, F) -> (me, F & WW)` unless a hand-off
    /// reserves a free lock for the first waiter (`first` says we are it),
    /// or pick up a lock handed to us, `(me, PICKUP|F) -> (me, F & WW)`.
    /// Clears `HANDOFF` and `PICKUP` on success.
    #[inline]
    pub(super) fn try_lock_slow(&self, me: usize, first: bool) -> bool {
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
    pub(super) fn lock_slow(&self, me: usize, deadline: Option<u64>) -> bool {
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
        for _ in 0..QUICK_POLLS {
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
        // This lock's recent spins ran out of their budget: sleep at once.
        // Only in the modes that adapt; `OWNER_SPIN_FIXED` spins as the
        // kernel does.
        if Self::ADAPTS && skip_futile(&self.spin) {
            return false;
        }
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
        let mut spin = OwnerSpin::begin(&self.spin, MAX_OWNER_BUDGETS, deadline);

        // Join the OSQ; give up while queued if the budget runs out or we
        // should yield.
        if let Some(slot) = slot {
            if !self.osq.lock_with(slot, || spin.queued_poll()) {
                events::inc(Event::MutexOsqUnqueue);
                #[cfg(loom)]
                Probe::hit(&self.probe.osq_unqueues);
                count_spin_fail(&self.spin, spin.queued_stop());
                return false;
            }
        }

        // Spin on the owner.
        let result = loop {
            let owner = self.owner.load(Relaxed) & OWNER_MASK;
            let asked = if owner == 0 || owner == me {
                // Free (or handed to us): try to take it. May fail when a
                // hand-off reserves it or another thread was quicker.
                if self.try_lock_slow(me, waiter) {
                    break Ok(());
                }
                None
            } else {
                Some(tid_of(owner))
            };
            if let Err(stop) = spin.poll(asked) {
                break Err(stop);
            }
            cpu_relax();
        };
        if let Some(slot) = slot {
            self.osq.unlock_with(slot);
        }
        match result {
            Ok(()) => {
                spin.succeeded(&self.spin);
                events::inc(Event::MutexSpinSuccess);
                #[cfg(loom)]
                Probe::hit(&self.probe.spin_successes);
                true
            }
            Err(stop) => {
                count_spin_fail(&self.spin, stop);
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
        let mut lazy = self.lazy_wait();
        // An unlock has woken us at least once (for `MutexSleepAgain`).
        let mut was_woken = false;

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
            // unlock that still saw WOKEN is one we see as released. Not
            // in a lazy round, whose sleep is timed (see LazyWait).
            if first && !lazy.active() && self.owner.load(Relaxed) & WOKEN != 0 {
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

            if park(&waiter.state, None, lazy.park_deadline(deadline), false) {
                count_sleep(was_woken);
                #[cfg(loom)]
                Probe::hit(&self.probe.sleeps);
            }

            // Only the first waiter is ever woken, and it stays first
            // (waiters ahead of it can only leave).
            let woken = waiter.state.load(Relaxed) == W_WOKEN;
            was_woken |= woken;
            if !first && woken {
                first = true;
            }
            if first
                && (self.try_lock_slow(me, true)
                    || (self.may_spin() && self.optimistic_spin(me, true, deadline)))
            {
                self.wait_lock.lock();
                break true;
            }
            if first && lazy.lost(woken) {
                events::inc(Event::MutexLazyWait);
                #[cfg(loom)]
                Probe::hit(&self.probe.lazy_waits);
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

    /// The first waiter's lazy wait for this lock ([`LazyWait`]).
    #[inline]
    fn lazy_wait(&self) -> LazyWait {
        #[cfg(loom)]
        return LazyWait::new(self.loom_lazy_ns.load(Relaxed));
        #[cfg(not(loom))]
        LazyWait::from_config()
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
    pub(super) fn assert_owner(&self, me: usize, w: usize) {
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
    pub(super) fn unlock_released_slow(&self, flags: usize) {
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
    pub(super) fn unlock_fair_slow(&self, me: usize, mut w: usize) {
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
    pub(super) unsafe fn list_head(&self) -> *const Waiter {
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

/// Whether a spin should be skipped because the lock's recent spins ran
/// out of their budget ([`super::futile_skip`]); counts the skip (also the
/// compact mutex's).
#[inline]
pub(super) fn skip_futile(stats: &SpinStats) -> bool {
    let skip = futile_skip() && stats.futile();
    if skip {
        events::inc(Event::MutexSpinSkipFutile);
    }
    skip
}

/// Count a waiter's park that slept, and whether an unlock had woken it
/// before (also the compact mutex's).
#[inline]
pub(super) fn count_sleep(was_woken: bool) {
    events::inc(Event::MutexSleep);
    if was_woken {
        events::inc(Event::MutexSleepAgain);
    }
}

/// Count why optimistic spinning stopped (also the compact mutex's), and
/// tell the lock's statistics when the spin ran out of its budget (see
/// [`super::futile_skip`]).
pub(super) fn count_spin_fail(stats: &SpinStats, stop: SpinStop) {
    if stop == SpinStop::Budget {
        stats.record_failure();
    }
    events::inc(match stop {
        SpinStop::OwnerSleeping => Event::MutexSpinFailOwnerSleeping,
        SpinStop::Budget => Event::MutexSpinFailBudget,
        SpinStop::Yield => Event::MutexSpinFailYield,
    });
}
