//! klock::Condvar with klock::Mutex: producer/consumer with many threads,
//! notify_all wakes everyone, wait_for times out.
#![cfg(not(loom))]

use klock::mutex::NO_OWNER_SPIN;
use klock::{Condvar, CondvarWith, Mutex, MutexWith};
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// A bounded queue: 4 producers, 4 consumers, capacity 8.
#[test]
fn producer_consumer_loses_nothing() {
    const PER_PRODUCER: u64 = 5_000;
    let q = Mutex::new(VecDeque::<u64>::new());
    let not_empty = Condvar::new();
    let not_full = Condvar::new();
    let done_producers = Mutex::new(0u32);
    let total = std::sync::atomic::AtomicU64::new(0);
    let count = std::sync::atomic::AtomicU64::new(0);
    std::thread::scope(|s| {
        for p in 0..4u64 {
            let (q, not_empty, not_full, done_producers) =
                (&q, &not_empty, &not_full, &done_producers);
            s.spawn(move || {
                for i in 0..PER_PRODUCER {
                    let mut g = q.lock();
                    not_full.wait_while(&mut g, |q| q.len() >= 8);
                    g.push_back(p * 1_000_000 + i);
                    drop(g);
                    not_empty.notify_one();
                }
                *done_producers.lock() += 1;
                // Consumers may be waiting for an item that never comes.
                let _g = q.lock();
                not_empty.notify_all();
            });
        }
        for _ in 0..4 {
            let (q, not_empty, not_full, done_producers, total, count) =
                (&q, &not_empty, &not_full, &done_producers, &total, &count);
            s.spawn(move || loop {
                let mut g = q.lock();
                loop {
                    if let Some(v) = g.pop_front() {
                        drop(g);
                        not_full.notify_one();
                        total.fetch_add(v, std::sync::atomic::Ordering::Relaxed);
                        count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        break;
                    }
                    if *done_producers.lock() == 4 {
                        return;
                    }
                    // Timed, as a safety net against a lost wake-up hanging
                    // the test (the assertions below would still catch it).
                    not_empty.wait_for(&mut g, Duration::from_millis(200));
                }
            });
        }
    });
    let n = PER_PRODUCER;
    let expect: u64 = (0..4u64).map(|p| p * 1_000_000 * n + n * (n - 1) / 2).sum();
    assert_eq!(count.into_inner(), 4 * n);
    assert_eq!(total.into_inner(), expect);
}

#[test]
fn notify_all_wakes_all() {
    let m = MutexWith::<NO_OWNER_SPIN, (bool, u32)>::new((false, 0));
    let c = CondvarWith::<NO_OWNER_SPIN>::new();
    let t0 = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..8 {
            s.spawn(|| {
                let mut g = m.lock();
                g.1 += 1;
                while !g.0 {
                    c.wait(&mut g);
                }
            });
        }
        // Wait until all 8 are waiting (each counted itself, then waits).
        loop {
            let g = m.lock();
            if g.1 == 8 {
                break;
            }
            drop(g);
            std::thread::sleep(Duration::from_millis(1));
        }
        std::thread::sleep(Duration::from_millis(10));
        m.lock().0 = true;
        c.notify_all();
    });
    // All 8 returned (the scope joined them) after one notify_all.
    assert!(t0.elapsed() < Duration::from_secs(20));
}

#[test]
fn notify_one_wakes_one_waiter() {
    let m = Mutex::new(0u32);
    let c = Condvar::new();
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut g = m.lock();
            *g = 1;
            c.wait_while(&mut g, |v| *v != 2);
        });
        loop {
            let mut g = m.lock();
            if *g == 1 {
                *g = 2;
                c.notify_one();
                break;
            }
            drop(g);
            std::thread::sleep(Duration::from_millis(1));
        }
    });
    assert_eq!(m.into_inner(), 2);
}

#[test]
fn wait_for_and_wait_until_time_out() {
    let m = Mutex::new(());
    let c = Condvar::new();
    let mut g = m.lock();
    for ms in [1u64, 20] {
        let d = Duration::from_millis(ms);
        let t0 = Instant::now();
        assert!(c.wait_for(&mut g, d).timed_out());
        let dt = t0.elapsed();
        assert!(dt >= d, "{dt:?}");
        assert!(dt < d + Duration::from_millis(500), "{dt:?}");
    }
    let t0 = Instant::now();
    let r = c.wait_while_until(&mut g, |_| true, t0 + Duration::from_millis(10));
    assert!(r.timed_out());
    assert!(t0.elapsed() >= Duration::from_millis(10));
    assert!(m.is_locked());
    drop(g);
    assert!(!m.is_locked());
}

#[test]
fn wait_for_returns_early_on_notify() {
    let m = Mutex::new(false);
    let c = Condvar::new();
    std::thread::scope(|s| {
        let h = s.spawn(|| {
            let mut g = m.lock();
            let t0 = Instant::now();
            let r = c.wait_while_for(&mut g, |ready| !*ready, Duration::from_secs(10));
            assert!(!r.timed_out());
            t0.elapsed()
        });
        std::thread::sleep(Duration::from_millis(20));
        *m.lock() = true;
        c.notify_one();
        assert!(h.join().unwrap() < Duration::from_secs(5));
    });
}
