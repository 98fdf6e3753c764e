//! Is owner spinning paying on this lock? A per-lock A/B test of spinning
//! against sleeping, re-run every 250 ms to 2 s (a userspace addition to
//! the mutex of docs/design.md, section 3).
//!
//! The kernel spins on a running owner because the spinner gets the lock
//! sooner than a sleeper could be woken. With more threads than CPUs that
//! is still true for the spinner, but not always for the lock: every
//! spin-acquisition moves the lock word *and the data it protects* to
//! another CPU, and that transfer lies on the critical path. Two CPUs
//! trading a short critical section can then finish fewer operations than
//! one CPU keeping the lock to itself while the other contenders sleep.
//! Whether the transfer or the overlap wins depends on the distance
//! between the CPUs, which userspace cannot see and which a virtual
//! machine's host changes at will (the 2-vCPU development host flips
//! between a 56–200 ns and a 350–600 ns cache-line round trip every few
//! seconds to minutes; at 16 threads owner spinning is then 1.7× or
//! 0.57× as fast as sleeping).
//!
//! So the lock measures. Once it has been contended, the holder counts
//! acquisitions (a plain load+store on the lock's own cache line: only
//! the holder writes it); a lock that stays uncontended for a whole
//! [`RUN_NS`] stops counting, so uncontended use costs one load per
//! unlock. Every [`CHECK_EVERY`] acquisitions the holder reads the clock
//! and steps a small state machine:
//!
//! ```text
//!  RUN(spin or not) --RUN_NS--> SETTLE(spin) --SETTLE_NS--> MEASURE(spin)
//!        ^                                                      | MEASURE_NS
//!        |                                                      v
//!        +---- decide ---- MEASURE(no spin) <--SETTLE_NS-- SETTLE(no spin)
//! ```
//!
//! and keeps the faster mode for the next run: [`RUN_NS`], doubled after
//! each test that agrees with the one before, up to [`MAX_RUN_NS`], and
//! back to [`RUN_NS`] when a test changes its mind. Spinning is kept if
//! it was faster; an exact tie sleeps. It used to need a 10% lead, so
//! that a tie would sleep and leave a CPU to the rest of the program, but
//! one test is noisy (with more threads than CPUs a 5 ms window is not
//! much longer than a scheduler time slice), and where spinning won by
//! 1.06–1.56x that lead made 22 of 78 tests choose sleeping; without it
//! the lock did 4% more work over 72 runs measured side by side
//! (`docs/locks/mutex.md`, "No margin"). Where sleeping wins it wins by
//! far more (always spinning did 0.49–0.56x sleeping at 16 threads with
//! the vCPUs far apart), so a margin buys little there. The price: a lock
//! whose two modes tie spins in about half of its runs, keeping a second
//! CPU busy for the same work. A lock that was not contended at all
//! during a run is not tested again until it is, and spins meanwhile. A test spends
//! [`MEASURE_NS`] + [`SETTLE_NS`] in the worse mode: 2.4% of a 250 ms
//! run, 0.3% of a 2 s one. It costs more than that time share, since
//! the switches between modes are not free: in 1 s bench runs of a fresh
//! lock, where spinning wins, `mutex` did 1–5% less than `mutex-fixed`
//! at 4–32 threads on 2 CPUs (`bench/results/2core-mutex-v3.txt`), and
//! 2.1% less at 16 threads in a later measurement (`2core-mutex-ceiling-v4.txt`).
//!
//! Only the lock holder steps the machine, so its fields need no
//! synchronisation beyond the lock itself; they are atomics (`Relaxed`)
//! only because contenders read the decision, and tests the rates, while
//! someone holds the lock.

use crate::config::SPIN_ADAPT as ADAPT;
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering::Relaxed};

/// Acquisitions between two clock readings.
pub const CHECK_EVERY: u32 = 256;
/// After a mode switch, wait this long (ns) before measuring: spinners
/// must give up or sleepers start spinning.
pub const SETTLE_NS: u64 = 1_000_000;
/// Measured window per mode (ns).
pub const MEASURE_NS: u64 = 5_000_000;
/// Keep the winner this long (ns) before testing again.
pub const RUN_NS: u64 = 250_000_000;
/// The longest run (ns), reached by doubling [`RUN_NS`] while successive
/// tests agree.
pub const MAX_RUN_NS: u64 = 2_000_000_000;

const RUN: u8 = 0;
const SETTLE_SPIN: u8 = 1;
const MEASURE_SPIN: u8 = 2;
const SETTLE_NOSPIN: u8 = 3;
const MEASURE_NOSPIN: u8 = 4;

/// Whether locks that may adapt do (on unless `KLOCK_SPIN_ADAPT=0` or
/// [`set_enabled`]`(false)`).
#[inline]
pub fn enabled() -> bool {
    ADAPT.get()
}

/// Turn the adaptive test on or off for every lock that may adapt. Off:
/// they spin as the kernel does, always, and count nothing (a lock that
/// was counting stops at the end of its current run).
pub fn set_enabled(on: bool) {
    ADAPT.set(on);
}

/// What a checkpoint decided (for the caller's event counters).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Spinning was faster: keep it for the next run.
    Spin,
    /// Sleeping was faster, or as fast: no spinning for the next run.
    NoSpin,
}

/// One lock's test state. See the [module docs](self).
#[derive(Debug)]
#[repr(C)] // The per-acquisition fields last: the mutex puts them right before its owner word.
pub struct SpinAdapt {
    /// Start of the current phase (ns) and the count then.
    t0: AtomicU64,
    /// Acquisitions per second measured in each mode, last cycle.
    spin_rate: AtomicU64,
    nospin_rate: AtomicU64,
    /// Length of the current run (ns), and the last verdict (`NONE`,
    /// `SPIN`, `NOSPIN`) it doubles on.
    run_ns: AtomicU64,
    c0: AtomicU32,
    last: AtomicU8,
    /// Acquisitions so far (wrapping); written only by the holder.
    count: AtomicU32,
    /// Counting at all: set by the first contended lock, cleared when a
    /// whole [`RUN_NS`] passed without contention (an uncontended lock
    /// pays one load per unlock, not a count).
    active: AtomicBool,
    /// A contended lock was seen since the last test ended.
    seen: AtomicBool,
    /// The current mode: spin on a running owner or not.
    spin: AtomicBool,
    phase: AtomicU8,
}

const NONE: u8 = 0;
const SPIN: u8 = 1;
const NOSPIN: u8 = 2;

impl SpinAdapt {
    /// Spinning, with a test due at the first checkpoint.
    pub const fn new() -> Self {
        Self {
            count: AtomicU32::new(0),
            active: AtomicBool::new(false),
            seen: AtomicBool::new(false),
            spin: AtomicBool::new(true),
            phase: AtomicU8::new(RUN),
            t0: AtomicU64::new(0),
            c0: AtomicU32::new(0),
            spin_rate: AtomicU64::new(0),
            nospin_rate: AtomicU64::new(0),
            run_ns: AtomicU64::new(RUN_NS),
            last: AtomicU8::new(NONE),
        }
    }

    /// Whether the test is counting acquisitions (it was contended and has
    /// not yet seen a whole run without contention).
    #[inline]
    pub fn counting(&self) -> bool {
        self.active.load(Relaxed)
    }

    /// Start over as [`new`](Self::new) (for a test state that moves to
    /// another lock). Relaxed stores: statistics, as everywhere here.
    pub fn reset(&self) {
        self.count.store(0, Relaxed);
        self.active.store(false, Relaxed);
        self.seen.store(false, Relaxed);
        self.spin.store(true, Relaxed);
        self.phase.store(RUN, Relaxed);
        self.t0.store(0, Relaxed);
        self.c0.store(0, Relaxed);
        self.spin_rate.store(0, Relaxed);
        self.nospin_rate.store(0, Relaxed);
        self.run_ns.store(RUN_NS, Relaxed);
        self.last.store(NONE, Relaxed);
    }

    /// Whether contenders should spin now.
    #[inline]
    pub fn spin(&self) -> bool {
        self.spin.load(Relaxed)
    }

    /// Acquisitions per second measured with and without spinning in the
    /// last completed test (0 before the first).
    pub fn last_rates(&self) -> (u64, u64) {
        (self.spin_rate.load(Relaxed), self.nospin_rate.load(Relaxed))
    }

    /// A locker found the lock taken (its slow path): start counting, and
    /// test again when the current run ends. Plain stores, and only when
    /// the value changes: racing contenders all write `true`.
    #[inline]
    pub fn contended(&self) {
        if !self.seen.load(Relaxed) {
            self.seen.store(true, Relaxed);
        }
        if !self.active.load(Relaxed) {
            self.active.store(true, Relaxed);
        }
    }

    /// Count one acquisition; called by the holder before it releases.
    /// Returns a decision when a test just completed.
    #[inline(always)]
    pub fn on_unlock(&self) -> Option<Decision> {
        if !self.active.load(Relaxed) {
            return None;
        }
        let c = self.count.load(Relaxed).wrapping_add(1);
        self.count.store(c, Relaxed);
        if !c.is_multiple_of(CHECK_EVERY) {
            return None;
        }
        self.checkpoint(crate::sys::monotonic_ns(), c)
    }

    /// Step the state machine at time `now` (ns) with `c` acquisitions.
    #[cold]
    #[inline(never)]
    pub fn checkpoint(&self, now: u64, c: u32) -> Option<Decision> {
        let elapsed = now.saturating_sub(self.t0.load(Relaxed));
        let next = |phase: u8| {
            self.phase.store(phase, Relaxed);
            self.t0.store(now, Relaxed);
            self.c0.store(c, Relaxed);
        };
        let rate = || {
            let n = u64::from(c.wrapping_sub(self.c0.load(Relaxed)));
            n.saturating_mul(1_000_000_000) / elapsed.max(1)
        };
        match self.phase.load(Relaxed) {
            RUN if elapsed >= self.run_ns.load(Relaxed) => {
                // Spin (the kernel's way) while testing, and while idle.
                self.spin.store(true, Relaxed);
                if self.seen.load(Relaxed) {
                    next(SETTLE_SPIN);
                } else {
                    // No contention for a whole run: stop counting until
                    // the next contended lock, and start over then.
                    self.active.store(false, Relaxed);
                    self.run_ns.store(RUN_NS, Relaxed);
                    self.last.store(NONE, Relaxed);
                }
            }
            SETTLE_SPIN if elapsed >= SETTLE_NS => next(MEASURE_SPIN),
            MEASURE_SPIN if elapsed >= MEASURE_NS => {
                self.spin_rate.store(rate(), Relaxed);
                self.spin.store(false, Relaxed);
                next(SETTLE_NOSPIN);
            }
            SETTLE_NOSPIN if elapsed >= SETTLE_NS => next(MEASURE_NOSPIN),
            MEASURE_NOSPIN if elapsed >= MEASURE_NS => {
                let nospin = rate();
                self.nospin_rate.store(nospin, Relaxed);
                let spin = self.spin_rate.load(Relaxed);
                let keep_spinning = spin > nospin;
                self.spin.store(keep_spinning, Relaxed);
                self.seen.store(false, Relaxed);
                let verdict = if keep_spinning { SPIN } else { NOSPIN };
                let run = if self.last.load(Relaxed) == verdict {
                    self.run_ns.load(Relaxed).saturating_mul(2).min(MAX_RUN_NS)
                } else {
                    RUN_NS
                };
                self.run_ns.store(run, Relaxed);
                self.last.store(verdict, Relaxed);
                next(RUN);
                return Some(if keep_spinning {
                    Decision::Spin
                } else {
                    Decision::NoSpin
                });
            }
            _ => {}
        }
        None
    }
}

impl Default for SpinAdapt {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// The fields every counted acquisition touches are the last eight
    /// bytes (the mutex puts its owner word right after them).
    #[test]
    fn per_acquisition_fields_are_last() {
        let size = core::mem::size_of::<SpinAdapt>();
        assert_eq!(core::mem::offset_of!(SpinAdapt, count), size - 8);
        assert_eq!(core::mem::offset_of!(SpinAdapt, phase), size - 1);
    }

    const MS: u64 = 1_000_000;

    /// Drive `a` from (`t`, `c`) until time `end` at `per_sec`
    /// acquisitions per second, one checkpoint per CHECK_EVERY
    /// acquisitions; returns the decisions and the end time and count.
    fn drive(a: &SpinAdapt, t: u64, c: u32, end: u64, per_sec: u64) -> (Vec<Decision>, u64, u32) {
        let step_ns = u64::from(CHECK_EVERY) * 1_000_000_000 / per_sec;
        let (mut t, mut c, mut out) = (t, c, Vec::new());
        while t + step_ns <= end {
            t += step_ns;
            c = c.wrapping_add(CHECK_EVERY);
            out.extend(a.checkpoint(t, c));
        }
        (out, t, c)
    }

    /// Run a whole test cycle of a contended lock that does `spin_rate`
    /// per second while spinning and `nospin_rate` while not.
    fn cycle(
        a: &SpinAdapt,
        t: u64,
        c: u32,
        spin_rate: u64,
        nospin_rate: u64,
    ) -> (Decision, u64, u32) {
        let (mut t, mut c) = (t, c);
        loop {
            a.contended();
            let rate = if a.spin() { spin_rate } else { nospin_rate };
            t += u64::from(CHECK_EVERY) * 1_000_000_000 / rate;
            c = c.wrapping_add(CHECK_EVERY);
            if let Some(d) = a.checkpoint(t, c) {
                return (d, t, c);
            }
            assert!(t < 10_000 * MS, "no decision after 10 s");
        }
    }

    #[test]
    fn sleeping_faster_by_the_margin_turns_spinning_off() {
        let a = SpinAdapt::new();
        let (d, _, _) = cycle(&a, 0, 0, 2_500_000, 4_000_000);
        assert_eq!(d, Decision::NoSpin);
        assert!(!a.spin());
        let (s, n) = a.last_rates();
        assert!((2_400_000..2_600_000).contains(&s), "{s}");
        assert!((3_900_000..4_100_000).contains(&n), "{n}");
    }

    #[test]
    fn spinning_faster_keeps_spinning_and_a_tie_sleeps() {
        let a = SpinAdapt::new();
        let (d, t, c) = cycle(&a, 0, 0, 6_500_000, 4_000_000);
        assert_eq!(d, Decision::Spin);
        assert!(a.spin());
        // Equal rates: a tie, which sleeps.
        let (d, t, c) = cycle(&a, t, c, 4_000_000, 4_000_000);
        assert_eq!(d, Decision::NoSpin);
        assert!(!a.spin());
        // Spinning 5% faster: spin (no margin).
        let (d, t, c) = cycle(&a, t, c, 4_200_000, 4_000_000);
        assert_eq!(d, Decision::Spin);
        // Spinning 5% slower: sleep.
        let (d, _, _) = cycle(&a, t, c, 3_800_000, 4_000_000);
        assert_eq!(d, Decision::NoSpin);
    }

    #[test]
    fn the_test_repeats_after_run_ns_and_can_change_its_mind() {
        let a = SpinAdapt::new();
        let (d, t, c) = cycle(&a, 0, 0, 2_000_000, 4_000_000);
        assert_eq!(d, Decision::NoSpin);
        // Within RUN_NS nothing changes, whatever the rate.
        let (ds, t2, c2) = drive(&a, t, c, t + RUN_NS - 5 * MS, 4_000_000);
        assert!(ds.is_empty() && !a.spin());
        // Then it tests again (spinning first) and, the machine having
        // changed, goes back to spinning.
        let (d, _, _) = cycle(&a, t2, c2, 6_000_000, 4_000_000);
        assert_eq!(d, Decision::Spin);
        assert!(a.spin());
    }

    #[test]
    fn the_count_wraps_and_a_slow_lock_still_decides() {
        let a = SpinAdapt::new();
        // Start near u32::MAX, at 10,000 acquisitions a second.
        // Equal rates: a tie, which sleeps.
        let (d, _, _) = cycle(&a, 0, u32::MAX - 3 * CHECK_EVERY, 10_000, 10_000);
        assert_eq!(d, Decision::NoSpin);
        let (s, n) = a.last_rates();
        assert!(
            (9_000..11_000).contains(&s) && (9_000..11_000).contains(&n),
            "{s} {n}"
        );
    }

    #[test]
    fn on_unlock_counts_and_checks_every_check_every() {
        let a = SpinAdapt::new();
        // Uncontended: nothing counted.
        for _ in 0..2 * CHECK_EVERY {
            assert_eq!(a.on_unlock(), None);
        }
        assert_eq!(a.count.load(Relaxed), 0);
        a.contended();
        for _ in 0..CHECK_EVERY - 1 {
            assert_eq!(a.on_unlock(), None);
        }
        assert_eq!(a.count.load(Relaxed), CHECK_EVERY - 1);
        // The 256th reads the clock: the first RUN phase (t0 = 0) is over.
        assert_eq!(a.on_unlock(), None);
        assert_eq!(a.phase.load(Relaxed), SETTLE_SPIN);
    }

    /// The time from a decision to the start of the next test.
    fn run_length(a: &SpinAdapt, t: u64, c: u32) -> u64 {
        let step = u64::from(CHECK_EVERY) * 1_000; // 1 acquisition per µs
        let (mut now, mut c) = (t, c);
        while a.phase.load(Relaxed) == RUN {
            a.contended();
            now += step;
            c = c.wrapping_add(CHECK_EVERY);
            a.checkpoint(now, c);
            assert!(now - t < 10 * MAX_RUN_NS, "no new test");
        }
        now - t
    }

    #[test]
    fn agreeing_tests_double_the_run_and_a_change_resets_it() {
        let a = SpinAdapt::new();
        let (mut t, mut c) = (0, 0);
        let mut runs = Vec::new();
        // Sleeping wins five times, then spinning.
        for (spin, nospin) in [(2, 4), (2, 4), (2, 4), (2, 4), (2, 4), (6, 4)] {
            let (_, t1, c1) = cycle(&a, t, c, spin * 1_000_000, nospin * 1_000_000);
            let len = run_length(&a, t1, c1);
            runs.push(len / MS);
            (t, c) = (t1 + len, c1.wrapping_add(CHECK_EVERY));
        }
        // 250, 500, 1000, 2000, 2000 ms (capped), then 250 after the change;
        // each ends at the first checkpoint past it (256 µs steps).
        assert_eq!(runs, vec![250, 500, 1000, 2000, 2000, 250]);
    }

    #[test]
    fn a_run_without_contention_stops_counting_until_the_next() {
        let a = SpinAdapt::new();
        a.contended();
        let (d, t, c) = cycle(&a, 0, 0, 2_000_000, 4_000_000);
        assert_eq!(d, Decision::NoSpin);
        // No contended lock during the run: at its end the lock spins
        // again (the default) and stops counting.
        let (_, t, c) = drive(&a, t, c, t + RUN_NS + MS, 1_000_000);
        assert!(a.spin());
        assert!(!a.active.load(Relaxed));
        // The next contention restarts counting; the stale run is over, so
        // the first checkpoint starts a test.
        a.contended();
        assert!(a.active.load(Relaxed));
        assert_eq!(a.checkpoint(t + MS, c.wrapping_add(CHECK_EVERY)), None);
        assert_eq!(a.phase.load(Relaxed), SETTLE_SPIN);
    }
}
