//! Anti-starvation hand-off: a thread that keeps re-locking cannot keep a
//! sleeping waiter out for longer than about the hand-off bound.
#![cfg(not(loom))]

use klock::mutex::{handoff_ns, NO_OWNER_SPIN, OWNER_SPIN};
use klock::MutexWith;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

fn busy(d: Duration) {
    let t0 = Instant::now();
    while t0.elapsed() < d {
        core::hint::spin_loop();
    }
}

/// Two hogs re-lock immediately after unlocking; a victim locks 20 times.
/// Returns the victim's longest wait.
fn longest_wait<const SPIN: u8>() -> Duration {
    let m = MutexWith::<SPIN, u64>::new(0);
    let stop = AtomicBool::new(false);
    let hog_rounds = AtomicU64::new(0);
    let mut worst = Duration::ZERO;
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                while !stop.load(Relaxed) {
                    let mut g = m.lock();
                    busy(Duration::from_micros(30));
                    *g += 1;
                    hog_rounds.fetch_add(1, Relaxed);
                }
            });
        }
        // Let the hogs get going.
        while hog_rounds.load(Relaxed) < 100 {
            std::thread::yield_now();
        }
        for _ in 0..20 {
            let t0 = Instant::now();
            let mut g = m.lock();
            worst = worst.max(t0.elapsed());
            *g += 1;
            drop(g);
            std::thread::sleep(Duration::from_millis(1));
        }
        stop.store(true, Relaxed);
    });
    assert_eq!(unsafe { m.raw() }.word(), 0);
    worst
}

// The bound is generous: the test machine is small and shared. Without the
// hand-off, a sleeper woken after every unlock typically finds the lock
// re-taken and can wait indefinitely.
const BOUND: Duration = Duration::from_millis(250);

#[test]
fn starving_sleeper_gets_in_no_spin() {
    assert!(handoff_ns() <= 10_000_000);
    let w = longest_wait::<NO_OWNER_SPIN>();
    assert!(w < BOUND, "victim waited {w:?}");
}

#[test]
fn starving_sleeper_gets_in_with_spinners() {
    let w = longest_wait::<OWNER_SPIN>();
    assert!(w < BOUND, "victim waited {w:?}");
}
