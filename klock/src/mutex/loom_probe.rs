//! Loom-only scaffolding: the [`Probe`] that records which rare paths a
//! model execution took, and the switches that make a lock deliberately
//! broken so a model can show it catches the bug.

use super::RawMutexWith;
use crate::waitlock::WaitLockRaw;

/// Loom-only record of the rare paths one model execution took. Plain std
/// atomics: bookkeeping outside the model.
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
    /// Series of lazy rounds a first waiter began (woken, then lost the
    /// lock).
    pub lazy_waits: std::sync::atomic::AtomicU32,
}

impl Probe {
    pub(super) fn hit(c: &std::sync::atomic::AtomicU32) {
        c.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}

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

    /// Loom only: this lock's lazy round in ns (0: no lazy wait, the
    /// default in models; see [`super::lazy_wait`]). `u64::MAX` is the
    /// broken variant: rounds that never end, so the waiter keeps `WOKEN`
    /// with no timer.
    #[doc(hidden)]
    pub fn set_loom_lazy_ns(&self, ns: u64) {
        self.loom_lazy_ns
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

    /// The broken unlock of [`set_loom_broken_unlock`], if set: release
    /// without looking at `WAITERS` (a lost wake-up). Returns whether it
    /// released the lock.
    ///
    /// [`set_loom_broken_unlock`]: Self::set_loom_broken_unlock
    #[inline(always)]
    pub(super) fn loom_broken_unlock(&self) -> bool {
        if !self
            .loom_broken_unlock
            .load(core::sync::atomic::Ordering::Relaxed)
        {
            return false;
        }
        // BROKEN: see above.
        self.owner.store(0, crate::sync::Ordering::Release);
        true
    }

    /// What the fast unlock subtracts from the owner word: `me`, or with
    /// [`set_loom_broken_handoff_release`] also `HANDOFF`, so the free
    /// lock is no longer reserved for the first waiter (BROKEN).
    ///
    /// [`set_loom_broken_handoff_release`]: Self::set_loom_broken_handoff_release
    #[inline(always)]
    pub(super) fn loom_release_value(&self, me: usize) -> usize {
        if self
            .loom_broken_handoff
            .load(core::sync::atomic::Ordering::Relaxed)
        {
            me | (self.owner.load(crate::sync::Ordering::Relaxed) & super::HANDOFF)
        } else {
            me
        }
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
