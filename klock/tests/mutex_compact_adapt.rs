//! The compact mutex's adaptive test of whether owner spinning pays
//! (`klock::spinadapt`, its state in a table beside the locks): a
//! contended lock starts a test, completes it within about 250 ms and
//! follows it; a lock whose test stops counting is back on the fast
//! paths; with the tests switched off a contended lock runs none.
//!
//! One test function: the switch is process-wide.
#![cfg(not(loom))]

use klock::mutex::RawMutexCompact;
use klock::spinadapt::{self, MEASURE_NS, RUN_NS, SETTLE_NS};
use std::time::{Duration, Instant};

/// `threads` threads lock and unlock `m` until `done` or `limit`.
fn hammer(m: &RawMutexCompact, threads: usize, limit: Duration, done: impl Fn() -> bool + Sync) {
    let t0 = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                while t0.elapsed() < limit && !done() {
                    for _ in 0..1000 {
                        m.lock();
                        // SAFETY: held.
                        unsafe { m.unlock() };
                    }
                }
            });
        }
    });
}

#[test]
fn compact_mutex_adaptive_spinning() {
    spinadapt::set_enabled(true);
    // 1. A contended lock gets a test, completes it and follows it.
    let m = Box::new(RawMutexCompact::new());
    assert!(m.spin_test().is_none(), "an unused lock runs no test");
    let budget = Duration::from_millis((RUN_NS + 2 * (SETTLE_NS + MEASURE_NS)) / 1_000_000 * 10);
    hammer(&m, 4, budget, || {
        m.spin_test().is_some_and(|t| t.last_rates().1 > 0)
    });
    let t = m
        .spin_test()
        .expect("a contended lock runs a test (or its slot was taken by another lock)");
    let (spin, nospin) = t.last_rates();
    assert!(spin > 0 && nospin > 0, "no test completed in {budget:?}");
    // Nothing has run on the lock since: its mode is the verdict.
    let keep = spin > nospin;
    assert_eq!(t.spin(), keep, "{spin} vs {nospin} per s");

    // 2. A test that stops counting (as after a run without contention)
    //    releases the lock at its next acquisition: back on the fast paths.
    t.reset();
    m.lock();
    // SAFETY: held.
    unsafe { m.unlock() };
    assert!(m.spin_test().is_none());
    assert_eq!(m.word(), 0, "the mark is cleared");

    // 3. Switched off, a contended lock runs no test at all.
    spinadapt::set_enabled(false);
    let m = Box::new(RawMutexCompact::new());
    hammer(&m, 4, Duration::from_millis(100), || false);
    assert!(m.spin_test().is_none());
    spinadapt::set_enabled(true);
}
