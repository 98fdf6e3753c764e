//! Timed locking: times out on time, succeeds when released in time, and
//! leaves the lock usable after many timeouts under contention.
#![cfg(not(loom))]

use klock::mutex::{NO_OWNER_SPIN, OWNER_SPIN};
use klock::MutexWith;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

fn times_out_on_time<const SPIN: u8>() {
    let m = MutexWith::<SPIN, ()>::new(());
    let g = m.lock();
    std::thread::scope(|s| {
        s.spawn(|| {
            for ms in [1u64, 10, 30] {
                let d = Duration::from_millis(ms);
                let t0 = Instant::now();
                assert!(m.try_lock_for(d).is_none());
                let dt = t0.elapsed();
                assert!(dt >= d, "returned early: {dt:?} < {d:?}");
                assert!(dt < d + Duration::from_millis(500), "far too late: {dt:?}");
            }
            let t0 = Instant::now();
            assert!(m.try_lock_until(t0 + Duration::from_millis(5)).is_none());
            assert!(t0.elapsed() >= Duration::from_millis(5));
        });
    });
    assert_eq!(unsafe { m.raw() }.word() & klock::mutex::FLAGS, 0);
    drop(g);
    assert!(m.try_lock().is_some());
}

#[test]
fn times_out_on_time_spin() {
    times_out_on_time::<OWNER_SPIN>();
}

#[test]
fn times_out_on_time_no_spin() {
    times_out_on_time::<NO_OWNER_SPIN>();
}

#[test]
fn succeeds_when_released_in_time() {
    let m = MutexWith::<NO_OWNER_SPIN, u32>::new(0);
    let g = m.lock();
    std::thread::scope(|s| {
        let h = s.spawn(|| {
            let t0 = Instant::now();
            let mut g = m
                .try_lock_for(Duration::from_secs(10))
                .expect("released in time");
            *g += 1;
            t0.elapsed()
        });
        std::thread::sleep(Duration::from_millis(20));
        drop(g);
        let waited = h.join().unwrap();
        assert!(waited >= Duration::from_millis(15), "{waited:?}");
        assert!(waited < Duration::from_secs(5), "{waited:?}");
    });
    assert_eq!(m.into_inner(), 1);
}

/// 8 threads mix short timed attempts with plain locks; many time out.
/// Afterwards the count is exact and the lock is clean and usable.
fn contended_timeouts<const SPIN: u8>() {
    let m = MutexWith::<SPIN, u64>::new(0);
    let ok = AtomicU64::new(0);
    let timeouts = AtomicU64::new(0);
    let t_end = Instant::now() + Duration::from_millis(600);
    std::thread::scope(|s| {
        for t in 0..8u64 {
            let (m, ok, timeouts) = (&m, &ok, &timeouts);
            s.spawn(move || {
                let mut i = 0u64;
                while Instant::now() < t_end {
                    i += 1;
                    if (i + t).is_multiple_of(4) {
                        let mut g = m.lock();
                        *g += 1;
                        ok.fetch_add(1, Relaxed);
                        // Hold it a little so timed attempts do time out.
                        let h0 = Instant::now();
                        while h0.elapsed() < Duration::from_micros(100) {
                            core::hint::spin_loop();
                        }
                    } else {
                        let d = Duration::from_micros((i * 37 + t * 11) % 150);
                        match m.try_lock_for(d) {
                            Some(mut g) => {
                                *g += 1;
                                ok.fetch_add(1, Relaxed);
                            }
                            None => {
                                timeouts.fetch_add(1, Relaxed);
                            }
                        }
                    }
                }
            });
        }
    });
    assert!(timeouts.load(Relaxed) > 0, "no attempt timed out");
    assert_eq!(unsafe { m.raw() }.word(), 0, "flags or owner left behind");
    // Still usable, from several threads.
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for _ in 0..1000 {
                    *m.lock() += 1;
                }
            });
        }
    });
    assert_eq!(m.into_inner(), ok.load(Relaxed) + 4000);
}

#[test]
fn contended_timeouts_spin() {
    contended_timeouts::<OWNER_SPIN>();
}

#[test]
fn contended_timeouts_no_spin() {
    contended_timeouts::<NO_OWNER_SPIN>();
}
