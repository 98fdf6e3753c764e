//! How often a contended `SpinLock` changes owner.
//!
//! Threads take a `klock::SpinLock` in a loop with nothing outside it,
//! like the `spinlock` bench suite, and the data it protects records who
//! took it last: every acquisition by another thread than the last owner
//! is an owner change. It prints the rate, the owner changes, how many
//! acquisitions a thread made in a row on average, and a histogram of
//! those runs (bucket `b` counts runs of `2^(b-1)` to `2^b - 1`
//! acquisitions; the last bucket is everything longer). A lock that
//! changes owner less often moves its cache line less often, so on a few
//! CPUs its rate goes up (and its short-term fairness down).
//!
//! ```sh
//! cargo run --release --example handovers            # 2 threads, 3 rounds of 0.5 s
//! cargo run --release --example handovers -- 4 5     # 4 threads, 5 rounds
//! ```

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Histogram buckets of run lengths.
const BUCKETS: usize = 8;

/// What the lock protects: the last owner and the counts.
struct Record {
    owner: usize,
    acquisitions: u64,
    changes: u64,
    runs: [u64; BUCKETS],
}

fn round(threads: usize) -> String {
    let lock = Arc::new(klock::SpinLock::new(Record {
        owner: usize::MAX,
        acquisitions: 0,
        changes: 0,
        runs: [0; BUCKETS],
    }));
    let stop = Arc::new(AtomicBool::new(false));
    let handles: Vec<_> = (0..threads)
        .map(|me| {
            let (lock, stop) = (lock.clone(), stop.clone());
            std::thread::spawn(move || {
                // Acquisitions since this thread last took the lock over.
                let mut run = 0u64;
                while !stop.load(Relaxed) {
                    let mut r = lock.lock();
                    r.acquisitions += 1;
                    if r.owner != me {
                        r.changes += 1;
                        if r.owner != usize::MAX && run > 0 {
                            let b = (64 - run.leading_zeros() as usize).min(BUCKETS - 1);
                            r.runs[b] += 1;
                        }
                        r.owner = me;
                        run = 0;
                    }
                    drop(r);
                    run += 1;
                }
            })
        })
        .collect();
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, Relaxed);
    for h in handles {
        h.join().expect("a locking thread panicked");
    }
    let secs = t0.elapsed().as_secs_f64();
    let r = lock.lock();
    format!(
        "{:>9.0} kop/s  {:>9} owner changes  {:>7.1} acquisitions a run  runs by length {:?}",
        r.acquisitions as f64 / secs / 1e3,
        r.changes,
        r.acquisitions as f64 / r.changes.max(1) as f64,
        r.runs
    )
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mut number = |name: &str, default: usize| match args.next() {
        None => default,
        Some(s) => match s.parse::<usize>() {
            Ok(n) if (1..=1024).contains(&n) => n,
            _ => {
                eprintln!("handovers: {name} must be a number from 1 to 1024 (got {s:?})");
                std::process::exit(2);
            }
        },
    };
    let threads = number("THREADS", 2);
    let rounds = number("ROUNDS", 3);
    println!("klock::SpinLock, {threads} threads, nothing outside the lock, 0.5 s a round");
    for _ in 0..rounds {
        println!("{}", round(threads));
    }
}
