//! Stress: readers and writers hammer one `klock::RwLock` for a fixed time.
//! Writers update two fields non-atomically and count themselves inside;
//! readers must never see the fields disagree or a writer inside, and the
//! final count must equal the writes made. Oversubscribed (8 threads on
//! however few CPUs), so queue hand-overs to preempted waiters happen too.
#![cfg(not(loom))]

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

struct Pair {
    a: u64,
    b: u64,
}

#[test]
fn readers_and_writers_exclude_under_stress() {
    let lock = klock::RwLock::new(Pair { a: 0, b: 0 });
    let writers_inside = AtomicU32::new(0);
    let readers_inside = AtomicU32::new(0);
    let writes = AtomicU64::new(0);
    let reads = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let deadline = Instant::now() + Duration::from_millis(1500);
    std::thread::scope(|s| {
        for w in 0..3 {
            let (lock, wi, ri, writes, stop) =
                (&lock, &writers_inside, &readers_inside, &writes, &stop);
            s.spawn(move || {
                let mut n = 0u64;
                while !stop.load(Relaxed) {
                    let mut g = lock.write();
                    assert_eq!(wi.fetch_add(1, Relaxed), 0, "two writers inside");
                    assert_eq!(ri.load(Relaxed), 0, "a writer beside readers");
                    g.a += 1;
                    std::hint::spin_loop();
                    g.b += 1;
                    wi.fetch_sub(1, Relaxed);
                    drop(g);
                    n += 1;
                    if (n + w).is_multiple_of(64) {
                        std::thread::yield_now();
                    }
                }
                writes.fetch_add(n, Relaxed);
            });
        }
        for _ in 0..5 {
            let (lock, wi, ri, reads, stop) =
                (&lock, &writers_inside, &readers_inside, &reads, &stop);
            s.spawn(move || {
                let mut n = 0u64;
                while !stop.load(Relaxed) {
                    let g = lock.read();
                    ri.fetch_add(1, Relaxed);
                    assert_eq!(wi.load(Relaxed), 0, "a reader beside a writer");
                    assert_eq!(g.a, g.b, "torn write seen by a reader");
                    ri.fetch_sub(1, Relaxed);
                    drop(g);
                    n += 1;
                }
                reads.fetch_add(n, Relaxed);
            });
        }
        while Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        stop.store(true, Relaxed);
    });
    let p = lock.into_inner();
    let w = writes.load(Relaxed);
    assert_eq!((p.a, p.b), (w, w));
    assert!(w > 0 && reads.load(Relaxed) > 0, "no progress: {w} writes");
}
