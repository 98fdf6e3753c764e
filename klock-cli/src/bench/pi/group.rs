//! The pi_stress workload: one group's three real-time threads and the
//! barrier they meet at.

use super::{HOG_BOUND, PRIO_HIGH, PRIO_LOW, PRIO_MED, RT_CPU};
use crate::bench::peers::BenchLock;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::*};
use std::time::{Duration, Instant};

// ---------------------------------------------------------------- barrier

/// A futex barrier for three threads (no internal mutex that could itself
/// invert priorities). `wait` returns false when `stop` is set.
pub(super) struct Barrier {
    count: AtomicU32,
    gen: AtomicU32,
    n: u32,
}

impl Barrier {
    pub(super) fn new(n: u32) -> Self {
        Self {
            count: AtomicU32::new(0),
            gen: AtomicU32::new(0),
            n,
        }
    }

    fn wait(&self, stop: &AtomicBool) -> bool {
        // Read the generation before arriving: the last arriver bumps it.
        let g = self.gen.load(Acquire);
        if self.count.fetch_add(1, AcqRel) + 1 == self.n {
            self.count.store(0, Relaxed);
            // Release pairs with the waiters' Acquire load of `gen`.
            self.gen.fetch_add(1, Release);
            // i32::MAX: the kernel reads the count as an int (u32::MAX would be -1).
            klock::sys::futex_wake(&self.gen, i32::MAX as u32);
            return true;
        }
        loop {
            if self.gen.load(Acquire) != g {
                return true;
            }
            if stop.load(Relaxed) {
                return false;
            }
            klock::sys::futex_wait(&self.gen, g, Some(Duration::from_millis(10)));
        }
    }
}

// ---------------------------------------------------------------- groups

pub(super) struct Group<L> {
    pub(super) lock: L,
    pub(super) barrier: Barrier,
    pub(super) high_trying: AtomicBool,
    pub(super) high_done: AtomicBool,
    /// Set by the watchdog: give up the current iteration.
    pub(super) abort: AtomicBool,
    /// Completed inversions.
    pub(super) inversions: AtomicU64,
    /// Iterations ended (completed or aborted): the watchdog's progress mark.
    pub(super) iterations: AtomicU64,
}

/// Busy-wait until `done()` or the hard bound; reads the clock every 64 spins.
fn busy_until(bound: Duration, mut done: impl FnMut() -> bool) {
    let end = Instant::now() + bound;
    let mut n = 0u32;
    while !done() {
        n = n.wrapping_add(1);
        if n.is_multiple_of(64) && Instant::now() >= end {
            return;
        }
        std::hint::spin_loop();
    }
}

/// Become a real-time thread on RT_CPU: FIFO first, then pin (a normal
/// thread pinned to a CPU that real-time threads keep busy might never run).
pub(super) fn become_rt(prio: i32) -> Result<(), String> {
    klock::rt::set_fifo(prio)
        .map_err(|e| format!("sched_setscheduler(SCHED_FIFO, {prio}): {e}"))?;
    klock::rt::pin_to_cpu(RT_CPU).map_err(|e| format!("sched_setaffinity(CPU {RT_CPU}): {e}"))
}

pub(super) fn drop_rt() {
    let _ = klock::rt::set_normal();
    let _ = klock::rt::pin_to_cpu(0);
}

#[derive(Clone, Copy)]
pub(super) enum Role3 {
    Low,
    Medium,
    High,
}

pub(super) fn group_thread<L: BenchLock>(
    g: &Group<L>,
    role: Role3,
    stop: &AtomicBool,
) -> Result<(), String> {
    become_rt(match role {
        Role3::Low => PRIO_LOW,
        Role3::Medium => PRIO_MED,
        Role3::High => PRIO_HIGH,
    })?;
    let quit = || stop.load(Relaxed);
    loop {
        if let Role3::Low = role {
            // SCHED_FIFO round-robin by hand: a group's low thread is
            // always running or preempted (at the head of its priority's
            // queue) while its group cycles, so without this yield the
            // other groups' low threads (same priority) would never run.
            std::thread::yield_now();
        }
        if !g.barrier.wait(stop) {
            break;
        }
        match role {
            Role3::Low => {
                let ok = g.lock.write(|| {
                    if !g.barrier.wait(stop) {
                        return false;
                    }
                    // Hold the lock until high wants it (it then blocks, and
                    // we must be boosted to get here).
                    busy_until(HOG_BOUND, || {
                        g.high_trying.load(Acquire) || g.abort.load(Relaxed) || quit()
                    });
                    true
                });
                if !ok {
                    break;
                }
            }
            Role3::Medium => {
                if !g.barrier.wait(stop) {
                    break;
                }
                // The CPU hog: starves low unless low inherits high's priority.
                busy_until(HOG_BOUND, || {
                    g.high_done.load(Acquire) || g.abort.load(Relaxed) || quit()
                });
            }
            Role3::High => {
                if !g.barrier.wait(stop) {
                    break;
                }
                g.high_trying.store(true, Release);
                g.lock.write(|| g.high_done.store(true, Release));
                if !g.abort.load(Relaxed) {
                    g.inversions.fetch_add(1, Relaxed);
                }
                g.iterations.fetch_add(1, Release);
            }
        }
        if !g.barrier.wait(stop) {
            break;
        }
        if let Role3::High = role {
            // The others are past the last barrier and read these only
            // after the next middle barrier, which waits for us.
            g.high_trying.store(false, Relaxed);
            g.high_done.store(false, Relaxed);
            g.abort.store(false, Relaxed);
        }
    }
    drop_rt();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn barrier_releases_three_and_stops() {
        let b = Arc::new(Barrier::new(3));
        let stop = Arc::new(AtomicBool::new(false));
        for _ in 0..50 {
            let hs: Vec<_> = (0..2)
                .map(|_| {
                    let (b, stop) = (b.clone(), stop.clone());
                    std::thread::spawn(move || b.wait(&stop))
                })
                .collect();
            assert!(b.wait(&stop));
            for h in hs {
                assert!(h.join().unwrap());
            }
        }
        stop.store(true, Relaxed);
        let t = Instant::now();
        assert!(!b.wait(&stop));
        assert!(t.elapsed() < Duration::from_secs(1));
    }
}
