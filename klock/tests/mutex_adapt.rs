//! The mutex's adaptive test of whether owner spinning pays
//! (`klock::spinadapt`): a contended lock completes a test within about
//! 250 ms and keeps its verdict; the verdict steers spinning only in the
//! modes that adapt; the global switch restores the kernel's behaviour.
//!
//! One test function: the switch is process-wide.
#![cfg(not(loom))]

use klock::mutex::{NO_OWNER_SPIN, OWNER_SPIN, OWNER_SPIN_FIXED, OWNER_SPIN_GLOBAL};
use klock::spinadapt::{self, Decision, CHECK_EVERY, MEASURE_NS, RUN_NS, SETTLE_NS};
use klock::{MutexWith, RawMutexWith};
use std::time::{Duration, Instant};

/// Drive a lock's test to "no spinning" with a synthetic clock: spinning
/// runs at 1 acquisition per µs, sleeping at 2.
fn force_nospin<const S: u8>(m: &RawMutexWith<S>) {
    let a = m.spin_adapt();
    let (mut t, mut c) = (1u64 << 40, 0u32);
    for _ in 0..100_000 {
        a.contended();
        let per_check = if a.spin() { 1_000 } else { 500 } * u64::from(CHECK_EVERY);
        t += per_check;
        c = c.wrapping_add(CHECK_EVERY);
        if a.checkpoint(t, c) == Some(Decision::NoSpin) {
            return;
        }
    }
    panic!("no NoSpin decision from a 2× faster sleeping mode");
}

#[test]
fn adaptive_spinning() {
    // 1. A contended lock completes a test and follows it.
    let m = MutexWith::<OWNER_SPIN, u64>::new(0);
    let t0 = Instant::now();
    let budget = Duration::from_millis((RUN_NS + 2 * (SETTLE_NS + MEASURE_NS)) / 1_000_000 * 10);
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                while t0.elapsed() < budget && unsafe { m.raw() }.spin_adapt().last_rates().1 == 0 {
                    for _ in 0..1000 {
                        *m.lock() += 1;
                    }
                }
            });
        }
    });
    let (spin, nospin) = unsafe { m.raw() }.spin_adapt().last_rates();
    assert!(
        spin > 0 && nospin > 0,
        "no test completed in {budget:?} ({} acquisitions)",
        *m.lock()
    );
    // Nothing has run on the lock since: its mode is the verdict.
    let keep = spin > nospin;
    assert_eq!(
        unsafe { m.raw() }.spin_adapt().spin(),
        keep,
        "{spin} vs {nospin} per s"
    );

    // 2. The verdict steers the modes that adapt, and only those.
    spinadapt::set_enabled(true);
    let adapting = RawMutexWith::<OWNER_SPIN>::new();
    force_nospin(&adapting);
    assert!(!adapting.owner_spin_enabled());
    let fixed = RawMutexWith::<OWNER_SPIN_FIXED>::new();
    force_nospin(&fixed);
    assert!(fixed.owner_spin_enabled(), "OWNER_SPIN_FIXED never adapts");
    let global = RawMutexWith::<OWNER_SPIN_GLOBAL>::new();
    force_nospin(&global);
    assert!(!global.owner_spin_enabled() || !klock::mutex::owner_spin());
    assert!(!RawMutexWith::<NO_OWNER_SPIN>::new().owner_spin_enabled());

    // 3. The global switch off: the kernel's behaviour, whatever the test said.
    spinadapt::set_enabled(false);
    assert!(adapting.owner_spin_enabled());
    spinadapt::set_enabled(true);
    assert!(!adapting.owner_spin_enabled());

    // 4. Switched off, a contended lock runs no test at all.
    spinadapt::set_enabled(false);
    let m = MutexWith::<OWNER_SPIN, u64>::new(0);
    let t0 = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                // Long enough for two tests (each ~12 ms after 256 locks).
                while t0.elapsed() < Duration::from_millis(100) {
                    *m.lock() += 1;
                }
            });
        }
    });
    assert_eq!(unsafe { m.raw() }.spin_adapt().last_rates(), (0, 0));
    spinadapt::set_enabled(true);

    // 5. A lock that tests "no spinning" still excludes and makes progress.
    let m = MutexWith::<OWNER_SPIN, u64>::new(0);
    force_nospin(unsafe { m.raw() });
    std::thread::scope(|s| {
        for _ in 0..8 {
            s.spawn(|| {
                for _ in 0..20_000 {
                    *m.lock() += 1;
                }
            });
        }
    });
    assert_eq!(*m.lock(), 8 * 20_000);
}
