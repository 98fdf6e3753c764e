//! What one uncontended `lock` + `unlock` of a `SpinLock<u64>` costs in a
//! tight loop (an increment of the protected counter, then a store to
//! another cache line), for the queued spinlock's two words: the default
//! (`klock::RawQSpinLock`, eight bytes on x86-64) and the kernel's four
//! bytes (`klock::RawQSpinLock32`).
//!
//! ```text
//! cargo run --release -p klock --features events --example spin_pair [ROUNDS]
//! ```
//!
//! `klock bench uncontended` runs the same pair inside its benchmark loop
//! (a random number, the critical section's kind, the stop flag), where
//! that loop's own cost is part of every figure.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Instant;

/// Pairs per measurement.
const PAIRS: u64 = 50_000_000;

/// The loop's operation count, on a line of its own.
#[repr(align(64))]
struct Line(AtomicU64);
static SEQ: Line = Line(AtomicU64::new(0));

/// ns per pair on lock `m`.
fn pair<R: lock_api::RawMutex>(m: &lock_api::Mutex<R, u64>) -> f64 {
    let t = Instant::now();
    for i in 0..PAIRS {
        *std::hint::black_box(m).lock() += 1;
        SEQ.0.store(i, Relaxed);
    }
    let ns = t.elapsed().as_nanos() as f64 / PAIRS as f64;
    assert_eq!(*m.lock(), PAIRS);
    ns
}

fn main() {
    let rounds = match std::env::args().nth(1) {
        None => 3,
        Some(s) => match s.parse::<u32>() {
            Ok(n) if (1..=100).contains(&n) => n,
            _ => {
                eprintln!("spin_pair: ROUNDS must be a number from 1 to 100 (got {s:?})");
                std::process::exit(2);
            }
        },
    };
    println!(
        "ns per lock+unlock pair, one thread, {PAIRS} pairs a round; words: default {} bytes, 32 {} bytes",
        core::mem::size_of::<klock::RawQSpinLock>(),
        core::mem::size_of::<klock::RawQSpinLock32>()
    );
    for _ in 0..rounds {
        let default = pair(&klock::SpinLock::new(0));
        let word32 = pair(&lock_api::Mutex::<klock::RawQSpinLock32, u64>::new(0));
        println!("default word {default:.2}   32-bit word {word32:.2}");
    }
}
