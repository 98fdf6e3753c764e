//! The compact mutex (the one inside `libklock_preload.so`'s
//! `pthread_mutex_t`) counts its slow paths in `klock::events` as the full
//! mutex does. A file of its own: the counters are process-wide, and each
//! test here checks that its own scene moved them, so the tests take
//! [`ALONE`] and run one at a time (another's sleeps and wake-ups would
//! pass a check that this one's did not).
#![cfg(not(loom))]

use klock::events::{self, Event};
use klock::mutex::{RawMutexCompact, C_WAITERS};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

static ALONE: Mutex<()> = Mutex::new(());

/// This file's tests one at a time (a failed one leaves the lock
/// poisoned, not held); `None`, and the test is skipped, when klock counts
/// no events.
fn alone() -> Option<MutexGuard<'static, ()>> {
    if !events::enabled() {
        eprintln!("skipped: klock built without the `events` feature");
        return None;
    }
    Some(ALONE.lock().unwrap_or_else(|e| e.into_inner()))
}

/// Take `m`, let a second thread lock it, and once that thread sleeps in
/// the wait list (20 s at most), run `then`, which must release `m`; the
/// second thread then takes and releases it.
fn with_a_sleeper(m: &RawMutexCompact, then: impl FnOnce()) {
    m.lock();
    std::thread::scope(|s| {
        s.spawn(|| {
            m.lock();
            // SAFETY: we hold it.
            unsafe { m.unlock() };
        });
        let t0 = Instant::now();
        while m.word() & C_WAITERS == 0 {
            assert!(t0.elapsed() < Duration::from_secs(20), "never queued");
            std::thread::sleep(Duration::from_millis(1));
        }
        then();
    });
}

/// A locker that finds the lock held far longer than any spin budget
/// sleeps, is counted, and is woken by the unlock; a short hold is won by
/// spinning now and then.
#[test]
fn the_compact_mutex_counts_sleeps_wakes_and_spins() {
    let Some(_alone) = alone() else { return };
    let sleep0 = events::read(Event::MutexSleep);
    let wake0 = events::read(Event::MutexWake);
    let fail0 = events::read(Event::MutexSpinFailBudget)
        + events::read(Event::MutexSpinFailYield)
        + events::read(Event::MutexSpinFailOwnerSleeping);
    let m = RawMutexCompact::new();
    with_a_sleeper(&m, || {
        std::thread::sleep(Duration::from_millis(5));
        // SAFETY: the main thread holds it.
        unsafe { m.unlock() };
    });
    assert!(events::read(Event::MutexSleep) > sleep0, "no sleep counted");
    assert!(events::read(Event::MutexWake) > wake0, "no wake-up counted");
    if klock::sys::online_cpus() > 1 && klock::mutex::owner_spin() {
        let fail1 = events::read(Event::MutexSpinFailBudget)
            + events::read(Event::MutexSpinFailYield)
            + events::read(Event::MutexSpinFailOwnerSleeping);
        assert!(fail1 > fail0, "the spinner should have given up");
        // Short holds, two threads: some spin succeeds within seconds.
        let succ0 = events::read(Event::MutexSpinSuccess);
        let t0 = Instant::now();
        while events::read(Event::MutexSpinSuccess) == succ0 {
            assert!(t0.elapsed() < Duration::from_secs(10), "no spin succeeded");
            std::thread::scope(|s| {
                for _ in 0..2 {
                    s.spawn(|| {
                        for _ in 0..2_000 {
                            m.lock();
                            std::hint::black_box(&m);
                            // SAFETY: we hold it.
                            unsafe { m.unlock() };
                        }
                    });
                }
            });
        }
    }
}

/// A first waiter that an unlock woke, and that then lost the lock to the
/// unlocker taking it straight back, sleeps again: counted as
/// `sleep_again` as well as `sleep`.
#[test]
fn a_woken_waiter_that_loses_the_lock_is_counted_sleeping_again() {
    let Some(_alone) = alone() else { return };
    let again0 = events::read(Event::MutexSleepAgain);
    let m = RawMutexCompact::new();
    let t0 = Instant::now();
    // The waiter usually wakes after the unlocker has taken the lock
    // back; when it wins the race instead, try again.
    while events::read(Event::MutexSleepAgain) == again0 {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "no second sleep counted"
        );
        with_a_sleeper(&m, || {
            std::thread::sleep(Duration::from_millis(2));
            // SAFETY: the main thread holds it; the unlock wakes the
            // waiter, and the lock is taken back before it runs.
            unsafe { m.unlock() };
            m.lock();
            std::thread::sleep(Duration::from_millis(5));
            // SAFETY: as above.
            unsafe { m.unlock() };
        });
    }
    assert!(events::read(Event::MutexSleep) >= events::read(Event::MutexSleepAgain));
}
