//! klock::Mutex under real threads: exact counts with 16 threads (spinning
//! on, off, and following the global switch), random sleeps inside and
//! outside the critical section, and the event counters.
//!
//! Event counters are process-wide and these tests run in parallel, so
//! event checks compare before/after with `>=`.
#![cfg(not(loom))]

use klock::events::{self, Event};
use klock::mutex::{NO_OWNER_SPIN, OWNER_SPIN, OWNER_SPIN_GLOBAL, WAITERS};
use klock::MutexWith;
use std::time::{Duration, Instant};

/// xorshift64
fn rng(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

/// `threads` threads add 1 to a plain counter `iters` times each. The
/// critical section reads, sometimes yields or sleeps, then writes, so a
/// mutual-exclusion failure loses updates. Returns the final count.
fn hammer<const SPIN: u8>(threads: usize, iters: u64) -> u64 {
    let m = MutexWith::<SPIN, u64>::new(0);
    let t0 = Instant::now();
    std::thread::scope(|s| {
        for t in 0..threads {
            let m = &m;
            s.spawn(move || {
                let mut r = (t as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
                for _ in 0..iters {
                    let x = rng(&mut r);
                    {
                        let mut g = m.lock();
                        let v = *g;
                        match x % 512 {
                            0 => std::thread::sleep(Duration::from_micros(50)),
                            1..=8 => std::thread::yield_now(),
                            _ => {
                                for _ in 0..(x % 32) {
                                    core::hint::spin_loop();
                                }
                            }
                        }
                        *g = v + 1;
                    }
                    match (x >> 16) % 1024 {
                        0 => std::thread::sleep(Duration::from_micros(100)),
                        1..=16 => std::thread::yield_now(),
                        _ => {}
                    }
                }
            });
        }
    });
    assert!(
        t0.elapsed() < Duration::from_secs(60),
        "took {:?}",
        t0.elapsed()
    );
    assert!(!m.is_locked());
    assert_eq!(unsafe { m.raw() }.word(), 0, "flags left behind");
    m.into_inner()
}

#[test]
fn exact_count_owner_spin_16_threads() {
    assert_eq!(hammer::<OWNER_SPIN>(16, 3_000), 48_000);
}

#[test]
fn exact_count_no_owner_spin_16_threads() {
    assert_eq!(hammer::<NO_OWNER_SPIN>(16, 3_000), 48_000);
}

#[test]
fn exact_count_global_mode_8_threads() {
    assert_eq!(hammer::<OWNER_SPIN_GLOBAL>(8, 4_000), 32_000);
}

#[test]
fn try_lock_and_lock_mixed() {
    let m = MutexWith::<OWNER_SPIN, u64>::new(0);
    let got = std::sync::atomic::AtomicU64::new(0);
    std::thread::scope(|s| {
        for t in 0..8 {
            let (m, got) = (&m, &got);
            s.spawn(move || {
                for i in 0..5_000u64 {
                    if (i + t) % 3 == 0 {
                        if let Some(mut g) = m.try_lock() {
                            *g += 1;
                            got.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        }
                    } else {
                        *m.lock() += 1;
                        got.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                }
            });
        }
    });
    assert_eq!(m.into_inner(), got.into_inner());
}

#[test]
fn fair_unlock_and_bump_keep_counts() {
    let m = MutexWith::<NO_OWNER_SPIN, u64>::new(0);
    std::thread::scope(|s| {
        for _ in 0..6 {
            let m = &m;
            s.spawn(move || {
                for i in 0..2_000u64 {
                    let mut g = m.lock();
                    *g += 1;
                    if i % 2 == 0 {
                        lock_api::MutexGuard::bump(&mut g);
                        *g += 1;
                        lock_api::MutexGuard::unlock_fair(g);
                    } else {
                        drop(g);
                    }
                }
            });
        }
    });
    assert_eq!(m.into_inner(), 6 * 3_000);
}

/// A sleeper is counted and woken: the holder keeps the lock long enough
/// that a NO_OWNER_SPIN locker must sleep.
#[test]
fn sleep_and_wake_are_counted() {
    let before = events::read(Event::MutexSleep);
    let before_wake = events::read(Event::MutexWake);
    let m = MutexWith::<NO_OWNER_SPIN, ()>::new(());
    let g = m.lock();
    std::thread::scope(|s| {
        s.spawn(|| drop(m.lock()));
        // Wait until the locker queued itself.
        let t0 = Instant::now();
        while unsafe { m.raw() }.word() & WAITERS == 0 {
            assert!(t0.elapsed() < Duration::from_secs(20));
            std::thread::sleep(Duration::from_millis(1));
        }
        std::thread::sleep(Duration::from_millis(5));
        drop(g);
    });
    assert_eq!(unsafe { m.raw() }.word(), 0);
    if events::enabled() {
        assert!(events::read(Event::MutexSleep) > before);
        assert!(events::read(Event::MutexWake) > before_wake);
    }
}

/// A spinner whose owner holds on far beyond the budget gives up (budget;
/// or, under the exact bpf oracle, because the owner sleeps), then sleeps;
/// short critical sections are mostly won by spinning.
#[test]
fn spin_outcomes_are_counted() {
    let gave_up = || {
        events::read(Event::MutexSpinFailBudget)
            + events::read(Event::MutexSpinFailYield)
            + events::read(Event::MutexSpinFailOwnerSleeping)
    };
    let fail0 = gave_up();
    let m = MutexWith::<OWNER_SPIN, u64>::new(0);
    let g = m.lock();
    std::thread::scope(|s| {
        s.spawn(|| *m.lock() += 1);
        let t0 = Instant::now();
        while unsafe { m.raw() }.word() & WAITERS == 0 {
            assert!(t0.elapsed() < Duration::from_secs(20));
            std::thread::sleep(Duration::from_millis(1));
        }
        drop(g);
    });
    if events::enabled() && klock::sys::online_cpus() > 1 {
        let fail1 = gave_up();
        assert!(fail1 > fail0, "the spinner should have given up");
        // Short critical sections: some spin must succeed within ~2 s.
        let succ0 = events::read(Event::MutexSpinSuccess);
        let t0 = Instant::now();
        while events::read(Event::MutexSpinSuccess) == succ0 {
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "no spin ever succeeded"
            );
            hammer::<OWNER_SPIN>(2, 2_000);
        }
    }
}
