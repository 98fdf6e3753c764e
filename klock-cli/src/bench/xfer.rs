//! How far apart two of our CPUs are right now: the round trip of one
//! cache line between two threads pinned to the first two CPUs we may use.
//!
//! Every lock that changes hands between CPUs moves its word (and the data
//! it protects) at this speed. On a virtual machine the host may move the
//! vCPUs between sibling hyperthreads and distant cores *while a benchmark
//! runs*: on the 2-vCPU development host the round trip flips between
//! 56–200 ns and 350–600 ns every few seconds to minutes, and a lock's
//! throughput with it (see the README, "Reading the numbers"). The bench measures it
//! around every run so that runs can be compared at equal distance.

use crossbeam_utils::CachePadded;
use klock::rt::{allowed_cpus, pin_to_cpu};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The first two CPUs this thread may run on, if it may run on two.
fn two_cpus() -> Option<(usize, usize)> {
    let cpus = allowed_cpus();
    Some((*cpus.first()?, *cpus.get(1)?))
}

/// Mean cache-line round trip (ns) between two pinned threads over
/// `window`, or `None` with fewer than two usable CPUs (or if pinning
/// failed). Spawns its own two threads, so the caller's affinity is
/// untouched; never waits much longer than `window`, even when the other
/// thread cannot run.
pub fn round_trip_ns(window: Duration) -> Option<f64> {
    let (a, b) = two_cpus()?;
    let line = CachePadded::new(AtomicU64::new(0));
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let pong = s.spawn(|| {
            if pin_to_cpu(b).is_err() {
                return false;
            }
            while !stop.load(Ordering::Relaxed) {
                // Answer each odd value (a ping) with the next even one.
                let v = line.load(Ordering::Acquire);
                if v & 1 == 1 {
                    line.store(v + 1, Ordering::Release);
                }
            }
            true
        });
        let ping = s.spawn(|| {
            if pin_to_cpu(a).is_err() {
                return None;
            }
            let start = Instant::now();
            let end = start + window;
            let mut trips = 0u64;
            'outer: while Instant::now() < end {
                for _ in 0..64 {
                    let v = line.load(Ordering::Relaxed);
                    line.store(v + 1, Ordering::Release);
                    let mut spins = 0u32;
                    while line.load(Ordering::Acquire) == v + 1 {
                        spins = spins.wrapping_add(1);
                        if spins.is_multiple_of(65_536) && Instant::now() >= end {
                            break 'outer;
                        }
                    }
                    trips += 1;
                }
            }
            let ns = start.elapsed().as_nanos() as f64;
            (trips > 0).then(|| ns / trips as f64)
        });
        let result = ping.join().ok().flatten();
        stop.store(true, Ordering::Relaxed);
        let pinned = pong.join().unwrap_or(false);
        result.filter(|_| pinned)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measures_a_round_trip_or_says_it_cannot() {
        let t0 = Instant::now();
        let before = two_cpus();
        let r = round_trip_ns(Duration::from_millis(20));
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "the probe must not hang"
        );
        assert_eq!(two_cpus(), before, "the caller's affinity is untouched");
        match (before, r) {
            // At least a few ns; no upper bound: with other tests running
            // on the same CPUs (cargo test runs them in parallel) a pinned
            // helper waits for its CPU and a trip can take milliseconds.
            (Some(_), Some(ns)) => assert!(ns.is_finite() && ns > 5.0, "{ns} ns"),
            (Some(_), None) => panic!("two CPUs allowed but no round trip measured"),
            (None, r) => assert!(r.is_none()),
        }
    }
}
