//! What lockstat costs here: one thread, an uncontended `SpinLock`
//! lock + increment + unlock, untracked and tracked (`lockstat::Tracked`),
//! and one `lockstat::now()` read. Best of 7 rounds, so a preempted round
//! does not count.
//!
//! `cargo run --release --example lockstat_cost [OPS]` (OPS per round,
//! default 5 M: fewer for a run under an instruction counter).

use klock::lockstat;
use std::hint::black_box;
use std::time::Instant;

const ROUNDS: usize = 7;

/// Best ns per call of `f` over the rounds of `ops` calls.
fn best(ops: u32, mut f: impl FnMut()) -> f64 {
    (0..ROUNDS)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..ops {
                f();
            }
            t.elapsed().as_nanos() as f64 / ops.max(1) as f64
        })
        .fold(f64::INFINITY, f64::min)
}

fn main() {
    let ops: u32 = std::env::args()
        .nth(1)
        .map_or(5_000_000, |a| a.parse().expect("OPS: a number"));
    let plain = klock::SpinLock::new(0u64);
    let tracked = lockstat::spinlock(0u64);
    // The clock and the class are set up on first use: not in the rounds.
    *tracked.lock() += 1;

    let untracked_ns = best(ops, || *black_box(&plain).lock() += 1);
    let tracked_ns = best(ops, || *black_box(&tracked).lock() += 1);
    let now_ns = best(ops, || {
        black_box(lockstat::now());
    });
    println!("lock+unlock, untracked:  {untracked_ns:6.2} ns");
    println!("lock+unlock, tracked:    {tracked_ns:6.2} ns");
    println!(
        "lockstat's cost:         {:6.2} ns",
        tracked_ns - untracked_ns
    );
    println!("lockstat::now():         {now_ns:6.2} ns");
    // The report converts the timestamps: hold times must be sane.
    let r = lockstat::snapshot();
    let Some(c) = r.classes.iter().find(|c| c.write.acquisitions > 0) else {
        return;
    };
    println!(
        "report: {} acquisitions, mean hold {:.1} ns",
        c.write.acquisitions,
        c.write.hold_avg_ns()
    );
}
