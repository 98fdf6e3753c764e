//! The spin on a lock's owner, shared by the sleeping locks
//! ([`crate::mutex`], its compact form, [`crate::rwsem`]'s writers and
//! [`crate::rtmutex`]'s top waiter).
//!
//! Each lock's loop reads its own word and tries its own acquisition; what
//! they share is *when to stop*, which is this module's [`OwnerSpin`]:
//!
//! * the budget: a lock's adaptive budget ([`SpinStats`]) per owner; when
//!   the lock changes hands the new owner gets a fresh budget, up to
//!   `owners` budgets since the spin began (a spinner that keeps losing the
//!   lock to others stops eventually);
//! * the oracle ([`oncpu::oracle`]): an owner known to be off CPU ends the
//!   spin at once; an owner known to run may be spun on past its budget
//!   (the kernel's rule), up to an optional hard cap; `should_yield` (the
//!   `need_resched()` stand-in) ends it too;
//! * the caller's deadline, for timed locks;
//! * the clock and the oracle are read only every
//!   [`CLOCK_EVERY`](crate::spin::CLOCK_EVERY) polls.
//!
//! A spin goes: [`OwnerSpin::begin`]; for new lockers, queueing in the
//! lock's OSQ with [`OwnerSpin::queued_poll`] as its give-up test; then per
//! iteration of the lock's loop [`OwnerSpin::poll`] (or, for states with no
//! owner to ask about, [`OwnerSpin::tick`] and [`OwnerSpin::clock`]); at
//! the end [`OwnerSpin::succeeded`] on success.

use crate::oncpu::{self, OnCpu, SpinStats};
use crate::spin::clock_due;
use crate::sys::monotonic_ns;

/// Why a spin stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SpinStop {
    /// The oracle says the owner is off CPU.
    OwnerSleeping,
    /// The budget, the hard cap or the deadline ran out.
    Budget,
    /// The oracle says the spinner should let others run.
    Yield,
}

/// One spin's clock and the oracle's last answer about the owner.
pub(crate) struct OwnerSpin {
    oracle: &'static dyn OnCpu,
    budget: u64,
    start: u64,
    /// When the budgets of all owners together run out.
    total_end: u64,
    /// When the current owner's budget runs out.
    owner_end: u64,
    /// When even a running owner is no longer spun on.
    hard_end: u64,
    deadline: Option<u64>,
    /// The owner (tid) the last poll saw, if any yet.
    last_owner: Option<u32>,
    /// The oracle's last answer about `last_owner`.
    running: Option<bool>,
    polls: u32,
    /// Why [`queued_poll`](Self::queued_poll) gave up.
    queued_stop: SpinStop,
}

impl OwnerSpin {
    /// Start a spin: a budget from `stats` for each owner, at most `owners`
    /// budgets in all, and no spinning past `deadline`.
    #[inline]
    pub(crate) fn begin(stats: &SpinStats, owners: u64, deadline: Option<u64>) -> Self {
        Self::begin_with(oncpu::oracle(), stats.budget_ns(), owners, deadline)
    }

    /// [`begin`](Self::begin) with a given oracle and budget.
    #[inline]
    fn begin_with(
        oracle: &'static dyn OnCpu,
        budget: u64,
        owners: u64,
        deadline: Option<u64>,
    ) -> Self {
        oracle.spin_begin();
        let start = monotonic_ns();
        Self {
            oracle,
            budget,
            start,
            total_end: start.saturating_add(budget.saturating_mul(owners)),
            owner_end: start.saturating_add(budget),
            hard_end: u64::MAX,
            deadline,
            last_owner: None,
            running: None,
            polls: 0,
            queued_stop: SpinStop::Budget,
        }
    }

    /// Also stop spinning on an owner known to run after `budgets` budgets
    /// (by default a running owner is spun on without a limit).
    #[inline]
    pub(crate) fn with_hard_cap(mut self, budgets: u64) -> Self {
        self.hard_end = self
            .start
            .saturating_add(self.budget.saturating_mul(budgets));
        self
    }

    /// The give-up test of a spinner queued in an OSQ behind others
    /// (pass `|| spin.queued_poll()` to the queue's lock): true once the
    /// first owner's budget or the deadline has run out, or the oracle
    /// says yield. [`queued_stop`](Self::queued_stop) says which.
    #[inline]
    pub(crate) fn queued_poll(&mut self) -> bool {
        if !self.tick() {
            return false;
        }
        if self.oracle.should_yield() {
            self.queued_stop = SpinStop::Yield;
            return true;
        }
        let now = monotonic_ns();
        now >= self.owner_end || self.past_deadline(now)
    }

    /// Why the last [`queued_poll`](Self::queued_poll) that answered true
    /// gave up.
    #[inline]
    pub(crate) fn queued_stop(&self) -> SpinStop {
        self.queued_stop
    }

    /// Count one poll; whether this one reads the clock and asks the
    /// oracle.
    #[inline]
    pub(crate) fn tick(&mut self) -> bool {
        self.polls = self.polls.wrapping_add(1);
        clock_due(self.polls)
    }

    /// One poll of the lock's loop while the lock is held by `owner` (a
    /// tid; `None` while it is free or has no owner to ask about).
    /// `Ok(())`: keep spinning (relax, then read the word again).
    #[inline]
    pub(crate) fn poll(&mut self, owner: Option<u32>) -> Result<(), SpinStop> {
        let due = self.tick();
        self.poll_owner(owner, due)
    }

    /// [`poll`](Self::poll) for a loop that already called
    /// [`tick`](Self::tick) this iteration (`due` is its answer).
    #[inline]
    pub(crate) fn poll_owner(&mut self, owner: Option<u32>, due: bool) -> Result<(), SpinStop> {
        if let Some(tid) = owner {
            if self.last_owner != Some(tid) {
                if self.last_owner.is_some() {
                    // The lock moved on: a fresh budget for the new owner,
                    // within the total.
                    self.owner_end = monotonic_ns()
                        .saturating_add(self.budget)
                        .min(self.total_end);
                }
                self.last_owner = Some(tid);
                self.running = self.oracle.owner_running(tid);
                if self.running == Some(false) {
                    return Err(SpinStop::OwnerSleeping);
                }
            }
        }
        if !due {
            return Ok(());
        }
        if self.oracle.should_yield() {
            return Err(SpinStop::Yield);
        }
        if let Some(tid) = owner {
            self.running = self.oracle.owner_running(tid);
            if self.running == Some(false) {
                return Err(SpinStop::OwnerSleeping);
            }
        }
        let now = monotonic_ns();
        if self.past_deadline(now) || now >= self.hard_end {
            return Err(SpinStop::Budget);
        }
        // An owner known to run may be spun on without its budget (the
        // kernel's rule); otherwise the budget decides.
        if self.running != Some(true) && now >= self.owner_end {
            return Err(SpinStop::Budget);
        }
        Ok(())
    }

    /// For polls with no owner to ask about and their own time limit: the
    /// oracle's yield and the deadline, then the time now for the caller's
    /// own test.
    #[inline]
    pub(crate) fn clock(&self) -> Result<u64, SpinStop> {
        if self.oracle.should_yield() {
            return Err(SpinStop::Yield);
        }
        let now = monotonic_ns();
        if self.past_deadline(now) {
            return Err(SpinStop::Budget);
        }
        Ok(now)
    }

    /// When the budgets of all owners together run out.
    #[inline]
    pub(crate) fn total_end(&self) -> u64 {
        self.total_end
    }

    /// The spin took the lock: fold its length into the lock's budget.
    #[inline]
    pub(crate) fn succeeded(&self, stats: &SpinStats) {
        stats.record_success(monotonic_ns().saturating_sub(self.start));
    }

    #[inline]
    fn past_deadline(&self, now: u64) -> bool {
        self.deadline.is_some_and(|d| now >= d)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use core::sync::atomic::{AtomicBool, Ordering::Relaxed};

    /// An oracle answering what the test sets.
    struct Fake {
        known: AtomicBool,
        running: AtomicBool,
        yield_now: AtomicBool,
    }

    impl OnCpu for Fake {
        fn owner_running(&self, _tid: u32) -> Option<bool> {
            self.known.load(Relaxed).then(|| self.running.load(Relaxed))
        }
        fn should_yield(&self) -> bool {
            self.yield_now.load(Relaxed)
        }
    }

    fn fake(known: bool, running: bool) -> &'static Fake {
        Box::leak(Box::new(Fake {
            known: AtomicBool::new(known),
            running: AtomicBool::new(running),
            yield_now: AtomicBool::new(false),
        }))
    }

    /// Polls `owner` until the spin stops; the stop and the ns it took.
    fn spin_until_stop(spin: &mut OwnerSpin, owner: Option<u32>) -> (SpinStop, u64) {
        let t0 = monotonic_ns();
        loop {
            if let Err(stop) = spin.poll(owner) {
                return (stop, monotonic_ns() - t0);
            }
            assert!(
                monotonic_ns() - t0 < 5_000_000_000,
                "the spin never stopped"
            );
        }
    }

    const BUDGET: u64 = 200_000;

    #[test]
    fn an_owner_off_cpu_stops_the_spin_at_once() {
        let mut spin = OwnerSpin::begin_with(fake(true, false), BUDGET, 4, None);
        assert_eq!(spin.poll(Some(7)), Err(SpinStop::OwnerSleeping));
    }

    #[test]
    fn an_unknown_owner_gets_one_budget() {
        let mut spin = OwnerSpin::begin_with(fake(false, false), BUDGET, 4, None);
        let (stop, ns) = spin_until_stop(&mut spin, Some(7));
        assert_eq!(stop, SpinStop::Budget);
        assert!(ns >= BUDGET * 9 / 10, "stopped after {ns} ns");
    }

    #[test]
    fn new_owners_get_fresh_budgets_up_to_the_total() {
        let mut spin = OwnerSpin::begin_with(fake(false, false), BUDGET, 3, None);
        let t0 = monotonic_ns();
        let mut owner = 1;
        let stop = loop {
            // A new owner every half budget: only the total ends the spin.
            if monotonic_ns() - t0 > owner as u64 * BUDGET / 2 {
                owner += 1;
            }
            if let Err(stop) = spin.poll(Some(owner)) {
                break stop;
            }
        };
        let ns = monotonic_ns() - t0;
        assert_eq!(stop, SpinStop::Budget);
        assert!(ns >= BUDGET * 2, "stopped after {ns} ns, before the total");
    }

    #[test]
    fn a_running_owner_is_spun_on_past_its_budget_up_to_the_hard_cap() {
        let mut spin = OwnerSpin::begin_with(fake(true, true), BUDGET, 4, None).with_hard_cap(3);
        let (stop, ns) = spin_until_stop(&mut spin, Some(7));
        assert_eq!(stop, SpinStop::Budget);
        assert!(
            ns >= BUDGET * 2,
            "stopped after {ns} ns, within the first budget"
        );
    }

    #[test]
    fn the_deadline_and_the_oracle_s_yield_stop_the_spin() {
        let deadline = monotonic_ns() + BUDGET / 4;
        let mut spin = OwnerSpin::begin_with(fake(true, true), BUDGET, 4, Some(deadline));
        let (stop, ns) = spin_until_stop(&mut spin, Some(7));
        assert_eq!(stop, SpinStop::Budget);
        assert!(ns < BUDGET * 20, "stopped after {ns} ns");
        assert!(monotonic_ns() >= deadline);

        let oracle = fake(true, true);
        let mut spin = OwnerSpin::begin_with(oracle, BUDGET, 4, None);
        oracle.yield_now.store(true, Relaxed);
        assert_eq!(spin_until_stop(&mut spin, Some(7)).0, SpinStop::Yield);
        let mut queued = OwnerSpin::begin_with(oracle, BUDGET, 4, None);
        while !queued.queued_poll() {}
        assert_eq!(queued.queued_stop(), SpinStop::Yield);
    }

    #[test]
    fn a_queued_spinner_gives_up_after_the_first_budget() {
        let mut spin = OwnerSpin::begin_with(fake(false, false), BUDGET, 4, None);
        let t0 = monotonic_ns();
        while !spin.queued_poll() {}
        assert!(monotonic_ns() - t0 >= BUDGET * 9 / 10);
        assert_eq!(spin.queued_stop(), SpinStop::Budget);
    }
}
