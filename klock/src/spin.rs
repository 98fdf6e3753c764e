//! Busy-wait helpers: `cpu_relax` and a time-bounded spin budget.
//!
//! Budgets are in time, not iterations: `PAUSE` latency differs ten-fold
//! between CPUs. The clock is read every [`CLOCK_EVERY`] iterations only.

use crate::sys::monotonic_ns;

/// Read the clock once per this many spin iterations.
pub const CLOCK_EVERY: u32 = 16;

/// Read-only polls of a held lock before a contended locker starts the
/// full optimistic spin or queues (about 1 µs where `PAUSE` is slow, less
/// where it is fast): the quick spin of the mutex, the rw-semaphore and
/// the queued rwlock.
pub const QUICK_POLLS: u32 = 32;

/// The rw-semaphore's and the queued rwlock's quick spin: `poll()` up to
/// [`QUICK_POLLS`] times, with a relax between polls but not before the
/// first, until it returns `Some(took_the_lock)`; `false` if it never
/// does. Two polls under loom, where a relax is a yield that runs the
/// owner: enough to explore a poll that wins and one that gives up.
#[inline]
pub(crate) fn quick_poll(mut poll: impl FnMut() -> Option<bool>) -> bool {
    let polls = if cfg!(loom) { 2 } else { QUICK_POLLS };
    for n in 0..polls {
        if n > 0 {
            cpu_relax();
        }
        if let Some(took) = poll() {
            return took;
        }
    }
    false
}

/// Whether spin iteration `n` should read the clock (and ask the oracle):
/// once per [`CLOCK_EVERY`] iterations; under loom every iteration, so
/// that budgets end after a few model steps.
#[inline(always)]
pub(crate) fn clock_due(n: u32) -> bool {
    cfg!(loom) || n.is_multiple_of(CLOCK_EVERY)
}

/// One busy-wait iteration (`PAUSE` on x86; a yield under loom).
#[inline(always)]
pub fn cpu_relax() {
    crate::sync::spin_loop();
}

/// A spin that gives up after a time budget.
///
/// ```
/// use klock::spin::SpinBudget;
/// use std::sync::atomic::{AtomicBool, Ordering};
/// let flag = AtomicBool::new(false);
/// let mut budget = SpinBudget::new(2_000); // 2 µs
/// while !flag.load(Ordering::Acquire) {
///     if !budget.relax() {
///         break; // budget spent: go to sleep instead
///     }
/// }
/// ```
#[derive(Debug, Clone)]
pub struct SpinBudget {
    deadline: u64,
    n: u32,
}

impl SpinBudget {
    /// A budget of `ns` nanoseconds from now.
    #[inline]
    pub fn new(ns: u64) -> Self {
        Self {
            deadline: monotonic_ns().saturating_add(ns),
            n: 0,
        }
    }

    /// Relax once; returns `false` once the budget is spent.
    #[inline]
    pub fn relax(&mut self) -> bool {
        cpu_relax();
        self.n = self.n.wrapping_add(1);
        !self.n.is_multiple_of(CLOCK_EVERY) || monotonic_ns() < self.deadline
    }

    /// Spin until `done()` holds (true) or the budget is spent (false).
    #[inline]
    pub fn spin_until(&mut self, mut done: impl FnMut() -> bool) -> bool {
        loop {
            if done() {
                return true;
            }
            if !self.relax() {
                return false;
            }
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn budget_expires_near_its_time() {
        let t0 = Instant::now();
        let mut b = SpinBudget::new(2_000_000);
        assert!(!b.spin_until(|| false));
        let dt = t0.elapsed();
        assert!(dt >= Duration::from_millis(2), "{dt:?}");
        assert!(dt < Duration::from_secs(1), "{dt:?}");
    }

    #[test]
    fn spin_until_returns_when_done() {
        let mut n = 0;
        let mut b = SpinBudget::new(10_000_000_000);
        assert!(b.spin_until(|| {
            n += 1;
            n == 100
        }));
    }
}
