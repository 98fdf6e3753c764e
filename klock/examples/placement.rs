//! Where a lock sits relative to its cache lines, and what that costs.
//!
//! One reader and one writer, pinned to CPUs 0 and 1, take an
//! `RwSem<u64>` (the writer bumps the `u64`) with a little busy work in
//! between, for each of the eight 8-byte
//! placements of the lock inside a cache line; then `std::sync::RwLock<u64>`
//! at the start of a line for comparison. It prints kop/s per placement and
//! which words share a line.
//!
//! ```sh
//! cargo run --release --example placement            # 3 rounds, 100 iterations outside
//! cargo run --release --example placement -- 5 200    # 5 rounds, 200 iterations outside
//! ```
//!
//! `RwSem`'s owner word (written at every acquisition) and count word are
//! its last words but one, so the data follows them: all three share a
//! line unless the lock sits 8, 16 or 24 bytes into one.

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// A lock `P` bytes into a cache line.
#[repr(C, align(64))]
struct At<const P: usize, L> {
    _pad: [u8; P],
    lock: L,
}

trait Rw: Sync {
    fn read(&self) -> u64;
    fn write(&self);
}

impl Rw for klock::RwSem<u64> {
    fn read(&self) -> u64 {
        *klock::RwSem::read(self)
    }
    fn write(&self) {
        *klock::RwSem::write(self) += 1;
    }
}

impl Rw for std::sync::RwLock<u64> {
    fn read(&self) -> u64 {
        *std::sync::RwLock::read(self).unwrap_or_else(|e| e.into_inner())
    }
    fn write(&self) {
        *std::sync::RwLock::write(self).unwrap_or_else(|e| e.into_inner()) += 1;
    }
}

/// kop/s of one reader and one writer on `lock` for `window`, the reader
/// pinned to CPU 0 and the writer to CPU 1 (left to the scheduler, the two
/// threads sometimes shared a CPU for a whole window and never contended).
fn rate(lock: &dyn Rw, outside: u64, window: Duration) -> f64 {
    let stop = AtomicBool::new(false);
    let counts = [AtomicU64::new(0), AtomicU64::new(0)];
    std::thread::scope(|s| {
        for (i, count) in counts.iter().enumerate() {
            let stop = &stop;
            s.spawn(move || {
                if let Err(e) = klock::rt::pin_to_cpu(i) {
                    eprintln!("placement: cannot pin a thread to CPU {i} ({e}); it runs unpinned");
                }
                let mut n = 0u64;
                while !stop.load(Relaxed) {
                    if i == 0 {
                        black_box(lock.read());
                    } else {
                        lock.write();
                    }
                    n += 1;
                    count.store(n, Relaxed);
                    for k in 0..outside {
                        black_box(k);
                    }
                }
            });
        }
        std::thread::sleep(Duration::from_millis(100));
        let before: u64 = counts.iter().map(|c| c.load(Relaxed)).sum();
        let t0 = Instant::now();
        std::thread::sleep(window);
        let after: u64 = counts.iter().map(|c| c.load(Relaxed)).sum();
        let secs = t0.elapsed().as_secs_f64();
        stop.store(true, Relaxed);
        (after - before) as f64 / secs / 1e3
    })
}

fn line(addr: usize) -> usize {
    addr / 64
}

/// Run `RwSem<u64>` at offset `P` and print one row.
fn row<const P: usize>(outside: u64, window: Duration) {
    let at = Box::new(At::<P, _> {
        _pad: [0; P],
        lock: klock::RwSem::new(0u64),
    });
    // SAFETY: only the raw lock's address is used.
    let base = unsafe { at.lock.raw() } as *const klock::rwsem::RawRwSem as usize;
    let (owner_at, count_at) = klock::rwsem::HOT_WORD_OFFSETS;
    let (owner, count, data) = (
        base + owner_at,
        base + count_at,
        at.lock.data_ptr() as usize,
    );
    let shared = if line(owner) == line(count) && line(count) == line(data) {
        "owner, count and data share a line"
    } else if line(count) == line(data) {
        "owner on another line"
    } else {
        "data on another line"
    };
    let kops = rate(&at.lock, outside, window);
    println!("rwsem at +{P:2}: {kops:9.0} kop/s   {shared}");
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize, default: u64| -> u64 {
        match args.get(i) {
            None => default,
            Some(s) => s.parse().unwrap_or_else(|_| {
                eprintln!(
                    "placement: `{s}` is not a number (usage: placement [ROUNDS] [OUTSIDE_ITERS])"
                );
                std::process::exit(2)
            }),
        }
    };
    let (rounds, outside) = (arg(0, 3), arg(1, 100));
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        eprintln!("placement: needs two CPUs (one reader and one writer on different CPUs)");
        std::process::exit(2);
    }
    let window = Duration::from_millis(500);
    for round in 1..=rounds {
        println!("round {round}");
        row::<0>(outside, window);
        row::<8>(outside, window);
        row::<16>(outside, window);
        row::<24>(outside, window);
        row::<32>(outside, window);
        row::<40>(outside, window);
        row::<48>(outside, window);
        row::<56>(outside, window);
        let std_lock = Box::new(At::<0, _> {
            _pad: [],
            lock: std::sync::RwLock::new(0u64),
        });
        let kops = rate(&std_lock.lock, outside, window);
        println!("std   at + 0: {kops:9.0} kop/s");
    }
}
