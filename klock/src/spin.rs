//! Busy-wait helpers: `cpu_relax` and a time-bounded spin budget.
//!
//! Budgets are in time, not iterations: `PAUSE` latency differs ten-fold
//! between CPUs. The clock is read every [`CLOCK_EVERY`] iterations only.

use crate::sys::monotonic_ns;

/// Read the clock once per this many spin iterations.
pub const CLOCK_EVERY: u32 = 16;

/// Read-only polls of a held lock before a contended mutex locker starts
/// the full optimistic spin or queues (about 1 µs where `PAUSE` is slow,
/// less where it is fast): the mutex's quick spin.
pub const QUICK_POLLS: u32 = 32;

/// How long the rw-semaphore's and the queued rwlock's quick spin polls a
/// held lock before the locker starts the full optimistic spin or queues.
pub const QUICK_SPIN_NS: u64 = 3_000;

/// The quick spin's gap after a poll that had to fetch the lock's cache
/// line, in ns: somebody wrote the line since our last look, so the holder
/// (or other lockers) keep writing it: short critical sections.
///
/// Why so long: every poll of a held lock pulls its cache line to the
/// poller, and the holder must take it back to unlock (and to write its
/// data, where they share the line): a round trip of 71–421 ns between
/// the two vCPUs of a KVM guest, as `klock bench` measured it. Polling after every `PAUSE` (about 21 ns on
/// that guest) took the line from the holder several times per critical
/// section of `klock bench rwsem-rate`; polling about once a microsecond
/// lets the holder run several short sections with the line in its cache,
/// and the waiter still finds the lock free between two of them
/// (`docs/locks/rwsem.md`, "The quick spin's gap").
pub const QUICK_SPIN_GAP_NS: u64 = 1_000;

/// The quick spin's gap after a poll that found the line still in our
/// cache, in ns: nobody wrote it since our last look, so the holder is in
/// a section that does not touch it, and polling costs it little. A long
/// gap there would leave the lock idle after its release: with the long
/// gap after every poll, `klock bench rwsem-dedicated` (1 µs sections)
/// ran about a quarter slower at 2 and 16 threads.
pub const QUICK_SPIN_SHORT_GAP_NS: u64 = 100;

/// A poll that took this much longer than a clock reading fetched the
/// line from another CPU: a cache hit costs a few ns, a transfer a good
/// part of the cache-line round trip between two CPUs (see
/// [`QUICK_SPIN_GAP_NS`]).
const QUICK_SPIN_MISS_NS: u64 = 25;

// The short gap is the shorter, and the long one fits in the quick spin.
const _: () =
    assert!(QUICK_SPIN_SHORT_GAP_NS < QUICK_SPIN_GAP_NS && QUICK_SPIN_GAP_NS < QUICK_SPIN_NS);

/// `PAUSE`s between two clock readings while the quick spin waits out a
/// gap.
const GAP_RELAX_CHUNK: u32 = 4;

/// The rw-semaphore's and the queued rwlock's quick spin: `poll()` at
/// once, then again after each gap ([`QUICK_SPIN_SHORT_GAP_NS`], or
/// [`QUICK_SPIN_GAP_NS`] after a poll that fetched the line) until it
/// returns `Some(took_the_lock)` or [`QUICK_SPIN_NS`] have passed
/// (`false`). The gaps are times, not counts of `PAUSE`s, whose latency
/// differs ten-fold between CPUs. Two polls under loom, with one relax (a
/// yield that runs the owner) between them: enough to explore a poll that
/// wins and one that gives up.
#[inline]
pub(crate) fn quick_poll(mut poll: impl FnMut() -> Option<bool>) -> bool {
    if let Some(took) = poll() {
        return took;
    }
    if cfg!(loom) {
        cpu_relax();
        return poll().unwrap_or(false);
    }
    quick_poll_gaps(&mut poll)
}

/// [`quick_poll`] after its first poll: the timed polls.
#[cold]
#[inline(never)]
fn quick_poll_gaps(poll: &mut dyn FnMut() -> Option<bool>) -> bool {
    let miss = clock_read_ns() + QUICK_SPIN_MISS_NS;
    let mut now = monotonic_ns();
    let end = now.saturating_add(QUICK_SPIN_NS);
    // The first poll came right after the fast path's failed attempt,
    // which fetched the line: its cost says nothing about the holder.
    let mut gap = QUICK_SPIN_SHORT_GAP_NS;
    loop {
        let next = now.saturating_add(gap);
        if next > end {
            return false;
        }
        // The gap's last clock reading also starts the poll's timing.
        let before = loop {
            for _ in 0..GAP_RELAX_CHUNK {
                cpu_relax();
            }
            let t = monotonic_ns();
            if t >= next {
                break t;
            }
        };
        if let Some(took) = poll() {
            return took;
        }
        now = monotonic_ns();
        gap = gap_after(now - before, miss);
    }
}

/// The quick spin's gap after a poll that took `cost` ns between two
/// clock readings: the long one if that is more than `miss` (a clock
/// reading plus [`QUICK_SPIN_MISS_NS`]: the poll fetched the line).
#[inline]
fn gap_after(cost: u64, miss: u64) -> u64 {
    if cost > miss {
        QUICK_SPIN_GAP_NS
    } else {
        QUICK_SPIN_SHORT_GAP_NS
    }
}

/// What one clock reading ([`monotonic_ns`]) costs here, in ns: the least
/// of a few back-to-back pairs, measured once.
fn clock_read_ns() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
    // A plain atomic, not a one-time cell: threads racing on the first
    // call each measure, and any of their answers will do.
    static COST: AtomicU64 = AtomicU64::new(u64::MAX);
    let c = COST.load(Relaxed);
    if c != u64::MAX {
        return c;
    }
    let c = (0..16)
        .map(|_| {
            let t = monotonic_ns();
            monotonic_ns() - t
        })
        .min()
        .unwrap_or(0);
    COST.store(c, Relaxed);
    c
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
    fn quick_poll_gives_up_after_its_time() {
        let mut polls = 0u64;
        let t0 = Instant::now();
        assert!(!quick_poll(|| {
            polls += 1;
            None
        }));
        let dt = t0.elapsed();
        // At most one poll per short gap (fewer where a preemption made
        // a poll look costly).
        let most = 1 + QUICK_SPIN_NS / QUICK_SPIN_SHORT_GAP_NS;
        assert!(polls > 1 && polls <= most, "{polls} polls");
        // It gives up when the next gap would end past its time: a short
        // gap's length before it, or a long one's after a poll that looked
        // costly (a busy host's preemption makes one so).
        let least = Duration::from_nanos(QUICK_SPIN_NS - QUICK_SPIN_GAP_NS);
        assert!(dt >= least, "{dt:?} < {least:?}");
    }

    #[test]
    fn quick_poll_waits_long_after_a_costly_poll() {
        // Each poll lasts longer than a transfer: the long gap follows it.
        let mut polls = 0u64;
        assert!(!quick_poll(|| {
            polls += 1;
            let t = monotonic_ns();
            while monotonic_ns() - t < clock_read_ns() + 2 * QUICK_SPIN_MISS_NS {}
            None
        }));
        let most = 2 + QUICK_SPIN_NS / QUICK_SPIN_GAP_NS;
        assert!(polls <= most, "{polls} polls, at most {most} expected");
    }

    #[test]
    fn a_poll_that_fetched_the_line_gets_the_long_gap() {
        let clock = clock_read_ns();
        let miss = clock + QUICK_SPIN_MISS_NS;
        assert_eq!(gap_after(clock, miss), QUICK_SPIN_SHORT_GAP_NS);
        assert_eq!(gap_after(miss, miss), QUICK_SPIN_SHORT_GAP_NS);
        assert_eq!(gap_after(miss + 1, miss), QUICK_SPIN_GAP_NS);
    }

    #[test]
    fn quick_poll_stops_at_the_first_answer() {
        let mut polls = 0;
        assert!(quick_poll(|| {
            polls += 1;
            (polls == 2).then_some(true)
        }));
        assert_eq!(polls, 2);
        polls = 0;
        assert!(!quick_poll(|| {
            polls += 1;
            Some(false)
        }));
        assert_eq!(polls, 1);
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
